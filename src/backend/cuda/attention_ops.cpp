// Host side of the fused attention kernels (attention.cu, Note [Flash attention]): operands made
// dense and 16-byte aligned on their device, then one launch sequence per op.
#include <cstdint>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// t dense (row-major, its own dtype) with a 16-byte aligned start, for the kernels' vector loads.
Tensor dense_aligned(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor d = dense_as(t, t.dtype());
  if (reinterpret_cast<uintptr_t>(d.unsafe_impl()->data()) % 16 == 0) return d;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());  // a fresh allocation is aligned
  copy_same_device(c, t);
  return c;
}

void* ptr(const Tensor& t) { return t.defined() ? t.unsafe_impl()->data() : nullptr; }

FlashShape shape_of(const Tensor& q, const Tensor& k, const Tensor& v, const Attrs& a) {
  return FlashShape{q.sizes()[0], q.sizes()[1], k.sizes()[1], q.sizes()[2], v.sizes()[2], a.b(0), a.f(1)};
}

void flash_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DeviceGuard g(outs[0].device().index);
  Tensor q = dense_aligned(c.in(0)), k = dense_aligned(c.in(1)), v = dense_aligned(c.in(2));
  launch_flash_forward(q.dtype(), shape_of(q, k, v, c.attrs), ptr(q), ptr(k), ptr(v), ptr(outs[0]), ptr(outs[1]),
                       current_cuda_stream(outs[0].device().index));
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention, CUDA, flash_kernel);

void flash_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int d = outs[0].device().index;
  DeviceGuard g(d);
  Tensor go = dense_aligned(c.in(0)), q = dense_aligned(c.in(1)), k = dense_aligned(c.in(2)),
         v = dense_aligned(c.in(3)), o = dense_aligned(c.in(4)), lse = dense_aligned(c.in(5)),
         glse = dense_aligned(c.in(6));
  const FlashShape f = shape_of(q, k, v, c.attrs);
  cudaStream_t s = current_cuda_stream(d);
  // Outputs no kernel writes (every gradient of an empty attention) are zeros.
  for (const Tensor& t : outs)
    if (t.numel() > 0 && (f.N * f.L == 0 || f.S == 0))
      KILN_CUDA_CHECK(cudaMemsetAsync(ptr(t), 0, t.nbytes(), s), "cudaMemsetAsync");
  if (f.N * f.L == 0 || f.S == 0) return;
  Tensor scratch = make_tensor({f.N, f.L}, lse.dtype(), q.device());
  launch_flash_backward(q.dtype(), f, ptr(go), ptr(q), ptr(k), ptr(v), ptr(o), ptr(lse), ptr(glse), ptr(outs[0]),
                        ptr(outs[1]), ptr(outs[2]), ptr(scratch), s);
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention_backward, CUDA, flash_backward_kernel);

}  // namespace
}  // namespace kiln::cuda
