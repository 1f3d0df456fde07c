// libFuzzer target: SafetensorsFile::parse must either accept the bytes or throw
// hipformers::Error, and every view it returns must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "hipformers/core/error.h"
#include "hipformers/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    hipformers::SafetensorsFile file = hipformers::SafetensorsFile::parse(bytes, "fuzz.safetensors");
    const std::byte* begin = bytes.data();
    const std::byte* end = begin + bytes.size();
    volatile unsigned sum = 0;
    for (const hipformers::TensorView& t : file.tensors()) {
      // Out-of-range views trap here even without ASan.
      if (t.nbytes > 0 && (t.data < begin || t.data > end || static_cast<size_t>(end - t.data) < t.nbytes))
        __builtin_trap();
      // Touch every byte so ASan sees any read outside the buffer.
      unsigned s = 0;
      for (size_t i = 0; i < t.nbytes; ++i) s += static_cast<unsigned>(t.data[i]);
      sum = sum + s;
      if (file.find(t.name) != &t) __builtin_trap();
    }
  } catch (const hipformers::Error&) {
    // Rejected input: expected.
  }
  return 0;
}
