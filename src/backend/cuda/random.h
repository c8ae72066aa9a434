// Device kernels of the factories (random.cu). For the random ones element i of the dense output
// is the CPU kernel's function of (seed, offset, i) (Note [Philox stream]), so CUDA draws the
// CPU's numbers without computing them on the host (normals may differ in the last bit: libdevice).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::cuda {

void launch_uniform(DType t, void* out, int64_t n, double from, double to, uint64_t seed, uint64_t offset,
                    cudaStream_t s);
void launch_normal(DType t, void* out, int64_t n, double mean, double std, uint64_t seed, uint64_t offset,
                   cudaStream_t s);
// randint: the CPU kernel's draws (a 32-bit one when high - low <= 2^32, else a 64-bit one), any dtype.
void launch_randint(DType t, void* out, int64_t n, int64_t low, int64_t high, uint64_t seed, uint64_t offset,
                    cudaStream_t s);
// randperm: keys[i] = the CPU kernel's 64-bit draw for i, sign bit flipped (sorted as int64 by
// sort.cu's stable radix sort, their indices are the CPU's permutation: ties by index).
void launch_randperm_keys(int64_t* keys, int64_t n, uint64_t seed, uint64_t offset, cudaStream_t s);

// The deterministic factories, element i as backend/cpu/creation.cpp computes it, any dtype:
// arange start + i * step (in int64 when `integral`, else in double), linspace counting up from
// start for the first half and down from end for the rest, eye an n x m identity.
void launch_arange(DType t, void* out, int64_t n, bool integral, int64_t istart, int64_t istep, double fstart,
                   double fstep, cudaStream_t s);
void launch_linspace(DType t, void* out, int64_t n, double start, double end, double step, cudaStream_t s);
void launch_eye(DType t, void* out, int64_t n, int64_t m, cudaStream_t s);

}  // namespace kiln::cuda
