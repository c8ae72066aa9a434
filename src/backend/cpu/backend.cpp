// The CPU backend: 64-byte aligned allocation and copies.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "backend/cpu/blas_threads.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "dispatch/dispatch.h"
#include "kiln/cuda.h"
#include "kiln/memory.h"

namespace kiln::cpu {
namespace {

// Note [CPU memory statistics]: the bytes the CPU allocator has handed to live tensors (each
// block counted at its rounded size, as the CUDA caching allocator counts its blocks) and their
// peak since the last reset, for kiln::memory_allocated / max_memory_allocated. Every
// allocation and free updates them, so they are relaxed atomics: no lock, no ordering with
// anything else; the peak may briefly trail a racing allocation, which a statistic may do.
struct CpuMemoryStats {
  std::atomic<size_t> allocated{0};
  std::atomic<size_t> peak{0};
  void add(size_t n) {
    const size_t now = allocated.fetch_add(n, std::memory_order_relaxed) + n;
    size_t p = peak.load(std::memory_order_relaxed);
    while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
  void sub(size_t n) { allocated.fetch_sub(n, std::memory_order_relaxed); }
};
// Never destroyed, as the allocator below: storages freed during static destruction update it.
CpuMemoryStats& g_stats = *new CpuMemoryStats;

// For allocate_shared: puts `bytes` more (64-byte aligned) after the
// Storage's control block and reports where they start.
template <class T>
struct TrailingBytes {
  using value_type = T;
  size_t bytes;
  void** data;
  TrailingBytes(size_t b, void** d) : bytes(b), data(d) {}
  template <class U>
  TrailingBytes(const TrailingBytes<U>& o) : bytes(o.bytes), data(o.data) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    size_t head = (n * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, head + bytes);
    if (!p) throw std::bad_alloc();
    *data = static_cast<char*>(p) + head;
    g_stats.add(bytes);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    g_stats.sub(bytes);
    std::free(p);
  }
  template <class U>
  bool operator==(const TrailingBytes<U>& o) const {
    return data == o.data;
  }
};

// Large blocks are cached and reused: returning them to the OS and faulting
// fresh pages back in on every op costs far more than the op itself for big
// tensors (one page fault per 4 KiB). Small blocks go to malloc, which
// already reuses them, in one allocation with their Storage.
// KILN_CPU_CACHE_MB caps the cache (default 1024; 0 disables).
class CpuAllocator : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    // Beyond this no allocation can succeed, and rounding up could overflow (Note [Size overflow]).
    KILN_CHECK(nbytes <= kMaxBytes, "CPU allocator: not enough memory: you tried to allocate ", nbytes, " bytes");
    size_t rounded = round_size(nbytes);
    if (rounded < kCacheMin) {
      // Small blocks live in the Storage's own allocation: one malloc per
      // tensor, not two (Note [Cheap dispatch]); freed with it, so no deleter.
      void* data = nullptr;
      try {
        auto s = std::allocate_shared<Storage>(TrailingBytes<Storage>(rounded, &data), nullptr, nbytes, device,
                                               std::function<void(void*)>());
        s->data = data;
        return s;
      } catch (const std::bad_alloc&) {
        KILN_FAIL("CPU allocator: not enough memory: you tried to allocate ", nbytes, " bytes");
      }
    }
    void* p = take(rounded);
    if (!p) p = std::aligned_alloc(64, rounded);
    KILN_CHECK(p, "CPU allocator: not enough memory: you tried to allocate ", nbytes, " bytes (", rounded,
               " rounded up)");
    g_stats.add(rounded);
    return std::make_shared<Storage>(p, nbytes, device, [this, rounded](void* q) {
      g_stats.sub(rounded);
      give_back(q, rounded);
    });
  }

 private:
  static constexpr size_t kCacheMin = 1 << 20;
  static constexpr size_t kMaxBytes = size_t(1) << 62;
  // 64-byte granules for small sizes; large sizes round up to 1/8 of their power of two so
  // nearby sizes share a bucket.
  static size_t round_size(size_t n) {
    n = std::max<size_t>(n, 1);
    if (n < kCacheMin) return (n + 63) / 64 * 64;
    size_t p = 1;
    while (p < n) p <<= 1;
    size_t step = p / 8;
    return (n + step - 1) / step * step;
  }
  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= rounded;
    return p;
  }
  void give_back(void* p, size_t rounded) {
    if (rounded >= kCacheMin) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + rounded <= limit()) {
        free_[rounded].push_back(p);
        cached_ += rounded;
        return;
      }
    }
    std::free(p);
  }
  static size_t limit() {
    static const size_t l = [] {
      const char* env = std::getenv("KILN_CPU_CACHE_MB");
      return static_cast<size_t>(env ? std::atoll(env) : 1024) << 20;
    }();
    return l;
  }
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

struct CpuBackend : Backend {
  const char* name() const override { return "cpu"; }
  void copy(const Tensor& dst, const Tensor& src) override { copy_cpu(dst, src); }
  std::vector<std::pair<std::string, std::string>> info() const override {
    return {{"blas", blas_name()}, {"blas_threads", std::to_string(blas_threads())}};
  }
};

// Never destroyed: tensors held in other statics may be freed after this file's statics.
CpuAllocator* g_allocator = new CpuAllocator;
CpuBackend g_backend;
[[maybe_unused]] const bool registered = [] {
  register_allocator(DeviceType::CPU, g_allocator);
  register_backend(DeviceType::CPU, &g_backend);
  return true;
}();

}  // namespace

void copy_cpu(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  // A kernel whose output starts as its input may be given that input to write into
  // (Note [Externs into dead inputs]): nothing to copy.
  if (dst.data_ptr() == src.data_ptr() && dst.dtype() == src.dtype() && dst.sizes() == src.sizes() &&
      dst.strides() == src.strides())
    return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && src.sizes() == dst.sizes()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  visit_dtype(dst.dtype(), [&]<class To>() {
    visit_dtype(src.dtype(), [&]<class From>() {
      elementwise<To, From>(dst, {src}, [](From v) { return convert<To, From>(v); });
    });
  });
}

Tensor cast_to(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  Tensor out = make_tensor(x.sizes(), t, x.device());
  copy_cpu(out, x);
  return out;
}

}  // namespace kiln::cpu

namespace kiln {

namespace {
void check_memory_device(Device d, const char* what) {
  KILN_CHECK(d.is_cpu() || d.is_cuda(), what, ": memory statistics exist for cpu and cuda devices, not ", d.str());
}
}  // namespace

size_t memory_allocated(Device device) {
  check_memory_device(device, "memory_allocated");
  return device.is_cpu() ? cpu::g_stats.allocated.load(std::memory_order_relaxed)
                         : cuda::memory_allocated(device.index);
}
size_t max_memory_allocated(Device device) {
  check_memory_device(device, "max_memory_allocated");
  return device.is_cpu() ? cpu::g_stats.peak.load(std::memory_order_relaxed) : cuda::max_memory_allocated(device.index);
}
void reset_peak_memory_stats(Device device) {
  check_memory_device(device, "reset_peak_memory_stats");
  if (device.is_cpu()) {
    cpu::g_stats.peak.store(cpu::g_stats.allocated.load(std::memory_order_relaxed), std::memory_order_relaxed);
  } else {
    cuda::reset_peak_memory_stats(device.index);
  }
}

}  // namespace kiln
