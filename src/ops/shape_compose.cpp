// std::vector<int64_t> and indexing functions composed of public ops (torch.movedim, tile, diff,
// diag_embed, kron, tensordot, rot90, take_along_dim, index_fill, index_copy,
// repeat_interleave, pixel_shuffle, meshgrid, block_diag, cartesian_prod, cross, unfold, ...). They are plain
// functions, not op-table entries: each is a view/reshape/gather/where composition, so autograd, tracing and the
// compiler see the ops it calls and need no rule of their own. Checks that torch makes are made here, naming the torch
// function.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/indexing.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {

// Wrapped dims, each at most once ("<op>: repeated dim in `<what>` ([0, 0])").
std::vector<int64_t> unique_dims(IntArrayRef dims, int64_t ndim, const char* op, const char* what) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    KILN_CHECK(seen.insert(w).second, op, ": repeated dim in `", what, "` (", shape_str(dims), ")");
    out.push_back(w);
  }
  return out;
}

TensorOptions like(const Tensor& x, DType t) { return TensorOptions(t).device(x.device()); }

}  // namespace

// ---- movedim / broadcast_to / tile ----
Tensor movedim(const Tensor& x, IntArrayRef source, IntArrayRef destination) {
  KILN_CHECK(source.size() == destination.size(), "movedim: Invalid source or destination dims: source (",
             shape_str(source), " dims) should contain the same number of dims as destination (",
             shape_str(destination), " dims)");
  int64_t nd = x.dim();
  std::vector<int64_t> src = unique_dims(source, nd, "movedim", "source");
  std::vector<int64_t> dst = unique_dims(destination, nd, "movedim", "destination");
  if (nd == 0) return permute(x, {});
  // The moved dims take their destinations; the others fill the free slots in order.
  std::vector<int64_t> perm(static_cast<size_t>(nd), -1);
  std::vector<bool> moved(static_cast<size_t>(nd), false);
  for (size_t k = 0; k < src.size(); ++k) {
    perm[dst[k]] = src[k];
    moved[src[k]] = true;
  }
  int64_t next = 0;
  for (auto& p : perm) {
    if (p >= 0) continue;
    while (moved[next]) ++next;
    p = next++;
  }
  return permute(x, perm);
}
Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, IntArrayRef{source}, IntArrayRef{destination});
}
Tensor moveaxis(const Tensor& x, IntArrayRef source, IntArrayRef destination) {
  return movedim(x, source, destination);
}
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination) { return movedim(x, source, destination); }

Tensor broadcast_to(const Tensor& x, SymIntArrayRef size) {
  int64_t nd = static_cast<int64_t>(size.size());
  KILN_CHECK(nd >= x.dim(), "broadcast_to: the number of sizes provided (", nd,
             ") must be greater or equal to the number of dimensions in the tensor (", x.dim(), ") of shape ",
             shape_str(x.sizes()));
  for (int64_t i = 0; i < x.dim(); ++i) {
    SymInt want = size[static_cast<size_t>(nd - x.dim() + i)];
    int64_t have = x.sizes()[i];
    if (want.is_symbolic() || have == 1 || want.raw() == -1) continue;
    KILN_CHECK(want.raw() == have, "broadcast_to: the expanded size of the tensor (", want.raw(),
               ") must match the existing size (", have, ") at non-singleton dimension ", i,
               ". Tensor sizes: ", shape_str(x.sizes()));
  }
  return expand(x, size);
}

Tensor tile(const Tensor& x, IntArrayRef reps) {
  for (int64_t r : reps) KILN_CHECK(r >= 0, "tile: repeats can not be negative, got ", shape_str(reps));
  std::vector<int64_t> r(reps.begin(), reps.end());
  if (static_cast<int64_t>(r.size()) < x.dim()) r.insert(r.begin(), static_cast<size_t>(x.dim()) - r.size(), 1);
  return repeat(x, r);
}

// ---- diff / trace / diag / diag_embed ----
Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  KILN_CHECK(x.dim() >= 1, "diff: expects input to be at least one-dimensional, got shape ", shape_str(x.sizes()));
  KILN_CHECK(n >= 0, "diff: order must be non-negative but got ", n);
  int64_t d = wrap_dim(dim, x.dim(), "diff");
  std::vector<Tensor> parts;
  for (const Tensor* t : {&prepend, &x, &append}) {
    if (!t->defined()) continue;
    if (t != &x) {
      const char* which = t == &prepend ? "prepend" : "append";
      KILN_CHECK(t->dim() == x.dim(), "diff: expects ", which, " to have the same number of dimensions as input, got ",
                 which, " of shape ", shape_str(t->sizes()), " and input of shape ", shape_str(x.sizes()));
      for (int64_t i = 0; i < x.dim(); ++i)
        KILN_CHECK(i == d || t->sizes()[i] == x.sizes()[i], "diff: expects the shape of ", which,
                   " to match that of input except along the differencing dimension ", d, ", got ", which, " of shape ",
                   shape_str(t->sizes()), " and input of shape ", shape_str(x.sizes()));
    }
    parts.push_back(*t);
  }
  Tensor r = parts.size() == 1 ? x : cat(parts, d);
  // Bool differences are "changed or not", as torch (sub is not defined for bool).
  for (int64_t k = 0; k < n && r.sizes()[d] > 0; ++k) {
    int64_t len = r.sizes()[d];
    Tensor hi = narrow(r, d, 1, len - 1), lo = narrow(r, d, 0, len - 1);
    r = r.dtype() == kBool ? logical_xor(hi, lo) : sub(hi, lo);
  }
  return r;
}

Tensor trace(const Tensor& x) {
  KILN_CHECK(x.dim() == 2, "trace: expected a matrix, but got tensor with shape ", shape_str(x.sizes()));
  return sum(diagonal(x));
}

Tensor diag(const Tensor& x, int64_t diagonal_) {
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, "diag: expected a 1-D (vector) or 2-D (matrix) tensor, got shape ",
             shape_str(x.sizes()));
  if (x.dim() == 1) return diag_embed(x, diagonal_, 0, 1);
  return clone(diagonal(x, diagonal_));
}

// R[..., i, j] = x[..., i] (offset >= 0) or x[..., j] (offset < 0) where j - i == offset,
// else 0: x padded to the matrix size m, broadcast along rows or columns, masked.
Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t nd = x.dim() + 1;
  int64_t d1 = wrap_dim(dim1, nd, "diag_embed"), d2 = wrap_dim(dim2, nd, "diag_embed");
  KILN_CHECK(d1 != d2, "diag_embed: diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  int64_t k = std::abs(offset), m = x.sizes()[x.dim() - 1] + k;
  Tensor xp = x;
  if (k > 0) {
    std::vector<int64_t> zs(x.sizes().begin(), x.sizes().end());
    zs.back() = k;
    xp = cat({x, zeros(zs, like(x, x.dtype()))}, -1);
  }
  Tensor i = unsqueeze(arange(m, like(x, kInt64)), 1), j = arange(m, like(x, kInt64));
  Tensor on = eq(sub(j, i), Scalar(offset));
  Tensor vals = offset >= 0 ? unsqueeze(xp, -1) : unsqueeze(xp, -2);
  Tensor r = where(on, vals, zeros({}, like(x, x.dtype())));
  return movedim(r, IntArrayRef{nd - 2, nd - 1}, IntArrayRef{d1, d2});
}

// ---- rot90 ----
Tensor rot90(const Tensor& x, int64_t k, IntArrayRef dims) {
  KILN_CHECK(dims.size() == 2, "rot90: expected total rotation dims == 2, but got dims = ", dims.size());
  KILN_CHECK(x.dim() >= 2, "rot90: expected total dims >= 2, but got total dims = ", x.dim(), " (shape ",
             shape_str(x.sizes()), ")");
  int64_t d0 = wrap_dim(dims[0], x.dim(), "rot90"), d1 = wrap_dim(dims[1], x.dim(), "rot90");
  KILN_CHECK(d0 != d1, "rot90: expected rotation dims to be different, but got dim0 = ", dims[0],
             " and dim1 = ", dims[1]);
  switch (((k % 4) + 4) % 4) {
    case 1:
      return transpose(flip(x, {d1}), d0, d1);
    case 2:
      return flip(x, {d0, d1});
    case 3:
      return transpose(flip(x, {d0}), d0, d1);
    default:
      return clone(x);
  }
}

// ---- take_along_dim / index_fill / index_copy ----
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  KILN_CHECK(indices.dtype() == kInt64, "take_along_dim: dtype of indices should be int64 but got ", indices.dtype());
  if (!dim) return gather(reshape(x, {-1}), 0, reshape(indices, {-1}));
  KILN_CHECK(x.dim() > 0, "take_along_dim: dimension specified as ", *dim, " but tensor has no dimensions");
  KILN_CHECK(x.dim() == indices.dim(), "take_along_dim: input and indices should have the same number of ",
             "dimensions, but got ", x.dim(), " dimensions for input (shape ", shape_str(x.sizes()), "), and ",
             indices.dim(), " dimensions for indices (shape ", shape_str(indices.sizes()), ")");
  int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  // Every dim but `d` broadcasts between input and indices (torch's rule).
  std::vector<int64_t> xs(x.sizes().begin(), x.sizes().end()), is(indices.sizes().begin(), indices.sizes().end());
  xs[d] = indices.sizes()[d];
  is[d] = x.sizes()[d];
  Tensor ib = expand(indices, broadcast_shapes(xs, indices.sizes(), "take_along_dim"));
  Tensor xb = expand(x, broadcast_shapes(is, x.sizes(), "take_along_dim"));
  check_index_range(ib, x.sizes()[d], d, "take_along_dim");
  return gather(xb, d, ib);
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "index_fill: only supports a 0-dimensional value tensor, but got tensor of shape ",
             shape_str(value.sizes()));
  KILN_CHECK(index.dtype() == kInt64, "index_fill: expected an int64 index, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, "index_fill: index has to be a vector or a scalar, got shape ",
             shape_str(index.sizes()));
  int64_t d = wrap_dim(dim, x.dim(), "index_fill");
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[d];
  // torch's index_fill takes indices in [-n, n); the comparison below would skip another
  // index, so it is checked while compiling too (Note [Value checks]).
  for (int64_t v : checked_index_values(index))
    KILN_CHECK(v >= -n && v < n, "index_fill: index ", v, " is out of bounds for dimension ", d, " with size ", n);
  Tensor idx = reshape(index, {-1, 1});
  idx = where(lt(idx, Scalar(int64_t{0})), add(idx, Scalar(n)), idx);
  Tensor hit = any(eq(idx, unsqueeze(arange(n, like(x, kInt64)), 0)), 0);  // [n]: position is indexed
  if (x.dim() == 0) {
    hit = reshape(hit, {});
  } else {
    std::vector<int64_t> s(static_cast<size_t>(x.dim()), 1);
    s[d] = n;
    hit = reshape(hit, s);
  }
  return where(hit, value.to(x.dtype()), x);
}
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return index_fill(x, dim, index, scalar_tensor(value, like(x, x.dtype())));
}

// out = x with out[..., index[i], ...] = source[..., i, ...] along dim: a scatter with the
// index broadcast over source's other dims (scatter's VJP gives both gradients).
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  KILN_CHECK(index.dtype() == kInt64, "index_copy: expected an int64 index, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, "index_copy: index should have dimension 1 or 0, got shape ", shape_str(index.sizes()));
  KILN_CHECK(x.dtype() == source.dtype(), "index_copy: self and source expected to have the same dtype, but got ",
             "(self) ", x.dtype(), " and (source) ", source.dtype());
  int64_t d = wrap_dim(dim, x.dim(), "index_copy");
  int64_t k = index.numel();
  if (x.dim() == 0 || source.dim() == 0) {
    KILN_CHECK(x.dim() == 0 && source.dim() == 0 && k == 1, "index_copy: when source and destination are not ",
               "scalars, their dimensionality must match, got source of shape ", shape_str(source.sizes()),
               " and destination of shape ", shape_str(x.sizes()));
    check_index_range(index, 1, 0, "index_copy");
    return clone(source);
  }
  KILN_CHECK(source.dim() == x.dim(), "index_copy: when source and destination are not scalars, their ",
             "dimensionality must match, got source of shape ", shape_str(source.sizes()), " and destination of shape ",
             shape_str(x.sizes()));
  KILN_CHECK(source.sizes()[d] == k, "index_copy: number of indices (", k, ") should be equal to source.size(", d,
             ") (", source.sizes()[d], ")");
  for (int64_t i = 0; i < x.dim(); ++i)
    KILN_CHECK(i == d || source.sizes()[i] == x.sizes()[i], "index_copy: source/destination tensors must have ",
               "the same slice shapes, got source of shape ", shape_str(source.sizes()), " and destination of shape ",
               shape_str(x.sizes()), " (dim ", d, ")");
  check_index_range(index, x.sizes()[d], d, "index_copy");
  std::vector<int64_t> s(static_cast<size_t>(x.dim()), 1);
  s[d] = k;
  return scatter(x, d, expand(reshape(index, s), source.sizes()), source);
}

// ---- repeat_interleave ----
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats >= 0, "repeat_interleave: repeats can not be negative, got ", repeats);
  KILN_CHECK(!dim || x.dim() > 0, "repeat_interleave: dimension specified as ", dim.value_or(0),
             " but tensor has no dimensions");
  Tensor src = dim ? x : flatten(x);
  int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  Tensor u = unsqueeze(src, d + 1);
  std::vector<int64_t> s(u.sizes().begin(), u.sizes().end());
  s[d + 1] = repeats;
  return flatten(expand(u, s), d, d + 1);
}

// Note [Repeat counts are read]: the output size is the sum of the counts, so they are
// read on the host (torch's repeat_interleave syncs too). While compiling, counts computed
// in the graph are a value read, a graph break, as for nonzero and masked_select
// (DATA_DEPENDENT in ops.def); an input's counts are read directly, the function being
// re-run every call.
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32,
             "repeat_interleave: repeats has to be an int64 or int32 tensor, got ", repeats.dtype());
  KILN_CHECK(repeats.dim() <= 1, "repeat_interleave: repeats must be a 0-dim or 1-dim tensor, got shape ",
             shape_str(repeats.sizes()));
  KILN_CHECK(!dim || x.dim() > 0, "repeat_interleave: dimension specified as ", dim.value_or(0),
             " but tensor has no dimensions");
  Tensor src = dim ? x : flatten(x);
  int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  int64_t n = src.sizes()[d];
  std::vector<int64_t> reps = repeats.to(kInt64).to_vector<int64_t>();
  if (reps.size() == 1) reps.assign(static_cast<size_t>(n), reps[0]);  // one count for every entry
  KILN_CHECK(static_cast<int64_t>(reps.size()) == n, "repeat_interleave: repeats must have the same size as input ",
             "along dim, but got repeats.size(0) = ", repeats.numel(), " and input.size(", d, ") = ", n);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(reps[i] >= 0, "repeat_interleave: repeats can not be negative, got ", reps[i], " at position ", i);
    idx.insert(idx.end(), static_cast<size_t>(reps[i]), i);
  }
  return index_select(src, d, tensor<int64_t>(idx, like(x, kInt64)));
}

Tensor repeat_interleave(const Tensor& repeats) {
  KILN_CHECK(repeats.dim() == 1, "repeat_interleave: only accepts a 1-D vector as repeats, got shape ",
             shape_str(repeats.sizes()));
  return repeat_interleave(arange(repeats.numel(), like(repeats, repeats.dtype())), repeats, 0);
}

// ---- meshgrid ----
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  KILN_CHECK(!tensors.empty(), "meshgrid: expects a non-empty list of tensors");
  KILN_CHECK(indexing == "ij" || indexing == "xy",
             "meshgrid: indexing must be one of \"xy\" or \"ij\", but received: ", indexing);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.defined(), "meshgrid: tensor at position ", i, " is undefined");
    KILN_CHECK(t.dim() <= 1, "meshgrid: expected 0-D or 1-D tensors, but tensor ", i, " has shape ",
               shape_str(t.sizes()));
    KILN_CHECK(t.dtype() == tensors[0].dtype(),
               "meshgrid: expects all tensors to have the same dtype, but tensor 0 is ", tensors[0].dtype(),
               " and tensor ", i, " is ", t.dtype());
    KILN_CHECK(t.device() == tensors[0].device(),
               "meshgrid: expects all tensors to be on the same device, but tensor 0 ", "is on ", tensors[0].device(),
               " and tensor ", i, " on ", t.device());
  }
  // "xy" is "ij" with the first two inputs (and outputs) swapped: x varies along dim 1.
  std::vector<Tensor> ts = tensors;
  bool swap = indexing == "xy" && ts.size() >= 2;
  if (swap) std::swap(ts[0], ts[1]);
  std::vector<int64_t> full_shape;
  for (const Tensor& t : ts) full_shape.push_back(t.numel());
  std::vector<Tensor> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    std::vector<int64_t> s(ts.size(), 1);
    s[i] = full_shape[i];
    out.push_back(expand(reshape(ts[i], s), full_shape));
  }
  if (swap) std::swap(out[0], out[1]);
  return out;
}

// block_diag: each input as a 2-D block ([] -> [1, 1], [n] -> [1, n]) padded with zeros to the
// full width, the rows joined; the inputs promote to one dtype (torch's result_type).
Tensor block_diag(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return zeros({1, 0});
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "block_diag: input ", i, " is undefined");
    KILN_CHECK(tensors[i].dim() <= 2, "block_diag: Input tensors must have 2 or fewer dimensions. Input ", i, " has ",
               tensors[i].dim(), " dimensions");
    KILN_CHECK(tensors[i].device() == tensors[0].device(), "block_diag: input ", i, " is on ", tensors[i].device(),
               " but input 0 is on ", tensors[0].device());
  }
  DType dt = result_type(tensors);
  std::vector<Tensor> blocks;
  int64_t width = 0;
  for (const Tensor& t : tensors) {
    Tensor b = t.dim() == 2 ? t : reshape(t, {1, t.numel()});
    blocks.push_back(b.to(dt));
    width += b.sizes()[1];
  }
  std::vector<Tensor> rows;
  int64_t left = 0;
  for (const Tensor& b : blocks) {
    int64_t r = b.sizes()[0], w = b.sizes()[1];
    rows.push_back(cat({zeros({r, left}, like(b, dt)), b, zeros({r, width - left - w}, like(b, dt))}, 1));
    left += w;
  }
  return cat(rows, 0);
}

// cartesian_prod: the meshgrid of the inputs, each flattened, as the columns.
Tensor cartesian_prod(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), "cartesian_prod: expects a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    KILN_CHECK(tensors[i].defined() && tensors[i].dim() == 1, "cartesian_prod: expect a 1D vector, but got shape ",
               tensors[i].defined() ? shape_str(tensors[i].sizes()) : std::string("(undefined)"), " for input ", i);
  if (tensors.size() == 1) return tensors[0];
  std::vector<Tensor> cols;
  for (const Tensor& g : meshgrid(tensors, "ij")) cols.push_back(flatten(g));
  return stack(cols, 1);
}

// unfold: as torch, an as_strided view of the input's storage: dimension d of size n becomes
// (n - size) / step + 1 windows `step` apart, the window's elements a new last dim.
Tensor Tensor::unfold(int64_t dimension, int64_t size, int64_t step) const {
  const Tensor& x = *this;
  int64_t d = wrap_dim(dimension, x.dim(), "unfold");
  int64_t max_size = x.dim() == 0 ? 1 : x.sizes()[d];
  KILN_CHECK(size <= max_size, "unfold: maximum size for tensor at dimension ", d, " is ", max_size, " but size is ",
             size);
  KILN_CHECK(size >= 0, "unfold: size is ", size, " but must be >= 0");
  KILN_CHECK(step > 0, "unfold: step is ", step, " but must be > 0");
  std::vector<int64_t> sizes{size}, strides{1};
  if (x.dim() > 0) {
    sizes = x.sizes().vec();
    strides = x.strides().vec();
    int64_t st = strides[d];
    sizes[d] = (sizes[d] - size) / step + 1;
    strides[d] = st * step;
    sizes.push_back(size);
    strides.push_back(st);
  }
  return x.as_strided(sizes, strides, x.storage_offset());
}

// ---- linear algebra compositions ----
// kron: a [.., ai, ..] and b [.., bi, ..] (leading 1s to the same rank) interleaved as
// [.., ai, bi, ..] by broadcasting, then merged to [.., ai * bi, ..].
Tensor kron(const Tensor& a, const Tensor& b) {
  int64_t nd = std::max(a.dim(), b.dim());
  std::vector<int64_t> as(static_cast<size_t>(nd - a.dim()), 1), bs(static_cast<size_t>(nd - b.dim()), 1);
  as.insert(as.end(), a.sizes().begin(), a.sizes().end());
  bs.insert(bs.end(), b.sizes().begin(), b.sizes().end());
  std::vector<int64_t> ai, bi, out;
  for (int64_t k = 0; k < nd; ++k) {
    ai.insert(ai.end(), {as[k], 1});
    bi.insert(bi.end(), {1, bs[k]});
    out.push_back(as[k] * bs[k]);
  }
  return reshape(mul(reshape(a, ai), reshape(b, bi)), out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, IntArrayRef dims_a, IntArrayRef dims_b) {
  KILN_CHECK(dims_a.size() == dims_b.size(), "tensordot: both dimension lists should have same length, got ",
             shape_str(dims_a), " and ", shape_str(dims_b));
  KILN_CHECK(a.dtype() == b.dtype(), "tensordot: expected both inputs to have the same dtype, got ", a.dtype(), " and ",
             b.dtype());
  std::vector<int64_t> da = unique_dims(dims_a, a.dim(), "tensordot", "dims_a");
  std::vector<int64_t> db = unique_dims(dims_b, b.dim(), "tensordot", "dims_b");
  int64_t k = 1;
  for (size_t i = 0; i < da.size(); ++i) {
    KILN_CHECK(a.sizes()[da[i]] == b.sizes()[db[i]], "tensordot: contracted dimensions need to match, but first has ",
               "size ", a.sizes()[da[i]], " in dim ", dims_a[i], " and second has size ", b.sizes()[db[i]], " in dim ",
               dims_b[i], " (shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
    k *= a.sizes()[da[i]];
  }
  // a -> [free_a..., contracted...] as [M, K]; b -> [contracted..., free_b...] as [K, N]; one matmul.
  std::vector<int64_t> pa, pb = db;
  std::vector<int64_t> out;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (std::find(da.begin(), da.end(), d) == da.end()) {
      pa.push_back(d);
      out.push_back(a.sizes()[d]);
      m *= a.sizes()[d];
    }
  for (int64_t d = 0; d < b.dim(); ++d)
    if (std::find(db.begin(), db.end(), d) == db.end()) {
      pb.push_back(d);
      out.push_back(b.sizes()[d]);
      n *= b.sizes()[d];
    }
  pa.insert(pa.end(), da.begin(), da.end());
  Tensor am = reshape(permute(a, pa), {m, k}), bm = reshape(permute(b, pb), {k, n});
  // Integer matrices have no GEMM: their product is a broadcast multiply and a sum (in the
  // inputs' dtype, as torch's integer matmul).
  Tensor r =
      is_floating_point(a.dtype()) ? mm(am, bm) : sum(mul(unsqueeze(am, 2), unsqueeze(bm, 0)), {1}, false, a.dtype());
  return reshape(r, out);
}
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  KILN_CHECK(dims >= 0, "tensordot: expects dims >= 0, but got dims=", dims);
  KILN_CHECK(dims <= a.dim() && dims <= b.dim(), "tensordot: dims=", dims,
             " is more than the number of dimensions of an input (shapes ", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()), ")");
  std::vector<int64_t> da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

namespace {
// (a x b)_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1} (indices mod 3): rolls along dim.
Tensor cross_along(const Tensor& a, const Tensor& b, int64_t dim, const char* op) {
  KILN_CHECK(a.dim() == b.dim(), op, ": inputs must have the same number of dimensions, got shapes ",
             shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  KILN_CHECK(a.dtype() == b.dtype(), op, ": expected both inputs to have the same dtype, got ", a.dtype(), " and ",
             b.dtype());
  KILN_CHECK(a.dim() > 0, op, ": inputs must have at least one dimension, got 0-d tensors");
  int64_t d = wrap_dim(dim, a.dim(), op);
  KILN_CHECK(a.sizes()[d] == 3 && b.sizes()[d] == 3, op, ": inputs dimension ", dim, " must have length 3. Got ",
             a.sizes()[d], " and ", b.sizes()[d], " (shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
             ")");
  broadcast_shapes(a.sizes(), b.sizes(), op);
  return sub(mul(roll(a, {-1}, {d}), roll(b, {-2}, {d})), mul(roll(a, {-2}, {d}), roll(b, {-1}, {d})));
}
}  // namespace

Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim) { return cross_along(a, b, dim, "linalg.cross"); }
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  if (dim) return cross_along(a, b, *dim, "cross");
  // torch's deprecated default: the first dim of size 3.
  auto s = a.sizes();
  auto it = std::find(s.begin(), s.end(), 3);
  KILN_CHECK(it != s.end(), "cross: no dimension of size 3 in input of shape ", shape_str(a.sizes()));
  return cross_along(a, b, it - s.begin(), "cross");
}

// ---- pixel_shuffle / pixel_unshuffle ----
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  int64_t r = upscale_factor;
  KILN_CHECK(x.dim() >= 3, "pixel_shuffle: expects input to have at least 3 dimensions, but got input of shape ",
             shape_str(x.sizes()));
  KILN_CHECK(r > 0, "pixel_shuffle: expects a positive upscale_factor, but got ", r);
  int64_t nb = x.dim() - 3, c = x.sizes()[nb], h = x.sizes()[nb + 1], w = x.sizes()[nb + 2];
  KILN_CHECK(c % (r * r) == 0, "pixel_shuffle: expects its input's 'channel' dimension to be divisible by the ",
             "square of upscale_factor, but input.size(-3)=", c, " is not divisible by ", r * r, " (input shape ",
             shape_str(x.sizes()), ")");
  // [*, c, r, r, h, w] -> [*, c, h, r, w, r]
  std::vector<int64_t> batch(x.sizes().begin(), x.sizes().begin() + nb), s = batch, out = batch;
  s.insert(s.end(), {c / (r * r), r, r, h, w});
  out.insert(out.end(), {c / (r * r), h * r, w * r});
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  perm.insert(perm.end(), {nb, nb + 3, nb + 1, nb + 4, nb + 2});
  return reshape(permute(reshape(x, s), perm), out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  int64_t r = downscale_factor;
  KILN_CHECK(x.dim() >= 3, "pixel_unshuffle: expects input to have at least 3 dimensions, but got input of shape ",
             shape_str(x.sizes()));
  KILN_CHECK(r > 0, "pixel_unshuffle: expects a positive downscale_factor, but got ", r);
  int64_t nb = x.dim() - 3, c = x.sizes()[nb], h = x.sizes()[nb + 1], w = x.sizes()[nb + 2];
  KILN_CHECK(h % r == 0, "pixel_unshuffle: expects height to be divisible by downscale_factor, but input.size(-2)=", h,
             " is not divisible by ", r, " (input shape ", shape_str(x.sizes()), ")");
  KILN_CHECK(w % r == 0, "pixel_unshuffle: expects width to be divisible by downscale_factor, but input.size(-1)=", w,
             " is not divisible by ", r, " (input shape ", shape_str(x.sizes()), ")");
  // [*, c, h/r, r, w/r, r] -> [*, c, r, r, h/r, w/r]
  std::vector<int64_t> batch(x.sizes().begin(), x.sizes().begin() + nb), s = batch, out = batch;
  s.insert(s.end(), {c, h / r, r, w / r, r});
  out.insert(out.end(), {c * r * r, h / r, w / r});
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  perm.insert(perm.end(), {nb, nb + 2, nb + 4, nb + 1, nb + 3});
  return reshape(permute(reshape(x, s), perm), out);
}

// ---- Tensor methods ----
Tensor Tensor::movedim(IntArrayRef source, IntArrayRef destination) const {
  return kiln::movedim(*this, source, destination);
}
Tensor Tensor::movedim(int64_t source, int64_t destination) const { return kiln::movedim(*this, source, destination); }
Tensor Tensor::moveaxis(IntArrayRef source, IntArrayRef destination) const {
  return kiln::movedim(*this, source, destination);
}
Tensor Tensor::moveaxis(int64_t source, int64_t destination) const { return kiln::movedim(*this, source, destination); }
Tensor Tensor::broadcast_to(SymIntArrayRef size) const { return kiln::broadcast_to(*this, size); }
Tensor Tensor::tile(IntArrayRef reps) const { return kiln::tile(*this, reps); }
Tensor Tensor::diff(int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) const {
  return kiln::diff(*this, n, dim, prepend, append);
}
Tensor Tensor::trace() const { return kiln::trace(*this); }
Tensor Tensor::diag(int64_t diagonal) const { return kiln::diag(*this, diagonal); }
Tensor Tensor::diag_embed(int64_t offset, int64_t dim1, int64_t dim2) const {
  return kiln::diag_embed(*this, offset, dim1, dim2);
}
Tensor Tensor::kron(const Tensor& other) const { return kiln::kron(*this, other); }
Tensor Tensor::rot90(int64_t k, IntArrayRef dims) const { return kiln::rot90(*this, k, dims); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return kiln::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim) const {
  return kiln::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::cross(const Tensor& other, std::optional<int64_t> dim) const { return kiln::cross(*this, other, dim); }
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, const Scalar& value) const {
  return kiln::index_fill(*this, dim, index, value);
}
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, const Tensor& value) const {
  return kiln::index_fill(*this, dim, index, value);
}
Tensor Tensor::index_copy(int64_t dim, const Tensor& index, const Tensor& source) const {
  return kiln::index_copy(*this, dim, index, source);
}
// index_fill and index_copy are compositions (no op of their own): self takes their result
// through copy_, whose autograd carries the gradient (a leaf that requires grad is refused).
Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, const Scalar& value) {
  return copy_(kiln::index_fill(*this, dim, index, value));
}
Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, const Tensor& value) {
  return copy_(kiln::index_fill(*this, dim, index, value));
}
Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& source) {
  return copy_(kiln::index_copy(*this, dim, index, source));
}
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> dim) const {
  return kiln::take_along_dim(*this, indices, dim);
}

}  // namespace kiln
