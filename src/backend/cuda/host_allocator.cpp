// Note [Pinned host memory]
// Tensor::pin_memory's page-locked blocks come from cudaHostAlloc, which is slow (it maps the
// pages for the GPU), so freed blocks are cached by size class, as PyTorch's host allocator does.
// An asynchronous copy may still be reading or writing a block when its tensor dies: each copy
// records an event on its stream against the block (record_host_use), and a freed block is handed
// out again only once all of its events have completed.
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/host_allocator.h"

namespace kiln::cuda {
namespace {

size_t size_class(size_t n) {
  size_t s = 512;
  while (s < n) s <<= 1;
  return s;
}

class PinnedAllocator : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device) override {
    check_device();
    const size_t size = size_class(nbytes);
    void* p = take_cached(size);
    if (!p) {
      cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocDefault);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        release_cached();
        err = cudaHostAlloc(&p, size, cudaHostAllocDefault);
      }
      KILN_CHECK(err == cudaSuccess, "pin_memory: cudaHostAlloc of ", size, " bytes failed: ", cudaGetErrorString(err));
      std::lock_guard<std::mutex> lock(mu_);
      live_[p] = {};
    }
    auto st = std::make_shared<Storage>(p, nbytes, kCPU, [this, size](void* q) { give_back(q, size); });
    st->pinned = true;
    return st;
  }

  void record(void* p, cudaStream_t stream) {
    cudaEvent_t e;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (pinned memory)");
    KILN_CUDA_CHECK(cudaEventRecord(e, stream), "cudaEventRecord (pinned memory)");
    std::lock_guard<std::mutex> lock(mu_);
    live_[p].push_back(e);
  }

 private:
  struct Freed {
    void* p;
    std::vector<cudaEvent_t> events;
  };

  void give_back(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    std::vector<cudaEvent_t> events = it == live_.end() ? std::vector<cudaEvent_t>{} : std::move(it->second);
    if (it != live_.end()) live_.erase(it);
    free_[size].push_back({p, std::move(events)});
  }

  // A cached block of `size` whose copies have all finished, or null.
  void* take_cached(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = free_[size];
    for (size_t i = 0; i < list.size(); ++i) {
      bool done = true;
      for (cudaEvent_t e : list[i].events) done = done && cudaEventQuery(e) == cudaSuccess;
      (void)cudaGetLastError();  // cudaErrorNotReady is not an error here
      if (!done) continue;
      for (cudaEvent_t e : list[i].events) cudaEventDestroy(e);
      void* p = list[i].p;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      live_[p] = {};
      return p;
    }
    return nullptr;
  }

  // Out of page-locked memory: wait for every copy, then return the cached blocks.
  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, list] : free_)
      for (Freed& f : list) {
        for (cudaEvent_t e : f.events) {
          cudaEventSynchronize(e);
          cudaEventDestroy(e);
        }
        cudaFreeHost(f.p);
      }
    free_.clear();
  }

  std::mutex mu_;
  std::unordered_map<void*, std::vector<cudaEvent_t>> live_;  // blocks held by storages
  std::map<size_t, std::vector<Freed>> free_;                  // cached blocks by size class
};

PinnedAllocator& pinned() {
  // Never destroyed: storages may be freed during static destruction.
  static PinnedAllocator* a = new PinnedAllocator();
  return *a;
}

[[maybe_unused]] const bool registered = [] {
  register_pinned_allocator(&pinned());
  return true;
}();

}  // namespace

void record_host_use(const Storage& s, cudaStream_t stream) {
  if (s.pinned) pinned().record(s.data, stream);
}

}  // namespace kiln::cuda
