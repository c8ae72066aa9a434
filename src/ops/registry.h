// The op registry: per-op meta function, decomposition, VJP rule and kernels,
// filled in by KILN_REGISTER_* next to each definition and derived from
// ops.def for everything else (Note [Op table]).
#pragma once
#include <span>
#include <vector>

#include "core/tensor_impl.h"
#include "ops/attrs.h"
#include "ops/op_id.h"

namespace kiln {

enum class OpKind : uint8_t { Prim, Composite };
enum OpFlags : uint32_t {
  POINTWISE = 1u << 0,
  REDUCTION = 1u << 1,
  VIEW = 1u << 2,
  RANDOM = 1u << 3,
  DATA_DEPENDENT = 1u << 4,
  FACTORY = 1u << 5,
  NONDIFF = 1u << 6,
  MUTATES = 1u << 7,  // writes input 0 (or the first tensor list)
  METHOD = 1u << 8,   // also a Tensor method (Note [Tensor methods]); nothing below the API reads it
  // Note [Autocast]: what kiln::autocast does to the op's floating inputs on its device.
  AUTOCAST_LOW = 1u << 9,         // cast to the autocast dtype (matmuls, convolutions, attention)
  AUTOCAST_FP32 = 1u << 10,       // cast to float32 (losses, ...) on every device
  AUTOCAST_FP32_CUDA = 1u << 11,  // cast to float32 on CUDA only (PyTorch's CPU list keeps them low)
  AUTOCAST_PROMOTE = 1u << 12,    // cast to the widest floating type among them
  // Computes in float32 itself: the op's last attr is `DType? dtype` (its result's dtype), which
  // autocast sets to float32, leaving the inputs as they are, so a kernel can read low-precision
  // inputs directly rather than through a cast copy (torch's fp32_set_opt_dtype).
  AUTOCAST_FP32_DTYPE = 1u << 13,
  // Its kernel refuses some input values (one_hot's classes): a graph lowered to prims keeps it
  // whole, so the kernel checks every call (Note [Value checks]).
  CHECKS_VALUES = 1u << 14,
  // Its VJP takes an undefined gradient for an output that no gradient reached, where others get
  // zeros: a rule that would otherwise do full-size work with a [C] zero (the statistics outputs
  // of _batch_norm_training) skips that term.
  UNDEFINED_GRADS = 1u << 15,
};
inline constexpr uint32_t kAutocastFlags =
    AUTOCAST_LOW | AUTOCAST_FP32 | AUTOCAST_FP32_CUDA | AUTOCAST_PROMOTE | AUTOCAST_FP32_DTYPE;
enum class SaveMask : uint8_t { SaveNone = 0, SaveIn = 1, SaveOut = 2, SaveAll = 3 };

// What a meta function reports about one output.
struct TensorMeta {
  Shape sizes;
  DType dtype = DType::Float32;
  Device device;
  // Views only: the alias's strides and storage offset (input 0's storage).
  Shape strides;
  int64_t storage_offset = 0;
};

struct OpCall {
  OpId op;
  std::span<const Tensor> inputs;
  const Attrs& attrs;
  const char* name() const { return op_name(op); }
  const Tensor& in(size_t i) const { return inputs[i]; }
};

struct VjpCall {
  OpId op;
  const Attrs& attrs;
  std::vector<Tensor> inputs;       // saved inputs (undefined unless the op saves inputs)
  std::vector<Tensor> outputs;      // saved outputs (undefined unless the op saves outputs)
  std::vector<Tensor> grads;        // one per output; zeros where no gradient flowed
  std::vector<TensorMeta> input_meta;  // sizes/dtype/device of every input, always present
  std::vector<bool> needs_grad;     // which inputs need a gradient
  bool needs(size_t i) const { return i < needs_grad.size() && needs_grad[i]; }
};

using MetaFn = std::vector<TensorMeta> (*)(const OpCall&);
using DecompFn = std::vector<Tensor> (*)(const OpCall&);
using VjpFn = std::vector<Tensor> (*)(const VjpCall&);
// Writes into preallocated outputs (from the meta function). DATA_DEPENDENT
// ops receive an empty `outputs` and append what they produce.
using KernelFn = void (*)(const OpCall&, std::vector<Tensor>& outputs);

struct OpInfo {
  const char* name;
  OpKind kind;
  uint32_t flags;
  SaveMask save;
  const char* signature;
  MetaFn meta = nullptr;
  DecompFn decomp = nullptr;
  VjpFn vjp = nullptr;
  KernelFn kernels[kNumDeviceTypes] = {};

  bool has(uint32_t f) const { return (flags & f) != 0; }
  bool differentiable() const { return !has(NONDIFF) && (vjp != nullptr || decomp != nullptr); }
};

OpInfo& op_info(OpId op);

bool register_meta(OpId op, MetaFn fn);
bool register_decomp(OpId op, DecompFn fn);
bool register_vjp(OpId op, VjpFn fn);
bool register_kernel(OpId op, DeviceType device, KernelFn fn);

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
#define KILN_REGISTER_META(op, fn) \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_meta_, op) = ::kiln::register_meta(::kiln::OpId::op, fn)
#define KILN_REGISTER_DECOMP(op, fn) \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_decomp_, op) = ::kiln::register_decomp(::kiln::OpId::op, fn)
#define KILN_REGISTER_VJP(op, fn) \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_vjp_, op) = ::kiln::register_vjp(::kiln::OpId::op, fn)
#define KILN_REGISTER_KERNEL(op, device, fn)                           \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_kernel_##device##_, op) = \
      ::kiln::register_kernel(::kiln::OpId::op, ::kiln::DeviceType::device, fn)
