// Host side of the fused attention kernels (attention.cu, Note [Flash attention]): operands read
// in place through their strides where the tensor-core kernels can, else made dense and 16-byte
// aligned on their device, then one launch sequence per op.
#include <cstdint>
#include <optional>
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

// q [..., L, E], k [..., S, E], v [..., S, Ev] with the batch dims flattened to N.
FlashShape shape_of(const Tensor& q, const Tensor& k, const Tensor& v, const Attrs& a) {
  int64_t N = 1;
  for (int64_t d = 0; d < q.dim() - 2; ++d) N *= q.size(d);
  return FlashShape{N, q.size(-2), k.size(-2), q.size(-1), v.size(-1), a.b(0), a.f(1)};
}

// The layout the tensor-core kernels read t [B, H, rows, E] or [N, rows, E] in, if they can:
// the head dim contiguous, the start and every other stride 16-byte aligned (a stride of a size-1
// dim is never used: 0).
std::optional<FlashLayout> in_place_layout(const Tensor& t) {
  if (t.dim() < 3 || t.dim() > 4 || t.stride(-1) != 1 || reinterpret_cast<uintptr_t>(ptr(t)) % 16 != 0)
    return std::nullopt;
  const int64_t vec = 16 / static_cast<int64_t>(itemsize(t.dtype()));
  int64_t s[3];
  for (int64_t d = 0; d < t.dim() - 1; ++d) {
    s[d] = t.size(d) == 1 ? 0 : t.stride(d);
    if (s[d] % vec != 0) return std::nullopt;
  }
  return t.dim() == 4 ? FlashLayout{s[0], s[1], s[2]} : FlashLayout{s[0], 0, s[1]};
}

// Operands for the kernels (ts[q] is the query): where the tensor-core kernels run and the batch
// dims are one or two, each as it is when in_place_layout takes it (else a dense copy), with f's
// layouts set (layouts[i] null: always dense); otherwise all dense.
std::vector<Tensor> operands(std::vector<Tensor> ts, size_t q, FlashShape& f, FlashLayout* const* layouts) {
  const bool strided = flash_tensor_cores(ts[q].dtype(), f) && ts[q].dim() <= 4;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) continue;
    std::optional<FlashLayout> l = strided && layouts[i] ? in_place_layout(ts[i]) : std::nullopt;
    if (!l) {
      ts[i] = dense_aligned(ts[i]);
      if (strided && layouts[i]) l = in_place_layout(ts[i]);  // dense and aligned: always taken
    }
    if (l) *layouts[i] = *l;
  }
  f.strided = strided;
  f.H = strided && ts[q].dim() == 4 ? static_cast<int64_t>(ts[q].size(1)) : int64_t{1};
  return ts;
}

void flash_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DeviceGuard g(outs[0].device().index);
  FlashShape f = shape_of(c.in(0), c.in(1), c.in(2), c.attrs);
  FlashLayout* layouts[3] = {&f.q, &f.k, &f.v};
  std::vector<Tensor> in = operands({c.in(0), c.in(1), c.in(2)}, 0, f, layouts);
  launch_flash_forward(in[0].dtype(), f, ptr(in[0]), ptr(in[1]), ptr(in[2]), ptr(outs[0]), ptr(outs[1]),
                       current_cuda_stream(outs[0].device().index));
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention, CUDA, flash_kernel);

void flash_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int d = outs[0].device().index;
  DeviceGuard g(d);
  FlashShape f = shape_of(c.in(1), c.in(2), c.in(3), c.attrs);
  cudaStream_t s = current_cuda_stream(d);
  // Outputs no kernel writes (every gradient of an empty attention) are zeros.
  for (const Tensor& t : outs)
    if (t.numel() > 0 && (f.N * f.L == 0 || f.S == 0))
      KILN_CUDA_CHECK(cudaMemsetAsync(ptr(t), 0, t.nbytes(), s), "cudaMemsetAsync");
  if (f.N * f.L == 0 || f.S == 0) return;
  FlashLayout* layouts[7] = {&f.go, &f.q, &f.k, &f.v, &f.o, nullptr, nullptr};
  std::vector<Tensor> in = operands({c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.in(5), c.in(6)}, 1, f, layouts);
  Tensor scratch = make_tensor({f.N, f.L}, in[5].dtype(), in[1].device());
  launch_flash_backward(in[1].dtype(), f, ptr(in[0]), ptr(in[1]), ptr(in[2]), ptr(in[3]), ptr(in[4]), ptr(in[5]),
                        ptr(in[6]), ptr(outs[0]), ptr(outs[1]), ptr(outs[2]), ptr(scratch), s);
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention_backward, CUDA, flash_backward_kernel);

}  // namespace
}  // namespace kiln::cuda
