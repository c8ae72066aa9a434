#include "kiln/device.h"

#include "kiln/error.h"

namespace kiln {

Device::Device(const std::string& spec) {
  std::string kind = spec;
  int idx = 0;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    kind = spec.substr(0, colon);
    std::string num = spec.substr(colon + 1);
    KILN_CHECK(!num.empty() && num.find_first_not_of("0123456789") == std::string::npos && num.size() < 4,
               "invalid device string '", spec, "': expected cpu, cuda, cuda:N or meta");
    idx = std::stoi(num);
  }
  if (kind == "cpu") type = DeviceType::CPU;
  else if (kind == "cuda") type = DeviceType::CUDA;
  else if (kind == "meta") type = DeviceType::Meta;
  else KILN_FAIL("invalid device string '", spec, "': expected cpu, cuda, cuda:N or meta");
  KILN_CHECK(type == DeviceType::CUDA || idx == 0, "invalid device string '", spec, "': only cuda takes an index");
  index = static_cast<int8_t>(idx);
}

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "?";
}

std::string Device::str() const {
  std::string s(device_type_name(type));
  if (type == DeviceType::CUDA) s += ":" + std::to_string(index);
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kiln
