// Host side of the fused CUDA kernels (fused.cu): softmax / log_softmax and layer_norm as the
// CPU's kernels (backend/cpu/nn.cpp) take their inputs, and the foreach ops (Note [CUDA foreach])
// as the CPU's (backend/cpu/foreach.cpp): dense tensors in multi-tensor launches, others one by one.
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fused.h"
#include "backend/cuda/launch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// t as a dense tensor of dtype `dt` on its device (t itself when it already is one).
Tensor dense_as(const Tensor& t, DType dt) {
  if (t.is_contiguous() && t.dtype() == dt) return t;
  Tensor c = make_tensor(t.sizes(), dt, t.device());
  copy_same_device(c, t);
  return c;
}

void* ptr(const Tensor& t) { return t.unsafe_impl()->data(); }
cudaStream_t stream_of(const Tensor& t) { return current_cuda_stream(t.device().index); }

// ---- softmax / log_softmax (x; dim, dtype): x converted to the output's dtype (the meta
// function's choice from `dtype`), then [outer, n, inner] around dim (a 0-d x is one element) ----
void softmax_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  KILN_CHECK(is_floating_point(out.dtype()), c.name(), ": not implemented for dtype ", out.dtype(),
             " (expected a floating dtype)");
  DeviceGuard g(out.device().index);
  Tensor x = dense_as(c.in(0), out.dtype());
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(c.attrs.i(0), x.dim(), c.name());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d)
      outer *= x.sizes()[i];
    else if (i == d)
      n = x.sizes()[i];
    else
      inner *= x.sizes()[i];
  }
  launch_softmax(c.op == OpId::log_softmax, out.dtype(), ptr(x), ptr(out), outer, n, inner, stream_of(out));
}
KILN_REGISTER_KERNEL(softmax, CUDA, softmax_kernel);
KILN_REGISTER_KERNEL(log_softmax, CUDA, softmax_kernel);

// ---- layer_norm (x, weight?, bias?; normalized_shape, eps): one output, as the CPU kernel;
// weight and bias in the opmath dtype ----
void layer_norm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  KILN_CHECK(is_floating_point(out.dtype()), c.name(), ": not implemented for dtype ", out.dtype(),
             " (expected a floating dtype)");
  DeviceGuard g(out.device().index);
  int64_t n = 1;
  for (int64_t s : c.attrs.ints(0)) n *= s;
  const int64_t rows = n == 0 ? 0 : out.numel() / n;
  const DType cd = out.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor x = dense_as(c.in(0), out.dtype());
  Tensor w = c.in(1).defined() ? dense_as(c.in(1), cd) : Tensor();
  Tensor b = c.in(2).defined() ? dense_as(c.in(2), cd) : Tensor();
  launch_layer_norm(out.dtype(), ptr(x), w.defined() ? ptr(w) : nullptr, b.defined() ? ptr(b) : nullptr, ptr(out), rows,
                    n, c.attrs.f(1), stream_of(out));
}
KILN_REGISTER_KERNEL(layer_norm, CUDA, layer_norm_kernel);

// ---- foreach: position i's operands are outs[i] (self[i] when in place), then each list's
// tensor i (Note [Foreach ops]) ----
double scalar_at(const OpCall& c, size_t k) {
  const std::vector<double>& s = c.attrs.doubles(0);
  return s.size() == 1 ? s[0] : s[k];
}

template <ForeachOp Op>
void foreach_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  constexpr bool kHasScalars =
      Op != ForeachOp::Neg && Op != ForeachOp::Sqrt && Op != ForeachOp::AddAlpha && Op != ForeachOp::Maximum;
  const size_t lists = static_cast<size_t>(foreach_arity(Op));
  const size_t n = c.inputs.size() / lists;
  if (n == 0) return;
  ForeachAlpha alpha;
  if constexpr (Op == ForeachOp::AddAlpha) {
    alpha.f = c.attrs.s(0).to<float>();
    alpha.d = c.attrs.s(0).to<double>();
  }
  const int dev = c.in(0).device().index;
  DeviceGuard g(dev);
  cudaStream_t s = current_cuda_stream(dev);
  // Dense positions, grouped by dtype (one multi-tensor launch series per dtype).
  std::vector<std::pair<DType, std::vector<ForeachItem>>> groups;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& out = outs.empty() ? c.in(i) : outs[i];
    if (out.numel() == 0) continue;
    const double scalar = kHasScalars ? scalar_at(c, i) : 0.0;
    bool dense = out.is_contiguous();
    for (size_t l = 0; l < lists; ++l) dense = dense && c.in(l * n + i).is_contiguous();
    if (!dense) {
      ElementwiseArgs a;
      switch (lists) {
        case 1:
          a = make_elementwise_args({&out, &c.in(i)});
          break;
        case 2:
          a = make_elementwise_args({&out, &c.in(i), &c.in(n + i)});
          break;
        default:
          a = make_elementwise_args({&out, &c.in(i), &c.in(n + i), &c.in(2 * n + i)});
          break;
      }
      launch_foreach_strided(Op, out.dtype(), a, scalar, alpha, s);
      continue;
    }
    ForeachItem it;
    it.data[0] = ptr(out);
    for (size_t l = 0; l < lists; ++l) it.data[l + 1] = ptr(c.in(l * n + i));
    it.numel = out.numel();
    it.scalar = scalar;
    auto grp = groups.begin();
    while (grp != groups.end() && grp->first != out.dtype()) ++grp;
    if (grp == groups.end()) grp = groups.insert(groups.end(), {out.dtype(), {}});
    grp->second.push_back(it);
  }
  for (const auto& [dt, items] : groups)
    launch_foreach(Op, dt, items.data(), static_cast<int64_t>(items.size()), alpha, s);
}
KILN_REGISTER_KERNEL(_foreach_neg, CUDA, foreach_kernel<ForeachOp::Neg>);
KILN_REGISTER_KERNEL(_foreach_sqrt, CUDA, foreach_kernel<ForeachOp::Sqrt>);
KILN_REGISTER_KERNEL(_foreach_add, CUDA, foreach_kernel<ForeachOp::AddAlpha>);
KILN_REGISTER_KERNEL(_foreach_add_, CUDA, foreach_kernel<ForeachOp::AddAlpha>);
KILN_REGISTER_KERNEL(_foreach_add_scalar_, CUDA, foreach_kernel<ForeachOp::AddScalar>);
KILN_REGISTER_KERNEL(_foreach_mul_scalar_, CUDA, foreach_kernel<ForeachOp::MulScalar>);
KILN_REGISTER_KERNEL(_foreach_div_scalar_, CUDA, foreach_kernel<ForeachOp::DivScalar>);
KILN_REGISTER_KERNEL(_foreach_addcmul, CUDA, foreach_kernel<ForeachOp::Addcmul>);
KILN_REGISTER_KERNEL(_foreach_addcmul_, CUDA, foreach_kernel<ForeachOp::Addcmul>);
KILN_REGISTER_KERNEL(_foreach_addcdiv_, CUDA, foreach_kernel<ForeachOp::Addcdiv>);
KILN_REGISTER_KERNEL(_foreach_lerp_, CUDA, foreach_kernel<ForeachOp::Lerp>);
KILN_REGISTER_KERNEL(_foreach_maximum_, CUDA, foreach_kernel<ForeachOp::Maximum>);

}  // namespace
}  // namespace kiln::cuda
