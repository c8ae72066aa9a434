// The CUDA emitter: each loop kernel as one `extern "C" __global__` function
// (Note [Generated CUDA]), compiled by NVRTC (src/compile/jit/cuda_jit.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compile/lower/loop_ir.h"

namespace kiln::compiler::codegen {

// What every generated CUDA source starts with.
std::string cuda_source_prelude();

// Kernel k as the __global__ function `symbol(kiln::jit::Args<NB, NP> a)` (cuda_device.h).
// by_value[b] marks input buffers passed by value (a CPU 0-d tensor read by a CUDA kernel);
// empty: none. Its parameters go to *params; kernels of one structure give the same text.
std::string generate_cuda_kernel(const lower::LoopKernel& k, const std::string& symbol,
                                 const std::vector<bool>& by_value, std::vector<int64_t>* params);

// How a kernel is launched: blocks, threads per block, and a reduction's lanes per row: n > 0,
// n consecutive threads (a row group); -n, n threads a block's rows apart (a column group).
struct CudaLaunch {
  int64_t grid = 0;  // 0: nothing to compute
  int block = 0;
  int group = 1;
};
CudaLaunch cuda_launch(const lower::LoopKernel& k, int multiprocessors);

// Note [Vectorized CUDA kernels]: whether a pointwise kernel has the vector path (every store
// steps through the innermost dim one element at a time), which buffers it reads or writes as
// vectors, and whether a launch with these buffer addresses may take it (sizes, strides,
// offsets and addresses aligned to the vector); the launch then passes group = 4.
bool cuda_vectorizable(const lower::LoopKernel& k);
std::vector<bool> cuda_vector_buffers(const lower::LoopKernel& k);
bool cuda_vector_aligned(const lower::LoopKernel& k, const std::vector<uint64_t>& addresses);

// The kernel's one argument as 8-byte slots: Args<NB, NP> with NB = buffers, NP = max(1, params).
std::vector<uint64_t> cuda_args(const std::vector<uint64_t>& buffers, const std::vector<int64_t>& params, int group);

}  // namespace kiln::compiler::codegen
