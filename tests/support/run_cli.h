// Runs the built `hipformers` binary and captures what it printed, for tests
// of the command line's contract (stdout content, one-line errors, exit codes).
#pragma once

#include <filesystem>
#include <string>

namespace hipformers::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the binary's path as-is (shell syntax, quote yourself);
// `env_prefix` goes before it, e.g. "CUDA_VISIBLE_DEVICES=0,,1".
CliResult run_cli(const std::string& args, const std::string& env_prefix = "");

// Single-quotes a string for the shell.
std::string shell_quote(const std::string& s);

// The CLI's contract for bad input: exit code 2, nothing on stdout, and exactly
// one line on stderr, starting "hipformers: error: " and containing `needle`.
void expect_one_line_error(const CliResult& r, const std::string& needle);

// A path in this process's scratch directory for CLI tests (created on demand).
std::filesystem::path scratch_path(const std::string& name);

}  // namespace hipformers::testing
