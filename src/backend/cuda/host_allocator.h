// Page-locked host memory for Tensor::pin_memory (Note [Pinned host memory]).
#pragma once
#include <cuda_runtime.h>

#include "core/tensor_impl.h"

namespace kiln::cuda {

// A copy on `stream` reads or writes the pinned storage `s`: its block is not handed out again
// until the work queued on `stream` so far has finished.
void record_host_use(const Storage& s, cudaStream_t stream);

}  // namespace kiln::cuda
