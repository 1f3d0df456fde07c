// The guide's attention-backend and use_kernels snippets in C++:
//
//   model = AutoModelForCausalLM.from_pretrained(model_id, attn_implementation="flash_attention_2")
//   model = AutoModelForCausalLM.from_pretrained(model_id, use_kernels=True)
//
// Loads the model once per attention backend the device offers (eager, sdpa,
// and on a GPU flash_attention_2/3), then once with use_kernels and a
// KernelConfig, runs the same greedy continuation with each and checks they
// agree (float32: the backends differ only in rounding far below a greedy
// choice). Exit 1 when they do not, 2 on bad input.
//
// Usage: example_attention_and_kernels MODEL_DIR
#include <iostream>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/hipformers.h"

namespace hf = hipformers;

namespace {

std::vector<int32_t> continuation(const hf::PreTrainedModel& model, const std::vector<int32_t>& prompt) {
  hf::GenerationOptions options;
  options.max_new_tokens = 12;
  options.do_sample = false;
  std::vector<int32_t> out = model.generate(prompt, options);
  return {out.begin() + static_cast<std::ptrdiff_t>(prompt.size()), out.end()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR\n";
    return 2;
  }
  try {
    auto tokenizer = hf::AutoTokenizer::from_pretrained(argv[1]);
    const std::vector<int32_t> prompt = tokenizer.encode("The French Bread Law states");
    const hf::Device device = hf::resolve_device("auto");
    const std::string key(hf::kernels::device_key(device));

    std::vector<int32_t> reference;
    bool agree = true;
    for (const std::string& backend : hf::kernels::attention_backends(key)) {
      if (backend.find('/') != std::string::npos) continue;  // kernel-repository aliases resolve to these
      hf::PretrainedOptions load;
      load.dtype = "float32";
      load.device_map = device.str();
      load.attn_implementation = backend;
      auto model = hf::AutoModelForCausalLM::from_pretrained(argv[1], load);
      const std::vector<int32_t> ids = continuation(model, prompt);
      if (reference.empty()) reference = ids;
      agree = agree && ids == reference;
      std::cout << "attn_implementation=" << backend << " (" << model.attention_backend().kernel << "): "
                << tokenizer.decode(ids, true) << "\n";
    }

    // use_kernels with a KernelConfig: pin RMSNorm to this device's default kernel.
    hf::kernels::KernelConfig config;
    config.set(hf::kernels::LayerKind::kRMSNorm, key,
               hf::kernels::default_kernel(hf::kernels::LayerKind::kRMSNorm, key).name);
    hf::PretrainedOptions load;
    load.dtype = "float32";
    load.device_map = device.str();
    load.use_kernels = true;
    load.kernel_config = config;
    auto model = hf::AutoModelForCausalLM::from_pretrained(argv[1], load);
    const std::vector<int32_t> ids = continuation(model, prompt);
    agree = agree && ids == reference;
    std::cout << "use_kernels: " << model.kernels().to_json().dump() << ": " << tokenizer.decode(ids, true) << "\n";
    std::cout << (agree ? "all backends agree\n" : "backends DISAGREE\n");
    return agree ? 0 : 1;
  } catch (const hf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
