#include "hipformers/runtime/visible_devices.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

struct ParsedList {
  std::string variable;
  std::string value;
  std::vector<std::string> entries;  // decimal indices or UUIDs, trimmed
};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool is_decimal(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_uuid(const std::string& s) {
  // NVIDIA: GPU-<uuid> or MIG-<uuid>; AMD: GPU-<16 hex digits>. Accept a
  // prefix (both drivers match unique prefixes) of hex digits and dashes.
  if (s.rfind("GPU-", 0) != 0 && s.rfind("MIG-", 0) != 0) return false;
  if (s.size() <= 4) return false;
  return std::all_of(s.begin() + 4, s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
}

[[noreturn]] void fail(const ParsedList& list, const std::string& why) {
  throw_invalid(list.variable + "='" + list.value + "': " + why);
}

ParsedList parse_list(const std::string& variable, const std::string& value) {
  ParsedList list{variable, value, {}};
  std::string t = trim(value);
  if (t.empty()) return list;   // set but empty: no device is visible (driver semantics)
  if (t == "-1") return list;   // the common idiom for "hide every GPU"
  std::set<std::string> seen;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = t.find(',', start);
    std::string entry = trim(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (entry.empty()) fail(list, "empty entry in the list");
    if (is_decimal(entry)) {
      entry = std::to_string(std::stol(entry));  // "01" and "1" are the same device
    } else if (!is_uuid(entry)) {
      fail(list, "entry '" + entry + "' is neither a device index nor a GPU-/MIG- UUID");
    }
    if (!seen.insert(entry).second) fail(list, "device " + entry + " is listed twice");
    list.entries.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return list;
}

void check_uuid(const ParsedList& list, const std::string& entry, const std::vector<std::string>& uuids) {
  if (uuids.empty()) return;
  int matches = 0;
  for (const auto& u : uuids)
    if (u.rfind(entry, 0) == 0) ++matches;
  if (matches == 0) fail(list, "no GPU has UUID " + entry);
  if (matches > 1) fail(list, "UUID prefix " + entry + " matches several GPUs");
}

}  // namespace

VisibleDevicesEnv VisibleDevicesEnv::from_process() {
  VisibleDevicesEnv env;
  auto get = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  env.cuda_visible_devices = get("CUDA_VISIBLE_DEVICES");
  env.hip_visible_devices = get("HIP_VISIBLE_DEVICES");
  env.rocr_visible_devices = get("ROCR_VISIBLE_DEVICES");
  return env;
}

VisibleDeviceMapping resolve_visible_devices(GpuPlatform platform, const VisibleDevicesEnv& env,
                                             int physical_count,
                                             const std::vector<std::string>& physical_uuids) {
  VisibleDeviceMapping mapping;
  // Start from every physical device (0..count-1) when the count is known.
  std::vector<std::string> available;
  bool available_known = physical_count >= 0;
  for (int i = 0; i < physical_count; ++i) available.push_back(std::to_string(i));

  auto apply = [&](const std::string& variable, const std::string& value, bool indexes_into_previous) {
    ParsedList list = parse_list(variable, value);
    std::vector<std::string> next;
    for (const auto& entry : list.entries) {
      if (is_decimal(entry)) {
        long index = std::stol(entry);
        if (available_known && index >= static_cast<long>(available.size())) {
          std::string scope = indexes_into_previous ? " left visible by the previous variable" : "";
          fail(list, "device " + entry + " is out of range: " + std::to_string(available.size()) + " device(s)" +
                         scope + (available.size() ? " (valid: 0-" + std::to_string(available.size() - 1) + ")" : ""));
        }
        next.push_back(available_known ? available[index] : entry);
      } else {
        check_uuid(list, entry, physical_uuids);
        next.push_back(entry);
      }
    }
    available = std::move(next);
    available_known = true;
    mapping.restricted = true;
    if (!mapping.description.empty()) mapping.description += " then ";
    mapping.description += variable + "=" + value;
  };

  if (platform == GpuPlatform::kCuda) {
    if (env.cuda_visible_devices) apply("CUDA_VISIBLE_DEVICES", *env.cuda_visible_devices, false);
  } else {
    if (env.rocr_visible_devices) apply("ROCR_VISIBLE_DEVICES", *env.rocr_visible_devices, false);
    // HIP honours HIP_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES when that is unset.
    if (env.hip_visible_devices) {
      apply("HIP_VISIBLE_DEVICES", *env.hip_visible_devices, env.rocr_visible_devices.has_value());
    } else if (env.cuda_visible_devices) {
      apply("CUDA_VISIBLE_DEVICES", *env.cuda_visible_devices, env.rocr_visible_devices.has_value());
    }
  }
  if (!mapping.restricted) mapping.description = "all devices (no *_VISIBLE_DEVICES variable set)";
  mapping.physical_ids = std::move(available);
  return mapping;
}

}  // namespace hipformers
