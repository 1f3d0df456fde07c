// Runs the built `hipformers` binary and captures what it printed, for tests
// of the command line's contract (stdout content, one-line errors, exit codes).
#pragma once

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

}  // namespace hipformers::testing
