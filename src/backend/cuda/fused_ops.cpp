// Host side of the fused CUDA kernels (fused.cu): softmax / log_softmax and layer_norm and their
// backward ops as the CPU's kernels (backend/cpu/nn.cpp) take their inputs, and the foreach ops (Note [CUDA foreach])
// as the CPU's (backend/cpu/foreach.cpp): dense tensors in multi-tensor launches, others one by one;
// then tril/triu, one_hot, roll and repeat, as the CPU kernels (backend/cpu/shape_copy.cpp, indexing.cpp).
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/fused.h"
#include "backend/cuda/launch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

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

// ---- _softmax_backward_data (grad_out, output; dim, log) (Note [Fused norm and activation
// backward]): both dense in the output's dtype, [outer, n, inner] around dim ----
void softmax_backward_data_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  const Tensor gy = dense_as(c.in(0), out.dtype()), y = dense_as(c.in(1), out.dtype());
  const int64_t d = y.dim() == 0 ? 0 : wrap_dim(c.attrs.i(0), y.dim(), c.name());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < y.dim(); ++i) {
    if (i < d)
      outer *= y.sizes()[i];
    else if (i == d)
      n = y.sizes()[i];
    else
      inner *= y.sizes()[i];
  }
  launch_softmax_backward(c.attrs.b(1), out.dtype(), ptr(gy), ptr(y), ptr(out), outer, n, inner, stream_of(out));
}
KILN_REGISTER_KERNEL(_softmax_backward_data, CUDA, softmax_backward_data_kernel);

// ---- _layer_norm_backward (grad_out, x, weight?; normalized_shape, eps) -> (grad_x,
// grad_weight, grad_bias) (Note [Fused norm and activation backward]): grad_x of x's dtype, the
// others (and the weight, and the scratch) of its opmath dtype ----
void layer_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  int64_t n = 1;
  for (int64_t s : c.attrs.ints(0)) n *= s;
  if (n == 0) return;
  const int64_t rows = x0.numel() / n;
  DeviceGuard g(outs[0].device().index);
  const DType t = x0.dtype(), cd = outs[1].dtype();
  const Device dev = x0.device();
  const Tensor x = dense_as(x0, t), gy = dense_as(c.in(0), t);
  const Tensor w = c.in(2).defined() ? dense_as(c.in(2), cd) : Tensor();
  const int64_t splits = layer_norm_backward_splits(t, rows, n);
  Tensor stats = make_tensor({2 * rows}, cd, dev), part = make_tensor({2 * splits * n}, cd, dev);
  launch_layer_norm_backward(t, ptr(gy), ptr(x), w.defined() ? ptr(w) : nullptr, ptr(outs[0]), ptr(outs[1]),
                             ptr(outs[2]), ptr(stats), ptr(part), rows, n, splits, c.attrs.f(1), stream_of(outs[0]));
}
KILN_REGISTER_KERNEL(_layer_norm_backward, CUDA, layer_norm_backward_kernel);

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

// ---- _fused_adam_ (Note [Fused Adam]): dense positions in multi-tensor launches, grouped by
// dtype; a position with a strided tensor runs on dense copies, written back after ----
void fused_adam_kernel(const OpCall& c, std::vector<Tensor>&) {
  const bool amsgrad = c.attrs.b(7);
  const size_t lists = amsgrad ? 5 : 4;
  const size_t n = c.inputs.size() / lists;
  const AdamScalars h{c.attrs.f(2), c.attrs.f(3), c.attrs.f(4), c.attrs.f(5),
                      c.attrs.f(6), amsgrad,      c.attrs.b(8), c.attrs.b(9)};
  const int dev = c.in(0).device().index;
  DeviceGuard g(dev);
  cudaStream_t s = current_cuda_stream(dev);
  std::vector<std::pair<DType, std::vector<AdamItem>>> groups;
  std::vector<Tensor> copies;                         // dense copies of strided tensors
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (written strided tensor, its copy)
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = c.in(i);
    if (p.numel() == 0) continue;
    AdamItem it;
    for (size_t l = 0; l < lists; ++l) {
      const Tensor& t = c.in(l * n + i);
      Tensor d = dense_as(t, t.dtype());
      if (!d.is_same(t)) {
        copies.push_back(d);
        if (l != 1) write_back.emplace_back(t, d);
      }
      it.data[l] = ptr(d);
    }
    it.numel = p.numel();
    it.step_size = c.attrs.doubles(0)[i];
    it.bc2_sqrt = c.attrs.doubles(1)[i];
    auto grp = groups.begin();
    while (grp != groups.end() && grp->first != p.dtype()) ++grp;
    if (grp == groups.end()) grp = groups.insert(groups.end(), {p.dtype(), {}});
    grp->second.push_back(it);
  }
  for (const auto& [dt, items] : groups) launch_fused_adam(dt, h, items.data(), static_cast<int64_t>(items.size()), s);
  for (const auto& [t, d] : write_back) copy_same_device(t, d);
}
KILN_REGISTER_KERNEL(_fused_adam_, CUDA, fused_adam_kernel);

// ---- tril / triu (x; diagonal): x copied, then the dropped triangle zeroed in place ----
void tri_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  copy_same_device(out, c.in(0));
  const int64_t n = out.sizes()[out.dim() - 2], m = out.sizes()[out.dim() - 1];
  launch_tri_zero(c.op == OpId::tril, c.attrs.i(0), static_cast<int>(itemsize(out.dtype())), ptr(out),
                  out.numel() / (n * m), n, m, stream_of(out));
}
KILN_REGISTER_KERNEL(tril, CUDA, tri_kernel);
KILN_REGISTER_KERNEL(triu, CUDA, tri_kernel);

// ---- one_hot (x; num_classes): as the CPU kernel, class values out of range are an error
// naming the first of them (which costs a wait for the stream, as torch's check does) ----
void one_hot_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const int64_t nc = c.attrs.i(0);
  DeviceGuard g(out.device().index);
  cudaStream_t s = stream_of(out);
  Tensor idx = dense_as(c.in(0), DType::Int64);
  const int64_t count = idx.numel();
  Tensor bad = make_tensor({2}, DType::Int64, out.device());
  launch_fill(make_elementwise_args({&bad}), 0.0, count, true, s);
  launch_one_hot(static_cast<const int64_t*>(ptr(idx)), count, nc, static_cast<int64_t*>(ptr(out)),
                 static_cast<int64_t*>(ptr(bad)), s);
  if (count == 0) return;
  if (stream_capturing(s)) {  // Note [Checks while capturing]: flag[0] is the first bad position
    launch_assert_flag(static_cast<const int64_t*>(ptr(bad)), count,
                       "one_hot: a class value is out of range for num_classes " + std::to_string(nc), s);
    return;
  }
  int64_t pos = count, v = 0;
  KILN_CUDA_CHECK(cudaMemcpyAsync(&pos, ptr(bad), sizeof pos, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (pos >= count) return;
  KILN_CUDA_CHECK(cudaMemcpy(&v, static_cast<const int64_t*>(ptr(idx)) + pos, sizeof v, cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  KILN_CHECK(v >= 0, c.name(), ": class values must be non-negative, got ", v);
  KILN_FAIL(c.name(), ": class values must be smaller than num_classes (", nc, "), got ", v);
}
KILN_REGISTER_KERNEL(one_hot, CUDA, one_hot_kernel);

// ---- roll and repeat: strided copies between views, no kernel of their own ----

// t's elements [start, start + len) along dim d, as a view.
Tensor narrow_view(const Tensor& t, int64_t d, int64_t start, int64_t len) {
  Shape sizes = t.sizes().vec();
  sizes[static_cast<size_t>(d)] = len;
  return make_view(t, sizes, t.strides(), t.storage_offset() + start * t.strides()[static_cast<size_t>(d)]);
}

// dst = src rolled by `shift` along dim d: dst[o] = src[(o - shift) mod n] (two copies).
void roll_one(const Tensor& dst, const Tensor& src, int64_t d, int64_t shift) {
  const int64_t n = src.sizes()[static_cast<size_t>(d)];
  const int64_t k = ((shift % n) + n) % n;
  if (k == 0) {
    copy_same_device(dst, src);
    return;
  }
  copy_same_device(narrow_view(dst, d, k, n - k), narrow_view(src, d, 0, n - k));
  copy_same_device(narrow_view(dst, d, 0, k), narrow_view(src, d, n - k, k));
}

// (x; shifts, dims): without dims the flattened tensor is rolled by shifts[0]. A dim named
// twice takes its last shift, as the CPU kernel's tables.
void roll_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  const auto& shifts = c.attrs.ints(0);
  const auto& dims = c.attrs.ints(1);
  if (dims.empty()) {
    Tensor x = dense_as(c.in(0), out.dtype());
    const Shape flat{x.numel()}, unit{1};
    roll_one(make_view(out, flat, unit, out.storage_offset()), make_view(x, flat, unit, x.storage_offset()), 0,
             shifts[0]);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> todo;  // (dim, shift), each dim once
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t w = wrap_dim(dims[k], c.in(0).dim(), "roll");
    auto it = todo.begin();
    while (it != todo.end() && it->first != w) ++it;
    if (it == todo.end())
      todo.emplace_back(w, shifts[k]);
    else
      it->second = shifts[k];
  }
  Tensor cur = c.in(0);
  for (size_t k = 0; k < todo.size(); ++k) {
    Tensor dst = k + 1 == todo.size() ? out : make_tensor(out.sizes(), out.dtype(), out.device());
    roll_one(dst, cur, todo[k].first, todo[k].second);
    cur = dst;
  }
}
KILN_REGISTER_KERNEL(roll, CUDA, roll_kernel);

// (x; repeats): out viewed with each dim d split into (repeats[d], size[d]) and x as a view
// with stride 0 along the repeats (x has leading size-1 dims up to len(repeats)); one copy.
void repeat_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  const Tensor& x = c.in(0);
  const auto& reps = c.attrs.ints(0);
  const int64_t nd = static_cast<int64_t>(reps.size()), lead = nd - x.dim();
  Shape sizes, out_strides, x_strides;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t s = d < lead ? 1 : x.sizes()[d - lead], st = d < lead ? 0 : x.strides()[d - lead];
    const int64_t r = reps[d], ost = out.strides()[d];
    if (r != 1) {
      sizes.push_back(r);
      out_strides.push_back(s * ost);
      x_strides.push_back(0);
    }
    if (s != 1 || r == 1) {
      sizes.push_back(s);
      out_strides.push_back(ost);
      x_strides.push_back(st);
    }
  }
  if (static_cast<int>(sizes.size()) > kMaxDims) {
    staged_on_cpu(c, outs);
    return;
  }
  DeviceGuard g(out.device().index);
  copy_same_device(make_view(out, sizes, out_strides, out.storage_offset()),
                   make_view(x, sizes, x_strides, x.storage_offset()));
}
KILN_REGISTER_KERNEL(repeat, CUDA, repeat_kernel);

}  // namespace
}  // namespace kiln::cuda
