// Small helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "hipformers/core/error.h"

namespace hipformers::testing {

// A fresh directory named after the running test, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "hf_test") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `f`, which must throw hipformers::Error; returns its kind and message
// (and records a test failure if nothing was thrown).
template <typename F>
std::pair<ErrorKind, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "no hipformers::Error thrown";
  return {ErrorKind::kRuntime, ""};
}

}  // namespace hipformers::testing
