// Shared pieces of meta functions: broadcasting, type promotion, dim lists.
#pragma once
#include <span>

#include "ops/registry.h"

namespace kiln {

// torch.broadcast_shapes; throws naming `op` and both shapes on mismatch.
Shape broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op);
Shape broadcast_all(std::span<const Tensor> ts, const char* op);

// torch.result_type over tensors (wrapped numbers and 0-d tensors promote
// only across categories, as in PyTorch). Undefined tensors are skipped.
DType result_type(std::span<const Tensor> ts);
// For ops that compute in floating point (exp, div, ...): integral/bool → default float.
inline DType to_floating(DType t) { return is_floating_point(t) ? t : default_dtype(); }
// Half/BFloat16 compute in float32 (PyTorch's opmath type); others as they are.
// Decompositions of pointwise composites compute in it and round once, as the
// kernels do (scalar_math.h), so both give the same values.
inline DType opmath(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

// The device the outputs go to: the first non-0-d-CPU input's device.
Device output_device(std::span<const Tensor> ts);

// Normalises a dim list (wraps negatives, checks range and duplicates); an
// empty list means every dim. Returns a mask of reduced dims.
std::vector<bool> dim_mask(IntArrayRef dims, int64_t ndim, const char* op);
// Output shape of a reduction over the dims in `mask`.
Shape reduced_shape(IntArrayRef sizes, const std::vector<bool>& mask, bool keepdim);

// A meta result with one output.
inline std::vector<TensorMeta> one_output(Shape sizes, DType dtype, Device device) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.dtype = dtype;
  m.device = device;
  return {m};
}

// Note [Scalars out of range]: PyTorch's rule for a C++ number that does not fit a dtype, kept here.
// - A value stored into a tensor of dtype t (full, fill_, masked_fill, scatter's value, pow's
//   integer exponent) must fit t (c10::checked_convert): check_scalar_fits throws "<op>: value V
//   cannot be converted to type T without overflow".
// - A bound compared in the kernel's opmath type (clamp, hardtanh) must fit that type:
//   check_scalar_bound. clamp(float16, -1e10, 1e10) works, as torch 2's clamp (1.13 has no
//   float16 clamp on the CPU); clamp(uint8, -1, 300) raises.
// - A scalar operand of a binary op takes part in type promotion and is converted unchecked: it
//   wraps into an integer dtype (uint8 + 300, fmod(uint8, 300) by 44, as torch) and becomes inf in
//   a float one. No check, so none of these ops calls the functions here for it.
// - torch.tensor(value, dtype) of a float dtype converts (1e10 in float16 is inf); full and
//   scalar_tensor check.
bool scalar_fits(const Scalar& s, DType t);
void check_scalar_fits(const Scalar& s, DType t, const char* op);
void check_scalar_bound(const Scalar& s, DType t, const char* op);

// The usual check that an input is defined and what its dtype category is.
void check_floating(const Tensor& t, const char* op, const char* arg);

}  // namespace kiln
