// The `hipformers` CLI: one registration function per command family. Each
// command prints its result on stdout and nothing else; errors surface as
// hipformers::Error and become one line on stderr with exit code 2 (main.cc).
#pragma once

#include <CLI/CLI.hpp>

namespace hipformers::cli {

void add_env_commands(CLI::App& app);        // env, devices
void add_tokenizer_commands(CLI::App& app);  // tokenize, detokenize, chat-template
void add_generate_commands(CLI::App& app);   // generate, logits
void add_make_model_commands(CLI::App& app);  // make-model
void add_bench_commands(CLI::App& app);       // bench
void add_kernels_commands(CLI::App& app);     // kernels

}  // namespace hipformers::cli
