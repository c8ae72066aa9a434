// Error checking and device selection for the CUDA runtime API (only the backend sees it).
#pragma once
#include <cuda_runtime.h>

#include "kiln/error.h"

namespace kiln::cuda {

// Throws kiln::Error naming what failed and CUDA's message (clearing the sticky last error).
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what);
#define KILN_CUDA_CHECK(expr, what)                                                          \
  do {                                                                                       \
    cudaError_t kiln_cuda_err_ = (expr);                                                     \
    if (kiln_cuda_err_ != cudaSuccess) ::kiln::cuda::throw_cuda_error(kiln_cuda_err_, what); \
  } while (0)

// Throws "CUDA: no CUDA device is available (...)" when there is none, or when `device` is
// out of range; -1 checks only that some device exists.
void check_device(int device = -1);

// RAII: makes `device` current for this thread (cudaSetDevice), restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool changed_ = false;
};

// The current stream of `device` as a cudaStream_t (this thread).
cudaStream_t current_cuda_stream(int device);

}  // namespace kiln::cuda
