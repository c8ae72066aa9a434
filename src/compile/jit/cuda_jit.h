// The CUDA JIT: generated CUDA source → NVRTC → cubin for the device's architecture, loaded
// with the runtime's library API and cached in memory and on disk (Note [CUDA JIT]).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::compiler::jit {

// Whether kiln was built with the CUDA JIT (KILN_CUDA: NVRTC and the runtime).
bool cuda_jit_built();

class CudaModule {
 public:
  explicit CudaModule(void* library) : library_(library) {}
  // The __global__ function `name` (a cudaKernel_t); throws naming it when absent.
  void* kernel(const std::string& name) const;

 private:
  void* library_;  // never unloaded: its kernels may be queued on a stream until exit
};

// Sources → modules for CUDA device `device`, compiled side by side; from the in-memory cache,
// the disk cache (<cache>/cuda/) or NVRTC.
std::vector<std::shared_ptr<const CudaModule>> compile_cuda(const std::vector<std::string>& sources, int device);

// NVRTC alone, for `arch` (e.g. "sm_90"): the cubin, or a kiln::Error with NVRTC's log. Needs no
// GPU: tests compile generated code with it where none is present.
std::string nvrtc_compile(const std::string& source, const std::string& arch);

struct CudaDeviceInfo {
  int multiprocessors = 0;
  int major = 0, minor = 0;
};
CudaDeviceInfo cuda_device_info(int device);

// Launches kernel on `stream` (a cudaStream_t) with `args` as its one by-value parameter.
void launch_cuda(void* kernel, int64_t grid, int block, const void* args, void* stream);

struct CudaJitStats {
  int nvrtc_runs = 0;
  int disk_hits = 0;
  int memory_hits = 0;
  double compile_seconds = 0;
};
CudaJitStats cuda_jit_stats();
void reset_cuda_memory_cache();  // kiln::compiler::reset(); the disk cache stays

}  // namespace kiln::compiler::jit
