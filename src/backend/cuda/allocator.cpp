// The CUDA Allocator: BlockAllocator (Note [CUDA caching allocator]) over cudaMalloc, one per
// device, and the memory statistics of include/kiln/cuda.h.
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/cuda_check.h"
#include "core/tensor_impl.h"
#include "kiln/cuda.h"

namespace kiln::cuda {
namespace {

class CudaRawMemory : public RawMemory {
 public:
  explicit CudaRawMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    DeviceGuard g(device_);
    void* p = nullptr;
    // While this thread captures a CUDA graph, cudaMalloc is allowed in relaxed mode only; it
    // gives the graph's pool new memory and is not part of the graph (Note [CUDA graphs]).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t err = cudaMalloc(&p, bytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: the caller frees the cache and retries
      return nullptr;
    }
    KILN_CUDA_CHECK(err, "cudaMalloc");
    return p;
  }
  void free(void* ptr) override {
    DeviceGuard g(device_);
    KILN_CUDA_CHECK(cudaFree(ptr), "cudaFree");
  }
  void* record_event(StreamId stream) override {
    DeviceGuard g(device_);
    cudaEvent_t e = nullptr;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    KILN_CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)), "cudaEventRecord");
    return e;
  }
  bool event_done(void* event) override {
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) return false;
    KILN_CUDA_CHECK(err, "cudaEventQuery");
    return true;
  }
  void release_event(void* event) override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  void mem_info(size_t& free_bytes, size_t& total_bytes) override {
    DeviceGuard g(device_);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      free_bytes = total_bytes = 0;
    }
  }

 private:
  int device_;
};

struct PerDevice {
  std::unique_ptr<CudaRawMemory> raw;
  std::unique_ptr<BlockAllocator> blocks;
};

// Created on first use of each device; never destroyed (tensors in statics outlive this file).
BlockAllocator& blocks_for(int device) {
  static std::mutex mu;
  static auto* all = new std::vector<PerDevice>(static_cast<size_t>(device_count()));
  check_device(device);
  std::lock_guard<std::mutex> lock(mu);
  PerDevice& d = (*all)[static_cast<size_t>(device)];
  if (!d.blocks) {
    d.raw = std::make_unique<CudaRawMemory>(device);
    d.blocks = std::make_unique<BlockAllocator>(d.raw.get(), device);
  }
  return *d.blocks;
}

int resolve(int device) { return device < 0 ? current_device() : device; }

class CudaAllocator : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    int d = device.index;
    BlockAllocator& blocks = blocks_for(d);
    // Blocks belong to the stream current at allocation (PyTorch's rule): that stream's
    // later work may reuse them at once; other streams need record_stream.
    void* p = blocks.allocate(nbytes, reinterpret_cast<StreamId>(current_cuda_stream(d)));
    return std::make_shared<Storage>(p, nbytes, device, [&blocks](void* q) { blocks.free(q); });
  }
};

CudaAllocator* g_allocator = new CudaAllocator;
[[maybe_unused]] const bool registered = [] {
  register_allocator(DeviceType::CUDA, g_allocator);
  return true;
}();

}  // namespace

size_t memory_allocated(int device) { return blocks_for(resolve(device)).stats().allocated; }
size_t max_memory_allocated(int device) { return blocks_for(resolve(device)).stats().max_allocated; }
size_t memory_reserved(int device) { return blocks_for(resolve(device)).stats().reserved; }
void reset_peak_memory_stats(int device) { blocks_for(resolve(device)).reset_peak_stats(); }

void empty_cache() {
  for (int d = 0; d < device_count(); ++d) blocks_for(d).empty_cache();
}

void retain_pool(int device, StreamId stream) { blocks_for(device).retain_stream(stream); }
void release_pool(int device, StreamId stream) { blocks_for(device).release_stream(stream); }

void record_stream(const Tensor& t, const Stream& s) {
  KILN_CHECK(t.is_cuda(), "record_stream: expected a CUDA tensor, got one on ", t.device());
  KILN_CHECK(t.unsafe_impl()->storage, "record_stream: the tensor has no storage");
  blocks_for(t.device().index).record_stream(t.unsafe_impl()->storage->data, reinterpret_cast<StreamId>(s.handle()));
}

}  // namespace kiln::cuda
