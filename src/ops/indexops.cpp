// Data-dependent and searching index ops: unique, unique_consecutive, bincount, histc,
// searchsorted, bucketize, tril_indices/triu_indices (public functions, meta functions and
// bucketize's decomposition). Kernels are in backend/cpu/indexops.cpp. unique, its
// consecutive form and bincount are DATA_DEPENDENT (no meta function, a graph break when
// traced); the others have static shapes. Checks and messages follow torch's.
#include <algorithm>
#include <cmath>
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {
namespace {

// ---- histc ----
std::vector<TensorMeta> meta_histc(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(is_floating_point(x.dtype()), "histc: expected a floating-point input, got dtype ", x.dtype());
  int64_t bins = c.attrs.i(0);
  KILN_CHECK(bins > 0, "histc: bins must be > 0, but got ", bins);
  double lo = c.attrs.s(1).to_double(), hi = c.attrs.s(2).to_double();
  // min == max takes the input's own range: checked by the kernel once it is known.
  if (lo != hi) {
    KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), "histc: range of [", lo, ", ", hi, "] is not finite");
    KILN_CHECK(lo < hi, "histc: max must be larger than min, got min ", lo, " and max ", hi);
  }
  return one_output({bins}, x.dtype(), x.device());
}
KILN_REGISTER_META(histc, meta_histc);

// ---- searchsorted / bucketize ----
void check_searchsorted(const Tensor& seq, const Tensor& values, const Tensor& sorter, const char* op) {
  KILN_CHECK(seq.dim() > 0, op, ": boundaries tensor should have positive dimension, but got 0 dimension");
  bool matched = seq.dim() == values.dim();
  for (int64_t d = 0; matched && d + 1 < seq.dim(); ++d) matched = seq.sizes()[d] == values.sizes()[d];
  KILN_CHECK(seq.dim() == 1 || matched, op,
             ": boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input "
             "value tensor must match, but we got boundaries tensor ",
             shape_str(seq.sizes()), " and input value tensor ", shape_str(values.sizes()));
  Tensor both[] = {seq, values};
  KILN_CHECK(result_type(both) != kBool, op, ": not implemented for dtype bool");
  if (sorter.defined()) {
    KILN_CHECK(sorter.dtype() == kInt64, op, ": sorter must be a tensor of long dtype but got dtype ", sorter.dtype());
    KILN_CHECK(sorter.sizes() == seq.sizes(), op,
               ": boundary and sorter must have the same size, but got boundary "
               "tensor ",
               shape_str(seq.sizes()), " and sorter tensor ", shape_str(sorter.sizes()));
  }
}

std::vector<TensorMeta> meta_searchsorted(const OpCall& c) {
  check_searchsorted(c.in(0), c.in(1), c.in(2), c.name());
  return one_output(c.in(1).sizes().vec(), c.attrs.b(0) ? kInt32 : kInt64, c.in(1).device());
}
KILN_REGISTER_META(searchsorted, meta_searchsorted);

std::vector<TensorMeta> meta_bucketize(const OpCall& c) {
  const Tensor &x = c.in(0), &b = c.in(1);
  KILN_CHECK(b.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim(", b.dim(), ")");
  check_searchsorted(b, x, Tensor(), c.name());
  return one_output(x.sizes().vec(), c.attrs.b(0) ? kInt32 : kInt64, x.device());
}
KILN_REGISTER_META(bucketize, meta_bucketize);

std::vector<Tensor> decomp_bucketize(const OpCall& c) {
  return {call_op1(OpId::searchsorted, {c.in(1), c.in(0), Tensor()}, {c.attrs.b(0), c.attrs.b(1)})};
}
KILN_REGISTER_DECOMP(bucketize, decomp_bucketize);

// ---- tril_indices / triu_indices ----
std::vector<TensorMeta> meta_tri_indices(const OpCall& c) {
  int64_t row = c.attrs.i(0), col = c.attrs.i(1), offset = c.attrs.i(2);
  DType dt = c.attrs.dtype(3);
  KILN_CHECK(row >= 0, c.name(), ": row must be non-negative, got ", row);
  KILN_CHECK(col >= 0, c.name(), ": col must be non-negative, got ", col);
  KILN_CHECK(dt == kInt64 || dt == kInt32, c.name(), ": expected dtype int64 or int32, got ", dt);
  bool lower = c.op == OpId::tril_indices;
  // Row i has clamp(i + d, 0, col) columns below the cut: none up to row lo, then one more
  // each row up to row hi, then all of them. In closed form (a loop over rows would take
  // hours for huge ones) and in 128 bits, so that an impossible size is an error, not a wrap.
  using Wide = __int128;
  Wide d = Wide(offset) + (lower ? 1 : 0);
  Wide lo = std::clamp<Wide>(-d, 0, row), hi = std::clamp<Wide>(Wide(col) - d, 0, row);
  Wide below = (hi - lo) * (lo + hi - 1 + 2 * d) / 2 + (Wide(row) - hi) * col;
  Wide n = lower ? below : Wide(row) * col - below;
  KILN_CHECK(n <= std::numeric_limits<int64_t>::max() / 2, c.name(), ": ", row, " x ", col, " with offset ", offset,
             " has too many indices to hold in a tensor");
  return one_output({2, static_cast<int64_t>(n)}, dt, c.attrs.device(4));
}
KILN_REGISTER_META(tril_indices, meta_tri_indices);
KILN_REGISTER_META(triu_indices, meta_tri_indices);

// unique / unique_consecutive: a dim must name a dim of a tensor that has dims.
AttrValue unique_dim_attr(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  if (!dim) return std::monostate{};
  KILN_CHECK(x.dim() > 0, op, ": dimension specified as ", *dim, " but tensor has no dimensions");
  return wrap_dim(*dim, x.dim(), op);
}

std::tuple<Tensor, Tensor, Tensor> three(const std::vector<Tensor>& r) { return {r[0], r[1], r[2]}; }

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  AttrValue d = unique_dim_attr(x, dim, "unique");
  return three(call_op(OpId::unique, {x}, {sorted, return_inverse, return_counts, d}));
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse, bool return_counts,
                                                      std::optional<int64_t> dim) {
  AttrValue d = unique_dim_attr(x, dim, "unique_consecutive");
  return three(call_op(OpId::unique_consecutive, {x}, {return_inverse, return_counts, d}));
}
Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  return call_op1(OpId::bincount, {x, weights}, {minlength});
}
Tensor histc(const Tensor& x, int64_t bins, const Scalar& min, const Scalar& max) {
  return call_op1(OpId::histc, {x}, {bins, min, max});
}

namespace {
bool resolve_right(bool right, const std::optional<std::string>& side) {
  if (!side) return right;
  KILN_CHECK(*side == "left" || *side == "right", "searchsorted: side can only be 'left' or 'right' but got ", *side);
  bool is_right = *side == "right";
  KILN_CHECK(!(right && !is_right), "searchsorted: side and right can't be set to opposites, got side of ", *side,
             " while right was True");
  return is_right;
}
}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  return call_op1(OpId::searchsorted, {sorted_sequence, values, sorter}, {out_int32, resolve_right(right, side)});
}
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  KILN_CHECK(sorted_sequence.dim() == 1,
             "searchsorted: input value can be a scalar only when boundaries tensor "
             "dimension is 1, but we got boundaries tensor dim(",
             sorted_sequence.dim(), ")");
  // As torch's scalar_to_tensor: int64 for an integral scalar, the default float for a floating one.
  Tensor v = full(std::vector<int64_t>{}, value, TensorOptions().device(sorted_sequence.device()));
  return searchsorted(sorted_sequence, v, out_int32, right, side, sorter);
}
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  return call_op1(OpId::bucketize, {x, boundaries}, {out_int32, right});
}
Tensor bucketize(const Scalar& x, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketize(full(std::vector<int64_t>{}, x, TensorOptions().device(boundaries.device())), boundaries, out_int32,
                   right);
}

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, const TensorOptions& o) {
  DType dt = o.dtype_ ? *o.dtype_ : kInt64;
  return call_op1(OpId::tril_indices, {}, {row, col, offset, dt, o.device_or_default()});
}
Tensor triu_indices(int64_t row, int64_t col, int64_t offset, const TensorOptions& o) {
  DType dt = o.dtype_ ? *o.dtype_ : kInt64;
  return call_op1(OpId::triu_indices, {}, {row, col, offset, dt, o.device_or_default()});
}

}  // namespace kiln
