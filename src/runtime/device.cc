#include "hipformers/runtime/device.h"

#include <charconv>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

constexpr const char* kAcceptedForms = "expected 'cpu', 'cuda', 'cuda:N', 'auto' or a GPU index N";

std::optional<int> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

DeviceRequest parse_device_string(std::string_view text) {
  if (text == "cpu") return {DeviceRequest::Kind::kCpu, std::nullopt};
  if (text == "auto") return {DeviceRequest::Kind::kAuto, std::nullopt};
  if (text == "cuda" || text == "gpu") return {DeviceRequest::Kind::kGpu, std::nullopt};
  for (std::string_view prefix : {"cuda:", "gpu:"}) {
    if (text.substr(0, prefix.size()) == prefix) {
      if (auto index = parse_index(text.substr(prefix.size()))) return {DeviceRequest::Kind::kGpu, index};
      throw_invalid("device '" + std::string(text) + "': bad index; " + kAcceptedForms);
    }
  }
  if (auto index = parse_index(text)) return {DeviceRequest::Kind::kGpu, index};
  throw_invalid("device '" + std::string(text) + "' is not recognised; " + kAcceptedForms);
}

Device resolve_device(const DeviceRequest& request, int gpu_count, bool with_gpu) {
  switch (request.kind) {
    case DeviceRequest::Kind::kCpu: return Device::cpu();
    case DeviceRequest::Kind::kAuto: return gpu_count > 0 ? Device::gpu(0) : Device::cpu();
    case DeviceRequest::Kind::kGpu: break;
  }
  int index = request.index.value_or(0);
  std::string name = "cuda:" + std::to_string(index);
  if (!with_gpu)
    throw_invalid("device '" + name + "' requested, but this hipformers was built without a GPU backend "
                  "(rebuild with the 'cuda' or 'hip' preset)");
  if (gpu_count == 0) throw_invalid("device '" + name + "' requested, but no GPU is visible (see `hipformers env`)");
  if (index >= gpu_count)
    throw_invalid("device '" + name + "' is out of range: " + std::to_string(gpu_count) +
                  " GPU(s) visible (cuda:0" + (gpu_count > 1 ? "..cuda:" + std::to_string(gpu_count - 1) : "") + ")");
  return Device::gpu(index);
}

Device resolve_device(std::string_view text) {
  DeviceRequest request = parse_device_string(text);
  int count = request.kind == DeviceRequest::Kind::kCpu ? 0 : gpu_count();
  return resolve_device(request, count, built_with_gpu());
}

}  // namespace hipformers
