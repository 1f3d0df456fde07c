// `hipformers make-model` as a function, so other commands (bench --make-model)
// write the same checkpoints without a second copy of the code.
#pragma once

#include <cstdint>
#include <string>

namespace hipformers::cli {

struct MakeModelArgs {
  std::string shape, output, dtype = "bfloat16", tokenizer_dir;
  double std_dev = 0.1;
  uint64_t seed = 0;
};

// Writes the checkpoint and prints one "wrote ..." line on stdout; every
// argument is checked first (Error(kInvalidInput) / kNotFound), and an
// existing non-empty --output is never written into.
void run_make_model(const MakeModelArgs& args);

}  // namespace hipformers::cli
