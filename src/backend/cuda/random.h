// Device kernels of the random factories (random.cu): element i of the dense output is the
// CPU kernel's function of (seed, offset, i) (Note [Philox stream]), so CUDA draws the CPU's
// numbers without computing them on the host (normals may differ in the last bit: libdevice).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::cuda {

void launch_uniform(DType t, void* out, int64_t n, double from, double to, uint64_t seed, uint64_t offset,
                    cudaStream_t s);
void launch_normal(DType t, void* out, int64_t n, double mean, double std, uint64_t seed, uint64_t offset,
                   cudaStream_t s);

}  // namespace kiln::cuda
