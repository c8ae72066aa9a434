// Automatic mixed precision, as torch.autocast: inside the guard's scope, ops on tensors of its
// device run in the precision PyTorch's autocast op lists give them (Note [Autocast]).
//
//   {
//     kiln::autocast guard(kiln::kCPU);               // bfloat16 on the CPU, float16 on CUDA
//     Tensor loss = cross_entropy(model->forward(x), y);   // matmuls in bf16, the loss in fp32
//   }
//   loss.backward();                                   // outside: grads have the params' dtype
#pragma once
#include <optional>

#include "kiln/device.h"
#include "kiln/dtype.h"

namespace kiln {

class autocast {
 public:
  // dtype: float16 or bfloat16 (default: bfloat16 on the CPU, float16 on CUDA, as torch).
  // enabled = false turns autocast off for the scope (a region that needs full precision).
  // cache_enabled: within the outermost scope, each parameter (a leaf that requires grad) is
  // cast once, not at every use.
  explicit autocast(Device device, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                    bool cache_enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_;
};

// torch.is_autocast_enabled(device_type) / torch.get_autocast_dtype(device_type).
bool is_autocast_enabled(DeviceType device);
DType get_autocast_dtype(DeviceType device);
// torch.clear_autocast_cache(): drops the cached casts of parameters.
void clear_autocast_cache();

}  // namespace kiln
