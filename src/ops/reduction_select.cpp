// Order-statistic reductions: median, nanmedian, kthvalue, mode, quantile and
// nanquantile (public functions, meta functions and decompositions). All are
// composites over a stable sort, so among equal values the index returned is
// that of the k-th in stable sorted order; NaN sorts as the largest value.
// VJP rules are in grad_reduction.cpp.
#include <cmath>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {
namespace {
using Ints = std::vector<int64_t>;

std::vector<TensorMeta> values_and_indices(const Shape& s, const Tensor& x) {
  std::vector<TensorMeta> r = one_output(s, x.dtype(), x.device());
  r.push_back(one_output(s, kInt64, x.device())[0]);
  return r;
}

// The shape of a reduction over one optional dim: absent means every element
// (keepdim then keeps every dim as size 1, as torch.aminmax and quantile).
Shape opt_dim_shape(const Tensor& x, std::optional<int64_t> dim, bool keepdim, const char* op) {
  if (!dim) return keepdim ? Shape(x.dim(), 1) : Shape{};
  return reduced_shape(x.sizes(), dim_mask(Ints{*dim}, x.dim(), op), keepdim);
}

void check_dim_nonempty(const Tensor& x, int64_t dim, const char* op) {
  int64_t d = wrap_dim(dim, x.dim(), op);
  KILN_CHECK(x.dim() == 0 || x.sizes()[d] != 0, op, "(): Expected reduction dim ", d,
             " to have non-zero size, got input of shape ", shape_str(x.sizes()));
}

// ---- meta ----

std::vector<TensorMeta> meta_median(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto dim = c.attrs.opt_i(0);
  KILN_CHECK(x.dtype() != kBool, c.name(), "(): not implemented for dtype bool");
  if (dim) check_dim_nonempty(x, *dim, c.name());
  // Over every element, an empty input gives NaN (as torch); an integer type has none.
  KILN_CHECK(dim || x.numel() > 0 || is_floating_point(x.dtype()), c.name(),
             "(): the median of an empty tensor is NaN, which dtype ", x.dtype(), " cannot hold");
  return values_and_indices(opt_dim_shape(x, dim, c.attrs.b(1), c.name()), x);
}
KILN_REGISTER_META(median, meta_median);
KILN_REGISTER_META(nanmedian, meta_median);

std::vector<TensorMeta> meta_kthvalue(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dtype() != kBool, c.name(), "(): not implemented for dtype bool");
  int64_t k = c.attrs.i(0);
  int64_t d = wrap_dim(c.attrs.i(1), x.dim(), c.name());
  check_dim_nonempty(x, d, c.name());
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[d];
  KILN_CHECK(k >= 1 && k <= n, c.name(), "(): selected number k out of range for dimension ", d, ": k is ", k,
             ", expected 1 <= k <= ", n, " for input of shape ", shape_str(x.sizes()));
  return values_and_indices(opt_dim_shape(x, d, c.attrs.b(2), c.name()), x);
}
KILN_REGISTER_META(kthvalue, meta_kthvalue);

std::vector<TensorMeta> meta_mode(const OpCall& c) {
  const Tensor& x = c.in(0);
  check_dim_nonempty(x, c.attrs.i(0), c.name());
  return values_and_indices(opt_dim_shape(x, c.attrs.i(0), c.attrs.b(1), c.name()), x);
}
KILN_REGISTER_META(mode, meta_mode);

// torch's quantile_checks, in its order; the output has q's length first unless q is a scalar.
Shape quantile_shape(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& q = c.attrs.doubles(0);
  const std::string& interp = c.attrs.str(4);
  KILN_CHECK(x.numel() > 0, c.name(), "() input tensor must be non-empty");
  KILN_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, c.name(),
             "() input tensor must be either float or double dtype, got ", x.dtype());
  KILN_CHECK(!c.attrs.b(1) || q.size() == 1, "internal: ", c.name(), " with a scalar q takes one value");
  for (double v : q) KILN_CHECK(v >= 0 && v <= 1, c.name(), "() q values must be in the range [0, 1], got ", v);
  KILN_CHECK(
      interp == "linear" || interp == "lower" || interp == "higher" || interp == "midpoint" || interp == "nearest",
      c.name(), "() interpolation must be one of linear, lower, higher, midpoint or nearest, but got '", interp, "'");
  Shape s = opt_dim_shape(x, c.attrs.opt_i(2), c.attrs.b(3), c.name());
  if (!c.attrs.b(1)) s.insert(s.begin(), static_cast<int64_t>(q.size()));
  return s;
}
std::vector<TensorMeta> meta_quantile(const OpCall& c) {
  return one_output(quantile_shape(c), c.in(0).dtype(), c.in(0).device());
}
KILN_REGISTER_META(quantile, meta_quantile);
KILN_REGISTER_META(nanquantile, meta_quantile);

// ---- decompositions ----

// x as slices along one dim: the whole tensor flattened when dim is absent, a
// 0-d tensor as one slice of length 1.
struct Slices {
  Tensor x;
  int64_t dim = 0, n = 1;
};
Slices slices_of(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  Slices s;
  if (!dim || x.dim() == 0) {
    s.x = reshape(x, Shape{-1});
  } else {
    s.x = x;
    s.dim = wrap_dim(*dim, x.dim(), op);
  }
  s.n = s.x.sizes()[s.dim];
  return s;
}
// Picks position k (int64, kept-dim shape) of each sorted slice; shaped as the meta says.
std::vector<Tensor> pick(const Tensor& sv, const Tensor& si, const Slices& s, const Tensor& k, const Shape& out) {
  return {reshape(gather(sv, s.dim, k), out), reshape(gather(si, s.dim, k), out)};
}
Shape keep_shape(const Slices& s) {
  Shape k = s.x.sizes().vec();
  k[s.dim] = 1;
  return k;
}

// The lower median: sorted position (n - 1) / 2. median: a NaN in the slice
// picks the first NaN (NaNs sort last); nanmedian: (valid - 1) / 2 of the
// non-NaN values, and position 0 (a NaN) when every value is NaN.
std::vector<Tensor> decomp_median(const OpCall& c) {
  const Tensor& x = c.in(0);
  Shape out = meta_median(c)[0].sizes;
  Slices s = slices_of(x, c.attrs.opt_i(0), c.name());
  if (s.n == 0) {
    TensorOptions o = TensorOptions(x.dtype()).device(x.device());
    return {full(out, Scalar(std::nan("")), o), zeros(out, o.dtype(kInt64))};
  }
  auto [sv, si] = sort(s.x, s.dim, /*descending=*/false, /*stable=*/true);
  Tensor k = full(keep_shape(s), Scalar((s.n - 1) / 2), TensorOptions(kInt64).device(x.device()));
  if (is_floating_point(x.dtype())) {
    Tensor nans = sum(isnan(s.x), Ints{s.dim}, /*keepdim=*/true);
    Tensor valid = sub(full_like(nans, Scalar(s.n)), nans);
    if (c.op == OpId::median)
      k = where(gt(nans, Scalar(0)), valid, k);
    else
      k = clamp_min(floor_divide(sub(valid, Scalar(1)), Scalar(2)), Scalar(0));
  }
  return pick(sv, si, s, k, out);
}
KILN_REGISTER_DECOMP(median, decomp_median);
KILN_REGISTER_DECOMP(nanmedian, decomp_median);

std::vector<Tensor> decomp_kthvalue(const OpCall& c) {
  Shape out = meta_kthvalue(c)[0].sizes;
  Slices s = slices_of(c.in(0), c.attrs.i(1), c.name());
  auto [sv, si] = sort(s.x, s.dim, /*descending=*/false, /*stable=*/true);
  Tensor k = full(keep_shape(s), Scalar(c.attrs.i(0) - 1), TensorOptions(kInt64).device(c.in(0).device()));
  return pick(sv, si, s, k, out);
}
KILN_REGISTER_DECOMP(kthvalue, decomp_kthvalue);

// In sorted order, each element's count so far within its run of equal values
// (NaNs equal each other) is its position minus the run's start (a running max
// of the starts). The first longest run is the smallest most frequent value;
// its last element carries the value's last index, as torch's CPU mode gives.
std::vector<Tensor> decomp_mode(const OpCall& c) {
  const Tensor& x = c.in(0);
  Shape out = meta_mode(c)[0].sizes;
  Slices s = slices_of(x, c.attrs.i(0), c.name());
  auto [sv, si] = sort(s.x, s.dim, /*descending=*/false, /*stable=*/true);
  Shape ps(s.x.dim(), 1);
  ps[s.dim] = s.n;
  Tensor pos = reshape(arange(s.n, TensorOptions(kInt64).device(x.device())), ps);
  Tensor prev = cat({narrow(sv, s.dim, 0, 1), narrow(sv, s.dim, 0, s.n - 1)}, s.dim);
  Tensor same = eq(sv, prev);
  if (is_floating_point(x.dtype())) same = logical_or(same, logical_and(isnan(sv), isnan(prev)));
  Tensor start = logical_or(eq(pos, Scalar(0)), logical_not(same));
  Tensor run_start = std::get<0>(cummax(where(start, pos, Scalar(0)), s.dim));
  Tensor best = argmax(sub(pos, run_start), s.dim, /*keepdim=*/true);
  return pick(sv, si, s, best, out);
}
KILN_REGISTER_DECOMP(mode, decomp_mode);

// torch's quantile: sort the slices (moved to the last dim), rank = q * (n - 1)
// (n: the non-NaN count for nanquantile; a slice with a NaN takes rank n - 1,
// the NaN, for quantile), round the rank as the interpolation says, and lerp
// between the values below and above it.
std::vector<Tensor> decomp_quantile(const OpCall& c) {
  const Tensor& x = c.in(0);
  Shape out = quantile_shape(c);
  auto dim = c.attrs.opt_i(2);
  const std::string& interp = c.attrs.str(4);
  Tensor t;
  if (!dim || x.dim() == 0) {
    t = reshape(x, Shape{-1});
  } else {
    int64_t d = wrap_dim(*dim, x.dim(), c.name());
    Ints perm;
    for (int64_t i = 0; i < x.dim(); ++i)
      if (i != d) perm.push_back(i);
    perm.push_back(d);
    t = permute(x, perm);
  }
  Tensor sorted = std::get<0>(sort(t, -1, /*descending=*/false, /*stable=*/true));
  int64_t n = sorted.sizes().back();
  const auto& qv = c.attrs.doubles(0);
  auto m = static_cast<int64_t>(qv.size());
  TensorOptions o = TensorOptions(x.dtype()).device(x.device());
  if (m == 0) return {zeros(out, o)};
  // q as a [m, 1, ..., 1] tensor made of factory ops (no host data), so it follows x to any device.
  Shape qs(sorted.dim() + 1, 1);
  std::vector<Tensor> qparts;
  for (double v : qv) qparts.push_back(full(qs, Scalar(v), o));
  Tensor q = m == 1 ? qparts[0] : cat(qparts, 0);
  Tensor ranks;
  if (c.op == OpId::nanquantile) {
    Tensor valid = sum(logical_not(isnan(sorted)), Ints{-1}, /*keepdim=*/true);
    ranks = clamp_min(mul(q, sub(valid, Scalar(1)).to(x.dtype())), Scalar(0));
  } else {
    Tensor any_nan = any(isnan(sorted), -1, /*keepdim=*/true);
    ranks = where(any_nan, Scalar(static_cast<double>(n - 1)), mul(q, Scalar(static_cast<double>(n - 1))));
  }
  if (interp == "lower")
    ranks = floor(ranks);
  else if (interp == "higher")
    ranks = ceil(ranks);
  else if (interp == "nearest")
    ranks = round(ranks);
  Shape full_shape = ranks.sizes().vec();
  full_shape.back() = n;
  Tensor sv = expand(unsqueeze(sorted, 0), full_shape);
  Tensor below = ranks.to(kInt64);
  Tensor r = gather(sv, -1, below);
  if (interp == "linear" || interp == "midpoint") {
    Tensor w = interp == "midpoint" ? full_like(ranks, Scalar(0.5)) : sub(ranks, below.to(x.dtype()));
    r = lerp(r, gather(sv, -1, ceil(ranks).to(kInt64)), w);
  }
  return {reshape(r, out)};
}
KILN_REGISTER_DECOMP(quantile, decomp_quantile);
KILN_REGISTER_DECOMP(nanquantile, decomp_quantile);

std::tuple<Tensor, Tensor> values_indices(OpId op, const Tensor& x, Attrs attrs) {
  auto r = call_op(op, {x}, std::move(attrs));
  return {r[0], r[1]};
}

// The tensor-q form reads q's values (as torch does, to check their range): a
// graph break when tracing; the scalar form does not.
Tensor quantile_of(OpId op, const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  const char* name = op_name(op);
  KILN_CHECK(q.dim() <= 1, name, "() q must be a scalar or 1D tensor, got shape ", shape_str(q.sizes()));
  KILN_CHECK(q.dtype() == x.dtype(), name, "() q tensor must be same dtype as the input tensor, got ", q.dtype(),
             " and ", x.dtype());
  return call_op1(op, {x}, {q.to_vector<double>(), q.dim() == 0, opt_attr(dim), keepdim, interpolation});
}

}  // namespace

Tensor median(const Tensor& x) { return call_op(OpId::median, {x}, {std::monostate{}, false})[0]; }
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  return values_indices(OpId::median, x, {dim, keepdim});
}
Tensor nanmedian(const Tensor& x) { return call_op(OpId::nanmedian, {x}, {std::monostate{}, false})[0]; }
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return values_indices(OpId::nanmedian, x, {dim, keepdim});
}
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  return values_indices(OpId::kthvalue, x, {k, dim, keepdim});
}
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  return values_indices(OpId::mode, x, {dim, keepdim});
}
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) {
  return call_op1(OpId::quantile, {x}, {std::vector<double>{q}, true, opt_attr(dim), keepdim, interpolation});
}
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return quantile_of(OpId::quantile, x, q, dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return call_op1(OpId::nanquantile, {x}, {std::vector<double>{q}, true, opt_attr(dim), keepdim, interpolation});
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return quantile_of(OpId::nanquantile, x, q, dim, keepdim, interpolation);
}

}  // namespace kiln
