// CUDA kernels for the reductions (sum prod mean amax amin all any, max/min over a dim,
// argmax/argmin): the reduced dims are moved last in a contiguous staging tensor, so every
// reduction is reduce.cu's one kernel over [rows, n]; the per-row results are converted to
// the output's dtype as the CPU kernels do.
#include <optional>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/reduce.h"
#include "ops/meta_util.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

struct Rows {
  Tensor x;  // contiguous [rows, n] in the compute dtype
  int64_t rows = 1, n = 1;
};

// x with the dims of `mask` moved last (kept dims in order first), made contiguous in `t`.
Rows to_rows(const Tensor& x, const std::vector<bool>& mask, DType t) {
  Rows r;
  Shape perm_sizes, perm_strides;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (mask[static_cast<size_t>(d)] != (pass == 1)) continue;
      perm_sizes.push_back(x.size(d));
      perm_strides.push_back(x.stride(d));
      (pass == 0 ? r.rows : r.n) *= x.size(d);
    }
  Tensor view = make_view(x, perm_sizes, perm_strides, x.storage_offset());
  if (view.is_contiguous() && x.dtype() == t) {
    r.x = view;
  } else {
    r.x = make_tensor(perm_sizes, t, x.device());
    copy_same_device(r.x, view);
  }
  return r;
}

// Note [CUDA reductions over outer and inner dims]: a dense x whose kept dims are one block in
// the middle, [A, M, B], is reduced in place (no copy moving the reduced dims last) when that
// pays: a batch norm's statistics, few long rows, a full reduction. Returns false otherwise.
bool reduce_outer_inner(ReduceOp op, const Tensor& x, const std::vector<bool>& mask, DType compute, const Tensor& out,
                        double scale, cudaStream_t s) {
  if (!x.is_contiguous() || x.dtype() != compute || x.numel() == 0) return false;
  int64_t k0 = x.dim(), k1 = x.dim();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!mask[static_cast<size_t>(d)]) {
      if (k0 == x.dim()) k0 = d;
      else if (k1 != d) return false;  // kept dims not adjacent
      k1 = d + 1;
    }
  int64_t A = 1, M = 1, B = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < k0 ? A : d < k1 ? M : B) *= x.size(d);
  if (k0 == x.dim()) {  // a full reduction: one row
    B = A;
    A = 1;
  }
  const bool batch_norm_like = A > 1 && B >= 32 && M <= 65535;
  const bool few_long_rows = A == 1 && M < 264 && B >= 8192;
  const bool few_outputs = A > 1 && B < 32 && M <= 16;
  const bool columns = A > 1 && B == 1;  // a bias gradient: no transposing copy
  if (!batch_norm_like && !few_long_rows && !few_outputs && !columns) return false;
  DType rt = reduce_result_dtype(op, compute);
  Tensor vals = make_tensor({M}, rt, x.device());
  Tensor scratch = make_tensor({M * outer_inner_splits(A, M, B)}, rt, x.device());
  launch_reduce_outer_inner(op, x.unsafe_impl()->data(), compute, A, M, B, vals.unsafe_impl()->data(), scale,
                            scratch.unsafe_impl()->data(), s);
  copy_same_device(out, make_view(vals, out.sizes(), contiguous_strides(out.sizes()), 0));
  return true;
}

// Reduces `x` over `mask` into out (and idx for the arg ops).
void reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& mask, DType compute, const Tensor* out,
            const Tensor* idx, double scale = 1.0) {
  int d = x.device().index;
  DeviceGuard g(d);
  cudaStream_t s = current_cuda_stream(d);
  if (out && !idx && reduce_outer_inner(op, x, mask, compute, *out, scale, s)) return;
  Rows r = to_rows(x, mask, compute);
  if (r.rows == 0) return;
  Tensor vals, index;
  if (out) vals = make_tensor({r.rows}, reduce_result_dtype(op, compute), x.device());
  if (idx) index = make_tensor({r.rows}, DType::Int64, x.device());
  launch_reduce(op, r.x.unsafe_impl()->data(), compute, r.rows, r.n, out ? vals.unsafe_impl()->data() : nullptr,
                idx ? reinterpret_cast<int64_t*>(index.unsafe_impl()->data()) : nullptr, scale, s);
  if (out) copy_same_device(*out, make_view(vals, out->sizes(), contiguous_strides(out->sizes()), 0));
  if (idx) copy_same_device(*idx, make_view(index, idx->sizes(), contiguous_strides(idx->sizes()), 0));
}

std::vector<bool> mask_of(const OpCall& c) { return dim_mask(c.attrs.ints(0), c.in(0).dim(), c.name()); }

// sum/prod compute in the output dtype, except that integral inputs with an integral output
// accumulate straight from the input (in int64, as torch and the CPU kernels).
DType compute_for(const Tensor& x, DType out) {
  return is_integral(x.dtype(), true) && is_integral(out, true) ? x.dtype() : out;
}

void sum_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  reduce(ReduceOp::Sum, c.in(0), mask_of(c), compute_for(c.in(0), outs[0].dtype()), &outs[0], nullptr);
}
KILN_REGISTER_KERNEL(sum, CUDA, sum_kernel);

void mean_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto mask = mask_of(c);
  int64_t n = 1;
  for (int64_t d = 0; d < c.in(0).dim(); ++d)
    if (mask[static_cast<size_t>(d)]) n *= c.in(0).size(d);
  KILN_CHECK(is_floating_point(outs[0].dtype()), "mean: expected a floating point dtype, got ", outs[0].dtype());
  reduce(ReduceOp::Sum, c.in(0), mask, outs[0].dtype(), &outs[0], nullptr, 1.0 / static_cast<double>(n));
}
KILN_REGISTER_KERNEL(mean, CUDA, mean_kernel);

void prod_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  reduce(ReduceOp::Prod, c.in(0), mask_of(c), compute_for(c.in(0), outs[0].dtype()), &outs[0], nullptr);
}
KILN_REGISTER_KERNEL(prod, CUDA, prod_kernel);

template <ReduceOp Op>
void same_dtype_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  reduce(Op, c.in(0), mask_of(c), c.in(0).dtype(), &outs[0], nullptr);
}
KILN_REGISTER_KERNEL(amax, CUDA, same_dtype_kernel<ReduceOp::Max>);
KILN_REGISTER_KERNEL(amin, CUDA, same_dtype_kernel<ReduceOp::Min>);
KILN_REGISTER_KERNEL(all, CUDA, same_dtype_kernel<ReduceOp::All>);
KILN_REGISTER_KERNEL(any, CUDA, same_dtype_kernel<ReduceOp::Any>);

// The mask of one dim (nullopt: all of them, as argmax without dim flattens).
std::vector<bool> one_dim(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(x.dim()), !dim.has_value());
  if (dim && x.dim() > 0) mask[static_cast<size_t>(wrap_dim(*dim, x.dim(), op))] = true;
  return mask;
}

template <bool IsMax>
void max_dim_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  if (x.numel() == 0) return;
  reduce(IsMax ? ReduceOp::ArgMax : ReduceOp::ArgMin, x, one_dim(x, c.attrs.i(0), c.name()), x.dtype(), &outs[0],
         &outs[1]);
}
KILN_REGISTER_KERNEL(max, CUDA, max_dim_kernel<true>);
KILN_REGISTER_KERNEL(min, CUDA, max_dim_kernel<false>);

template <bool IsMax>
void argmax_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  if (x.numel() == 0) return;
  reduce(IsMax ? ReduceOp::ArgMax : ReduceOp::ArgMin, x, one_dim(x, c.attrs.opt_i(0), c.name()), x.dtype(), nullptr,
         &outs[0]);
}
KILN_REGISTER_KERNEL(argmax, CUDA, argmax_kernel<true>);
KILN_REGISTER_KERNEL(argmin, CUDA, argmax_kernel<false>);

}  // namespace
}  // namespace kiln::cuda
