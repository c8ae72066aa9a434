// The strided elementwise launcher's plain description of a launch (TensorIterator-like), shared
// by the host code that builds it from tensors and the kernels in elementwise.cu, which see no
// Tensor (keeping nvcc's translation units small and free of kiln's heavier headers).
#pragma once
#include <string>
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

inline constexpr int kMaxDims = 16;
inline constexpr int kMaxOperands = 4;  // output + up to three inputs

struct Operand {
  char* data = nullptr;  // at the tensor's first element
  DType dtype = DType::Float32;
  int64_t strides[kMaxDims] = {};  // in bytes; 0 for a broadcast dim
  // For the vectorized kernel (Note [Vectorized elementwise]), where `dense_or_broadcast`: 0 when
  // the operand is dense in the output's order, 1 when every element reads its first (a
  // broadcast number), n > 1 when element i reads element i % n (a row broadcast over rows).
  int64_t period = 0;
};

// Operand 0 is the output. Dims are collapsed where all operands allow (fewer index
// divisions); `contiguous` means every operand is dense in the same order.
struct ElementwiseArgs {
  int ndim = 0;
  int nops = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  Operand ops[kMaxOperands];
  bool contiguous = false;
  bool dense_or_broadcast = false;  // the output is dense and each input has a `period`
  bool index32 = false;             // every byte offset fits in 32 bits
};

// out = convert<out dtype>(in): copy and cast between any two dtypes.
void launch_copy(const ElementwiseArgs& a, cudaStream_t stream);
// out = value (stored as double or int64 bits as out's dtype needs).
void launch_fill(const ElementwiseArgs& a, double fvalue, int64_t ivalue, bool value_is_int, cudaStream_t stream);

// Note [Checks while capturing]
// Kernels that validate their inputs (class targets, gather and scatter indices) set a flag that
// the host reads back and turns into the CPU's kiln::Error. While the stream captures a CUDA
// graph the host cannot read it (a synchronization fails the capture), so a kernel reads it
// instead: when flag[0] != ok it prints `message` with flag[0] and flag[1] and traps, a device
// assertion as PyTorch's CUDA_KERNEL_ASSERT (the CUDA context is lost, as after any device fault).
void launch_assert_flag(const int64_t* flag, int64_t ok, const std::string& message, cudaStream_t stream);
// Whether `stream` is capturing a CUDA graph now.
bool stream_capturing(cudaStream_t stream);

// gather / scatter_add along one dim (Note [CUDA gather]): operand 0 is written, operand 1 is
// the int64 index, operand 2 the other tensor, all viewed with the index's sizes. The operand
// addressed by index values (gather: 2, scatter_add: 0) has stride 0 along the dim; its real
// stride there is `indexed_stride` (bytes) and its size `indexed_size`. The first index out of
// [0, indexed_size) is stored in bad[1] with bad[0] = 1 (bad: two device int64, zeroed).
// wrap_negative: -size <= v < 0 means v + size (advanced indexing, x[-1]).
void launch_gather(const ElementwiseArgs& a, int64_t indexed_stride, int64_t indexed_size, int64_t* bad,
                   cudaStream_t stream, bool wrap_negative = false);
// scatter_add (accumulate) or a plain scatter of operand 2 into operand 0. Accumulation uses
// atomic adds, float16/bfloat16/float32/float64/int32/int64 (the order of additions, and so float rounding,
// may differ run to run, as PyTorch's CUDA scatter_add); stores with duplicate indices keep
// one of the values, as PyTorch's.
void launch_scatter_add(const ElementwiseArgs& a, int64_t indexed_stride, int64_t indexed_size, int64_t* bad,
                        cudaStream_t stream, bool accumulate = true, bool wrap_negative = false);

// scatter_reduce (Note [CUDA scatter_reduce]): operands as launch_scatter_add's; operand 0 is
// reduced into with a compare-and-swap loop per element (any dtype; 1- and 2-byte ones through
// their 32-bit word). Mean is a Sum followed by launch_mean_divide.
enum class ScatterReduce { Sum, Prod, Max, Min };
void launch_scatter_reduce(const ElementwiseArgs& a, ScatterReduce r, int64_t indexed_stride, int64_t indexed_size,
                           int64_t* bad, cudaStream_t stream);
// out = out / max(count, 1) (integers rounding down): operand 0 the output, 1 the same tensor, 2 int64 counts.
void launch_mean_divide(const ElementwiseArgs& a, cudaStream_t stream);

// histc over n dense elements of floating dtype t into `count` (bins zeroed device int64), with
// the CPU kernel's bin rule; lo < hi, both finite (the caller checks).
void launch_histc(DType t, const void* x, int64_t n, int64_t bins, double lo, double hi, void* count,
                  cudaStream_t stream);
// Over n dense floating values of dtype t: keys[0] = min(keys[0], key(x)), keys[1] = max(keys[1],
// key(x)) for the non-NaN ones, keys[2] |= 1 if one is NaN; key(x) orders like x: x's float64
// bits, negative ones flipped, others with the sign bit set (float_from_order_key undoes it).
void launch_float_min_max(DType t, const void* x, int64_t n, uint64_t* keys, cudaStream_t stream);
// min_max[0] = min(min_max[0], x), min_max[1] = max(min_max[1], x) over n dense integers of dtype t.
void launch_int_min_max(DType t, const void* x, int64_t n, int64_t* min_max, cudaStream_t stream);
// count[x[i]] += 1 over n dense non-negative integers of dtype t (count large enough, zeroed).
void launch_bincount(DType t, const void* x, int64_t n, int64_t* count, cudaStream_t stream);

}  // namespace kiln::cuda
