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

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR\n";
    return 2;
  }
  try {
    auto tokenizer = hipformers::AutoTokenizer::from_pretrained(argv[1]);
    // "auto": the first visible GPU on a CUDA/ROCm build that sees one, else the CPU.
    hipformers::PretrainedOptions load;
    load.dtype = "auto";
    load.device_map = "auto";
    auto model = hipformers::AutoModelForCausalLM::from_pretrained(argv[1], load);
    std::cout << "device: " << model.device().str() << "\n";
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
