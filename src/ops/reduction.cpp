// Reductions: public functions, meta functions and decompositions.
// VJP rules are in grad_reduction.cpp, CPU kernels in backend/cpu/reduction.cpp.
#include "kiln/ops/reduction.h"

#include <cmath>
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
using Ints = std::vector<int64_t>;

// ---- meta ----

// torch: sum/prod/cumsum of integral or bool inputs give int64 unless a dtype is given.
DType sum_dtype(DType in, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_integral(in, /*include_bool=*/true) ? kInt64 : in;
}

// Reductions that have no identity (amax, max, argmax, ...) reject empty reduced dims.
void check_nonempty_dims(const Tensor& x, const std::vector<bool>& mask, const char* op) {
  for (int64_t d = 0; d < x.dim(); ++d)
    KILN_CHECK(!mask[d] || x.sizes()[d] != 0, op, "(): Expected reduction dim ", d,
               " to have non-zero size, got input of shape ", shape_str(x.sizes()));
  KILN_CHECK(x.dim() > 0 || x.numel() > 0, op, "(): Expected a non-empty input");
}

std::vector<TensorMeta> meta_sum(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), sum_dtype(x.dtype(), c.attrs.opt_dtype(2)),
                    x.device());
}
KILN_REGISTER_META(sum, meta_sum);
KILN_REGISTER_META(prod, meta_sum);

std::vector<TensorMeta> meta_mean(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  DType t = c.attrs.opt_dtype(2).value_or(x.dtype());
  KILN_CHECK(is_floating_point(t), "mean(): could not infer output dtype. Input dtype must be a floating point dtype",
             " (or pass dtype=). Got: ", t);
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), t, x.device());
}
KILN_REGISTER_META(mean, meta_mean);

std::vector<TensorMeta> meta_amax(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  check_nonempty_dims(x, mask, c.name());
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), x.dtype(), x.device());
}
KILN_REGISTER_META(amax, meta_amax);
KILN_REGISTER_META(amin, meta_amax);

std::vector<TensorMeta> meta_max_dim(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(Ints{c.attrs.i(0)}, x.dim(), c.name());
  check_nonempty_dims(x, mask, c.name());
  Shape s = reduced_shape(x.sizes(), mask, c.attrs.b(1));
  auto m = one_output(s, x.dtype(), x.device());
  m.push_back(one_output(s, kInt64, x.device())[0]);
  return m;
}
KILN_REGISTER_META(max, meta_max_dim);
KILN_REGISTER_META(min, meta_max_dim);

std::vector<TensorMeta> meta_argmax(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto dim = c.attrs.opt_i(0);
  bool keepdim = c.attrs.b(1);
  if (!dim) {
    KILN_CHECK(x.numel() > 0, c.name(), "(): Expected reduction dim to be specified for input.numel() == 0, got shape ",
               shape_str(x.sizes()));
    return one_output(keepdim ? Shape(x.dim(), 1) : Shape{}, kInt64, x.device());
  }
  auto mask = dim_mask(Ints{*dim}, x.dim(), c.name());
  check_nonempty_dims(x, mask, c.name());
  return one_output(reduced_shape(x.sizes(), mask, keepdim), kInt64, x.device());
}
KILN_REGISTER_META(argmax, meta_argmax);
KILN_REGISTER_META(argmin, meta_argmax);

std::vector<TensorMeta> meta_var(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": std and var only support floating point dtypes, got ",
             x.dtype());
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  auto m = one_output(reduced_shape(x.sizes(), mask, c.attrs.b(2)), x.dtype(), x.device());
  if (c.op == OpId::var_mean) m.push_back(m[0]);
  return m;
}
KILN_REGISTER_META(var, meta_var);
KILN_REGISTER_META(std, meta_var);
KILN_REGISTER_META(var_mean, meta_var);

std::vector<TensorMeta> meta_logsumexp(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), to_floating(x.dtype()), x.device());
}
KILN_REGISTER_META(logsumexp, meta_logsumexp);

std::vector<TensorMeta> meta_norm(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point input, got ", x.dtype());
  auto mask = dim_mask(c.attrs.ints(1), x.dim(), c.name());
  double p = c.attrs.f(0);
  if (p < 0) {
    // Negative orders have no identity: torch rejects them over empty dims.
    for (int64_t d = 0; d < x.dim(); ++d)
      KILN_CHECK(!mask[d] || x.sizes()[d] != 0, c.name(), ": the norm of order ", p,
                 " over an empty dim is undefined, got shape ", shape_str(x.sizes()));
  } else if (std::isinf(p)) {
    check_nonempty_dims(x, mask, c.name());
  }
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(2)), x.dtype(), x.device());
}
KILN_REGISTER_META(norm, meta_norm);

std::vector<TensorMeta> meta_logical(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  // torch keeps uint8 for uint8 inputs (backward compatibility); everything else gives bool.
  DType t = x.dtype() == kUInt8 ? kUInt8 : kBool;
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), t, x.device());
}
KILN_REGISTER_META(all, meta_logical);
KILN_REGISTER_META(any, meta_logical);

std::vector<TensorMeta> meta_cumsum(const OpCall& c) {
  const Tensor& x = c.in(0);
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  return one_output(x.sizes().vec(), sum_dtype(x.dtype(), c.attrs.opt_dtype(1)), x.device());
}
KILN_REGISTER_META(cumsum, meta_cumsum);
KILN_REGISTER_META(cumprod, meta_cumsum);

std::vector<TensorMeta> meta_nanmean(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), "nanmean(): expected input to have floating point dtype but got ",
             x.dtype());
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), c.attrs.opt_dtype(2).value_or(x.dtype()), x.device());
}
KILN_REGISTER_META(nansum, meta_sum);
KILN_REGISTER_META(nanmean, meta_nanmean);

std::vector<TensorMeta> meta_count_nonzero(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  return one_output(reduced_shape(x.sizes(), mask, false), kInt64, x.device());
}
KILN_REGISTER_META(count_nonzero, meta_count_nonzero);

std::vector<TensorMeta> meta_aminmax(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto dim = c.attrs.opt_i(0);
  bool keepdim = c.attrs.b(1);
  Shape s;
  if (!dim) {
    KILN_CHECK(x.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no ",
               "identity (got shape ", shape_str(x.sizes()), ")");
    s = keepdim ? Shape(x.dim(), 1) : Shape{};
  } else {
    auto mask = dim_mask(Ints{*dim}, x.dim(), c.name());
    check_nonempty_dims(x, mask, c.name());
    s = reduced_shape(x.sizes(), mask, keepdim);
  }
  auto m = one_output(s, x.dtype(), x.device());
  m.push_back(m[0]);
  return m;
}
KILN_REGISTER_META(aminmax, meta_aminmax);

std::vector<TensorMeta> meta_cummax(const OpCall& c) {
  const Tensor& x = c.in(0);
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  auto m = one_output(x.sizes().vec(), x.dtype(), x.device());
  m.push_back(one_output(x.sizes().vec(), kInt64, x.device())[0]);
  return m;
}
KILN_REGISTER_META(cummax, meta_cummax);
KILN_REGISTER_META(cummin, meta_cummax);

std::vector<TensorMeta> meta_logcumsumexp(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point input, got ", x.dtype());
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(logcumsumexp, meta_logcumsumexp);

// ---- decompositions ----

int64_t reduced_numel(const Tensor& x, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) n *= x.sizes()[d];
  return n;
}

// Half and bfloat16 compute in float and round once at the end.
DType compute_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

std::vector<Tensor> decomp_mean(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  DType out = c.attrs.opt_dtype(2).value_or(x.dtype());
  Tensor s = call_op1(OpId::sum, {x}, {c.attrs[0], c.attrs[1], compute_dtype(out)});
  return {to(div(s, Scalar(static_cast<double>(reduced_numel(x, mask)))), out)};
}
KILN_REGISTER_DECOMP(mean, decomp_mean);

// var = sum((x - mean)^2) / max(0, N - correction): two passes, numerically stable.
std::vector<Tensor> decomp_var_mean(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": std and var only support floating point dtypes, got ",
             x.dtype());
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  double corr = c.attrs.f(1);
  bool keepdim = c.attrs.b(2);
  Tensor xc = to(x, compute_dtype(x.dtype()));
  const Ints& dims = c.attrs.ints(0);
  Tensor m = call_op1(OpId::mean, {xc}, {dims, true, std::monostate{}});
  Tensor d = sub(xc, m);
  Tensor ss = call_op1(OpId::sum, {mul(d, d)}, {dims, keepdim, std::monostate{}});
  double n = static_cast<double>(reduced_numel(x, mask));
  Tensor v = div(ss, Scalar(std::max(0.0, n - corr)));
  if (c.op == OpId::std) v = sqrt(v);
  std::vector<Tensor> r{to(v, x.dtype())};
  if (c.op == OpId::var_mean) {
    if (!keepdim) m = call_op1(OpId::mean, {xc}, {dims, false, std::monostate{}});
    r.push_back(to(m, x.dtype()));
  }
  return r;
}
KILN_REGISTER_DECOMP(var, decomp_var_mean);
KILN_REGISTER_DECOMP(std, decomp_var_mean);
KILN_REGISTER_DECOMP(var_mean, decomp_var_mean);

// logsumexp = log(sum(exp(x - m))) + m with m the max, replaced by 0 where it is
// infinite so that all -inf rows give -inf and +inf rows +inf (not nan).
std::vector<Tensor> decomp_logsumexp(const OpCall& c) {
  Tensor x = c.in(0);
  DType out = to_floating(x.dtype());
  x = to(x, compute_dtype(out));
  const Ints& dims = c.attrs.ints(0);
  bool keepdim = c.attrs.b(1);
  dim_mask(dims, x.dim(), c.name());  // errors name logsumexp, not amax
  Tensor m = x.numel() == 0 ? full(IntArrayRef{}, Scalar(0.0), TensorOptions(x.dtype()).device(x.device()))
                            : call_op1(OpId::amax, {x}, {dims, true});
  m = where(isinf(m), Scalar(0.0), m);
  Tensor s = call_op1(OpId::sum, {exp(sub(x, m))}, {dims, keepdim, std::monostate{}});
  Tensor mk = m;
  if (!keepdim && m.dim() > 0) {
    auto mask = dim_mask(dims, x.dim(), c.name());
    Ints sq;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (mask[d]) sq.push_back(d);
    mk = squeeze(m, sq);
  }
  return {to(add(log(s), mk), out)};
}
KILN_REGISTER_DECOMP(logsumexp, decomp_logsumexp);

std::vector<Tensor> decomp_norm(const OpCall& c) {
  const Tensor& x0 = c.in(0);
  double p = c.attrs.f(0);
  const Ints& dims = c.attrs.ints(1);
  bool keepdim = c.attrs.b(2);
  // Eager composites run their decomposition without the meta: check here too.
  KILN_CHECK(is_floating_point(x0.dtype()), c.name(), ": expected a floating point input, got ", x0.dtype());
  dim_mask(dims, x0.dim(), c.name());  // errors name norm, not the reductions it uses
  Tensor x = to(x0, compute_dtype(x0.dtype()));
  auto red = [&](OpId op, const Tensor& t) {
    if (op == OpId::sum) return call_op1(op, {t}, {dims, keepdim, std::monostate{}});
    return call_op1(op, {t}, {dims, keepdim});
  };
  Tensor r;
  if (p == 2) r = sqrt(red(OpId::sum, mul(x, x)));
  else if (p == 1) r = red(OpId::sum, abs(x));
  else if (std::isinf(p)) r = red(p > 0 ? OpId::amax : OpId::amin, abs(x));
  else if (p == 0) r = red(OpId::sum, to(ne(x, Scalar(0)), x.dtype()));
  else r = pow(red(OpId::sum, pow(abs(x), Scalar(p))), Scalar(1.0 / p));
  return {to(r, x0.dtype())};
}
KILN_REGISTER_DECOMP(norm, decomp_norm);

std::vector<Tensor> decomp_nansum(const OpCall& c) {
  const Tensor& x = c.in(0);
  Tensor z = is_floating_point(x.dtype()) ? where(isnan(x), Scalar(0), x) : x;
  return {call_op1(OpId::sum, {z}, {c.attrs[0], c.attrs[1], c.attrs[2]})};
}
KILN_REGISTER_DECOMP(nansum, decomp_nansum);

// nanmean = nansum / the number of non-NaN values (NaN where there are none, as torch).
std::vector<Tensor> decomp_nanmean(const OpCall& c) {
  const Tensor& x = c.in(0);
  DType out = c.attrs.opt_dtype(2).value_or(x.dtype());
  Tensor s = call_op1(OpId::nansum, {x}, {c.attrs[0], c.attrs[1], compute_dtype(out)});
  Tensor n = call_op1(OpId::sum, {logical_not(isnan(x))}, {c.attrs[0], c.attrs[1], std::monostate{}});
  return {to(div(s, n), out)};
}
KILN_REGISTER_DECOMP(nanmean, decomp_nanmean);

std::vector<Tensor> decomp_count_nonzero(const OpCall& c) {
  return {call_op1(OpId::sum, {ne(c.in(0), Scalar(0))}, {c.attrs[0], false, std::monostate{}})};
}
KILN_REGISTER_DECOMP(count_nonzero, decomp_count_nonzero);

std::vector<Tensor> decomp_aminmax(const OpCall& c) {
  auto dim = c.attrs.opt_i(0);
  Ints dims = dim ? Ints{*dim} : Ints{};
  return {call_op1(OpId::amin, {c.in(0)}, {dims, c.attrs.b(1)}), call_op1(OpId::amax, {c.in(0)}, {dims, c.attrs.b(1)})};
}
KILN_REGISTER_DECOMP(aminmax, decomp_aminmax);

// Note [Scans by doubling]
// cummax/cummin/logcumsumexp have no prim: they are inclusive scans of an
// associative combine, done in ceil(log2 n) steps (Hillis-Steele): step s
// combines each element with the one s before it, if there is one. Each step
// is pointwise ops on a shifted copy, which any backend runs and fuses.
struct Scan {
  int64_t dim, n;
  Tensor pos;  // 0..n-1 along dim, size 1 elsewhere
};
Scan scan_of(const Tensor& x, int64_t dim, const char* op) {
  Scan s;
  s.dim = wrap_dim(dim, x.dim(), op);
  s.n = x.dim() == 0 ? 1 : x.sizes()[s.dim];
  Shape ps(x.dim(), 1);
  if (x.dim() > 0) ps[s.dim] = s.n;
  s.pos = reshape(arange(s.n, TensorOptions(kInt64).device(x.device())), ps);
  return s;
}
// t shifted by `by` along the scan dim; the first `by` entries are filler, masked by the caller.
Tensor shifted(const Tensor& t, const Scan& s, int64_t by) {
  return cat({narrow(t, s.dim, 0, by), narrow(t, s.dim, 0, s.n - by)}, s.dim);
}

// The running extreme and the last index reaching it; a NaN replaces it and
// stays, each later NaN taking its index (torch's cummax_cummin_helper).
std::vector<Tensor> decomp_cummax(const OpCall& c) {
  const Tensor& x = c.in(0);
  Scan sc = scan_of(x, c.attrs.i(0), c.name());
  Tensor v = clone(x), idx = expand(sc.pos, x.sizes().vec());
  if (x.dim() == 0) return {v, contiguous(idx)};
  bool is_max = c.op == OpId::cummax, fl = is_floating_point(x.dtype());
  for (int64_t by = 1; by < sc.n; by *= 2) {
    Tensor ev = shifted(v, sc, by), ei = shifted(idx, sc, by);
    // Keep the later summary unless the earlier one beats it.
    Tensor later = logical_or(lt(sc.pos, Scalar(by)), is_max ? ge(v, ev) : le(v, ev));
    if (fl) later = logical_or(isnan(v), logical_and(later, logical_not(isnan(ev))));
    v = where(later, v, ev);
    idx = where(later, idx, ei);
  }
  return {v, contiguous(idx)};
}
KILN_REGISTER_DECOMP(cummax, decomp_cummax);
KILN_REGISTER_DECOMP(cummin, decomp_cummax);

// log(sum_{j<=i} exp(x_j)) by logaddexp steps (Note [Scans by doubling]), so a
// small prefix is not lost under a larger later value, as one global shift would.
std::vector<Tensor> decomp_logcumsumexp(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point input, got ", x.dtype());
  Scan sc = scan_of(x, c.attrs.i(0), c.name());
  Tensor y = to(x, compute_dtype(x.dtype()));
  if (x.dim() == 0) return {clone(x)};
  for (int64_t by = 1; by < sc.n; by *= 2) y = where(lt(sc.pos, Scalar(by)), y, logaddexp(y, shifted(y, sc, by)));
  return {to(y, x.dtype())};
}
KILN_REGISTER_DECOMP(logcumsumexp, decomp_logcumsumexp);

Attrs red_attrs(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return {dim.vec(), keepdim, opt_attr(dtype)};
}
double correction_of(const std::optional<Scalar>& c) { return c ? c->to_double() : 1.0; }

}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) { return call_op1(OpId::sum, {x}, red_attrs({}, false, dtype)); }
Tensor sum(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::sum, {x}, red_attrs(dim, keepdim, dtype));
}
Tensor mean(const Tensor& x, std::optional<DType> dtype) { return call_op1(OpId::mean, {x}, red_attrs({}, false, dtype)); }
Tensor mean(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::mean, {x}, red_attrs(dim, keepdim, dtype));
}
Tensor prod(const Tensor& x, std::optional<DType> dtype) { return call_op1(OpId::prod, {x}, red_attrs({}, false, dtype)); }
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::prod, {x}, red_attrs(Ints{dim}, keepdim, dtype));
}
Tensor max(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. ",
             "Specify the reduction dim with the 'dim' argument (got shape ", shape_str(x.sizes()), ")");
  return amax(x);
}
Tensor min(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. ",
             "Specify the reduction dim with the 'dim' argument (got shape ", shape_str(x.sizes()), ")");
  return amin(x);
}
Tensor max(const Tensor& x, const Tensor& other) { return maximum(x, other); }
Tensor min(const Tensor& x, const Tensor& other) { return minimum(x, other); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = call_op(OpId::max, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = call_op(OpId::min, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
Tensor amax(const Tensor& x, IntArrayRef dim, bool keepdim) { return call_op1(OpId::amax, {x}, {dim.vec(), keepdim}); }
Tensor amin(const Tensor& x, IntArrayRef dim, bool keepdim) { return call_op1(OpId::amin, {x}, {dim.vec(), keepdim}); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmax, {x}, {opt_attr(dim), keepdim});
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmin, {x}, {opt_attr(dim), keepdim});
}
Tensor var(const Tensor& x, IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) {
  return call_op1(OpId::var, {x}, {dim.vec(), correction_of(correction), keepdim});
}
Tensor std(const Tensor& x, IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) {
  return call_op1(OpId::std, {x}, {dim.vec(), correction_of(correction), keepdim});
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) {
  auto r = call_op(OpId::var_mean, {x}, {dim.vec(), correction_of(correction), keepdim});
  return {r[0], r[1]};
}
// std through its own op (not sqrt(var)), so equal values get std's zero gradient, not 0/0.
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) {
  Tensor m = std::get<1>(var_mean(x, dim, correction, keepdim));
  return {kiln::std(x, dim, correction, keepdim), m};
}
Tensor logsumexp(const Tensor& x, IntArrayRef dim, bool keepdim) {
  return call_op1(OpId::logsumexp, {x}, {dim.vec(), keepdim});
}
Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dim, bool keepdim) {
  return call_op1(OpId::norm, {x}, {p.to_double(), dim.vec(), keepdim});
}
Tensor all(const Tensor& x) { return call_op1(OpId::all, {x}, {Ints{}, false}); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) { return call_op1(OpId::all, {x}, {Ints{dim}, keepdim}); }
Tensor any(const Tensor& x) { return call_op1(OpId::any, {x}, {Ints{}, false}); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) { return call_op1(OpId::any, {x}, {Ints{dim}, keepdim}); }
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::cumsum, {x}, {dim, opt_attr(dtype)});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::cumprod, {x}, {dim, opt_attr(dtype)});
}
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  auto r = call_op(OpId::cummax, {x}, {dim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  auto r = call_op(OpId::cummin, {x}, {dim});
  return {r[0], r[1]};
}
Tensor logcumsumexp(const Tensor& x, int64_t dim) { return call_op1(OpId::logcumsumexp, {x}, {dim}); }
Tensor nansum(const Tensor& x, std::optional<DType> dtype) {
  return call_op1(OpId::nansum, {x}, red_attrs({}, false, dtype));
}
Tensor nansum(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::nansum, {x}, red_attrs(dim, keepdim, dtype));
}
Tensor nanmean(const Tensor& x, std::optional<DType> dtype) {
  return call_op1(OpId::nanmean, {x}, red_attrs({}, false, dtype));
}
Tensor nanmean(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::nanmean, {x}, red_attrs(dim, keepdim, dtype));
}
Tensor count_nonzero(const Tensor& x, IntArrayRef dim) { return call_op1(OpId::count_nonzero, {x}, {dim.vec()}); }
Tensor count_nonzero(const Tensor& x, int64_t dim) { return call_op1(OpId::count_nonzero, {x}, {Ints{dim}}); }
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  auto r = call_op(OpId::aminmax, {x}, {opt_attr(dim), keepdim});
  return {r[0], r[1]};
}

// ---- Tensor methods ----
Tensor Tensor::sum(std::optional<DType> dtype) const { return kiln::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) const {
  return kiln::sum(*this, dim, keepdim, dtype);
}
Tensor Tensor::mean(std::optional<DType> dtype) const { return kiln::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) const {
  return kiln::mean(*this, dim, keepdim, dtype);
}
Tensor Tensor::prod(std::optional<DType> dtype) const { return kiln::prod(*this, dtype); }
Tensor Tensor::max() const { return kiln::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return kiln::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return kiln::min(*this); }
Tensor Tensor::max(const Tensor& other) const { return kiln::maximum(*this, other); }
Tensor Tensor::min(const Tensor& other) const { return kiln::minimum(*this, other); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return kiln::min(*this, dim, keepdim); }
Tensor Tensor::amax(IntArrayRef dim, bool keepdim) const { return kiln::amax(*this, dim, keepdim); }
Tensor Tensor::amin(IntArrayRef dim, bool keepdim) const { return kiln::amin(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmin(*this, dim, keepdim); }
Tensor Tensor::var(IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) const {
  return kiln::var(*this, dim, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dim, std::optional<Scalar> correction, bool keepdim) const {
  return kiln::std(*this, dim, correction, keepdim);
}
Tensor Tensor::norm(const Scalar& p, IntArrayRef dim, bool keepdim) const { return kiln::norm(*this, p, dim, keepdim); }
Tensor Tensor::all() const { return kiln::all(*this); }
Tensor Tensor::any() const { return kiln::any(*this); }

}  // namespace kiln
