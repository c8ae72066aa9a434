// TensorOptions: dtype, device and requires_grad for factory functions, as in
// libtorch: kiln::zeros({2, 3}, kiln::kFloat64) or
// kiln::ones({4}, kiln::TensorOptions().dtype(kiln::kInt64).device("cpu")).
#pragma once
#include <optional>

#include "kiln/device.h"
#include "kiln/dtype.h"

namespace kiln {

struct TensorOptions {
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}          // NOLINT
  TensorOptions(Device d) : device_(d) {}        // NOLINT
  TensorOptions(DeviceType d) : device_(d) {}    // NOLINT
  TensorOptions(const char* d) : device_(d) {}   // NOLINT

  TensorOptions dtype(DType t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  // The dtype to use when none was given (the default float dtype).
  DType dtype_or_default() const { return dtype_ ? *dtype_ : default_dtype(); }
  Device device_or_default() const { return device_ ? *device_ : kCPU; }
};

inline TensorOptions dtype(DType t) { return TensorOptions(t); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

}  // namespace kiln
