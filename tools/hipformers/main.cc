#include <cstdio>
#include <iostream>
#include <new>

#include "commands.h"
#include "hipformers/core/error.h"
#include "hipformers/core/version.h"

namespace {

// Bad input of any kind exits with 2; 1 is kept for bugs (an internal error).
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 1;

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::cerr << "hipformers: error: " << message << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hipformers: run Hugging Face language models natively on AMD (ROCm/HIP), NVIDIA (CUDA) and CPU"};
  app.set_version_flag("--version", std::string("hipformers ") + HIPFORMERS_VERSION);
  app.require_subcommand(1);
  hipformers::cli::add_env_commands(app);
  hipformers::cli::add_tokenizer_commands(app);
  hipformers::cli::add_generate_commands(app);
  hipformers::cli::add_make_model_commands(app);
  hipformers::cli::add_bench_commands(app);
  hipformers::cli::add_kernels_commands(app);
  try {
    // CLI11 reports an unknown command as a missing one; name it instead.
    bool known = argc <= 1 || argv[1][0] == '-';
    std::string names;
    for (auto* sub : app.get_subcommands({})) {
      known = known || sub->check_name(argv[1]);
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      throw hipformers::Error(hipformers::ErrorKind::kInvalidInput,
                              std::string("unknown command '") + argv[1] + "'; commands: " + names);
    }
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + " (see 'hipformers --help')");
    return kExitBadInput;
  } catch (const hipformers::Error& e) {
    print_error(e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return kExitBadInput;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitInternal;
  }
  return 0;
}
