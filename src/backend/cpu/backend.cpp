// The CPU backend: 64-byte aligned allocation and copies.
#include <cstdlib>
#include <new>

#include "backend/cpu/loops.h"
#include "dispatch/dispatch.h"

namespace kiln::cpu {
namespace {

struct CpuAllocator : Allocator {
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    size_t rounded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    return std::make_shared<Storage>(p, nbytes, device, [](void* q) { std::free(q); });
  }
};

struct CpuBackend : Backend {
  const char* name() const override { return "cpu"; }
  void copy(const Tensor& dst, const Tensor& src) override { copy_cpu(dst, src); }
};

CpuAllocator g_allocator;
CpuBackend g_backend;
[[maybe_unused]] const bool registered = [] {
  register_allocator(DeviceType::CPU, &g_allocator);
  register_backend(DeviceType::CPU, &g_backend);
  return true;
}();

}  // namespace

void copy_cpu(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
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
