// Where a tensor lives.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA, Meta };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;

  Device() = default;
  Device(DeviceType t, int idx = 0) : type(t), index(static_cast<int8_t>(idx)) {}
  // Parses "cpu", "cuda", "cuda:1", "meta".
  Device(const std::string& spec);  // NOLINT: implicit like torch.device("cuda")
  Device(const char* spec) : Device(std::string(spec)) {}

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};

inline const Device kCPU{DeviceType::CPU};
std::string_view device_type_name(DeviceType t);
std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace kiln
