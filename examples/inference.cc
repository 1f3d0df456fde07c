// The guide's inference snippet in C++:
//
//   device = "cuda" if torch.cuda.is_available() else "cpu"
//   tokenizer = AutoTokenizer.from_pretrained(model_dir)
//   model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto", device_map="auto")
//   inputs = tokenizer("The French Bread Law states", return_tensors="pt").to(device)
//   outputs = model.generate(**inputs, max_new_tokens=50, do_sample=False)
//   print(tokenizer.decode(outputs[0], skip_special_tokens=True))
//
// Usage: example_inference MODEL_DIR
#include <iostream>

#include "hipformers/core/error.h"
#include "hipformers/hipformers.h"
#include "hipformers/runtime/device.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR\n";
    return 2;
  }
  try {
    const hipformers::Device device = hipformers::resolve_device("auto");
    std::cout << "device: " << device.str() << "\n";
    auto tokenizer = hipformers::AutoTokenizer::from_pretrained(argv[1]);
    // device_map "cpu" until the GPU kernels land ("auto" would pick the GPU above).
    auto model = hipformers::AutoModelForCausalLM::from_pretrained(argv[1], {.dtype = "auto", .device_map = "cpu"});
    std::vector<int32_t> inputs = tokenizer.encode("The French Bread Law states");
    hipformers::GenerationOptions options;
    options.max_new_tokens = 50;
    options.do_sample = false;
    std::vector<int32_t> outputs = model.generate(inputs, options);
    std::cout << tokenizer.decode(outputs, true) << "\n";
  } catch (const hipformers::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
