// View ops: outputs alias input 0's storage (Note [Views]). Meta functions
// compute the alias's sizes, strides and offset; the dispatcher makes it.
#include <algorithm>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {

// Note [Views]
// A view shares storage and the version counter with its base; writes
// through either are seen by both. Composite views (transpose, narrow, ...)
// decompose into the prim views, so autograd only sees prims; their meta
// functions are those prims' metas (Note [Composite views]).

namespace {
TensorMeta view_meta(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = offset;
  m.dtype = x.dtype();
  m.device = x.device();
  return m;
}

// Resolves one -1 in `size` against numel.
Shape infer_size(IntArrayRef size, int64_t numel, const char* op, IntArrayRef from) {
  Shape out = size.vec();
  int64_t known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer < 0, op, ": only one dimension can be inferred, got ", shape_str(size));
      infer = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(out[i] >= 0, op, ": invalid shape dimension ", out[i], " in ", shape_str(size));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(size), " is invalid for input of size ",
               numel, " (shape ", shape_str(from), ")");
    out[infer] = numel / known;
  } else {
    KILN_CHECK(known == numel, op, ": shape ", shape_str(size), " is invalid for input of size ", numel, " (shape ",
               shape_str(from), ")");
  }
  return out;
}

// Strides for viewing (sizes, strides) as new_sizes without copying, or
// nullopt when a new dim would span non-uniformly strided memory.
std::optional<Shape> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes) {
  Shape ns(new_sizes.size());
  int64_t numel = compute_numel(sizes);
  if (numel == 0 || sizes.empty()) return contiguous_strides(new_sizes);  // 0-d: every new dim is 1
  // Walk old dims in chunks of memory-contiguous runs, matching new dims to each chunk.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return ns;
}

std::vector<TensorMeta> meta_view(const OpCall& c) {
  const Tensor& x = c.in(0);
  Shape size = infer_size(c.attrs.ints(0), x.numel(), "view", x.sizes());
  auto st = view_strides(x.sizes(), x.strides(), size);
  KILN_CHECK(st, "view: view size ", shape_str(size), " is not compatible with input tensor's size ",
             shape_str(x.sizes()), " and stride ", shape_str(x.strides()),
             " (at least one dimension spans across two contiguous subspaces); use reshape() instead");
  return {view_meta(x, size, *st, x.storage_offset())};
}

std::vector<TensorMeta> meta_permute(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& dims = c.attrs.ints(0);
  int64_t nd = x.dim();
  KILN_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute: number of dims in the permutation (",
             dims.size(), ") doesn't match the tensor's ", nd, " dims (shape ", shape_str(x.sizes()), ")");
  Shape sizes(nd), strides(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[i], nd, "permute");
    KILN_CHECK(!seen[d], "permute: repeated dim ", d, " in ", shape_str(dims));
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
  }
  return {view_meta(x, sizes, strides, x.storage_offset())};
}

std::vector<TensorMeta> meta_expand(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& size = c.attrs.ints(0);
  int64_t nd = static_cast<int64_t>(size.size());
  KILN_CHECK(nd >= x.dim(), "expand: the number of sizes provided (", nd,
             ") must be greater or equal to the number of dimensions in the tensor (", x.dim(), ")");
  Shape sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t xi = i - (nd - x.dim());
    int64_t want = size[i];
    if (xi >= 0) {
      int64_t have = x.sizes()[xi];
      if (want == -1) want = have;
      KILN_CHECK(have == want || have == 1, "expand: the expanded size of the tensor (", want,
                 ") must match the existing size (", have, ") at non-singleton dimension ", i, "; target sizes ",
                 shape_str(size), ", tensor sizes ", shape_str(x.sizes()));
      sizes[i] = want;
      strides[i] = have == want ? x.strides()[xi] : 0;
    } else {
      KILN_CHECK(want >= 0, "expand: the expanded size ", want, " is not allowed in a leading, non-existing dimension ",
                 i);
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  return {view_meta(x, sizes, strides, x.storage_offset())};
}

std::vector<TensorMeta> meta_squeeze(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& dims = c.attrs.ints(0);
  std::vector<bool> drop(x.dim(), false);
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) drop[i] = x.sizes()[i] == 1;
  } else {
    for (int64_t d : dims) {
      int64_t w = wrap_dim(d, x.dim(), "squeeze");
      if (x.dim() > 0) drop[w] = x.sizes()[w] == 1;
    }
  }
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!drop[i]) {
      sizes.push_back(x.sizes()[i]);
      strides.push_back(x.strides()[i]);
    }
  return {view_meta(x, sizes, strides, x.storage_offset())};
}

std::vector<TensorMeta> meta_unsqueeze(const OpCall& c) {
  const Tensor& x = c.in(0);
  int64_t d = wrap_dim(c.attrs.i(0), x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  int64_t st = d < x.dim() ? x.strides()[d] * x.sizes()[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return {view_meta(x, sizes, strides, x.storage_offset())};
}

std::vector<TensorMeta> meta_select(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() > 0, "select: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "select");
  int64_t size = x.sizes()[d];
  int64_t idx = c.attrs.i(1);
  KILN_CHECK(idx >= -size && idx < size, "select: index ", idx, " out of range for tensor of size ",
             shape_str(x.sizes()), " at dimension ", d);
  if (idx < 0) idx += size;
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  int64_t offset = x.storage_offset() + idx * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return {view_meta(x, sizes, strides, offset)};
}

std::vector<TensorMeta> meta_slice(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "slice");
  int64_t size = x.sizes()[d];
  int64_t start = c.attrs.i(1), end = c.attrs.i(2), step = c.attrs.i(3);
  KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
  // Python slice semantics: negative indices count from the end, then clamp.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  int64_t offset = x.storage_offset() + start * strides[d];
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  return {view_meta(x, sizes, strides, offset)};
}

std::vector<TensorMeta> meta_diagonal(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() >= 2, "diagonal: expected a tensor with at least 2 dims, got shape ", shape_str(x.sizes()));
  int64_t off = c.attrs.i(0);
  int64_t d1 = wrap_dim(c.attrs.i(1), x.dim(), "diagonal"), d2 = wrap_dim(c.attrs.i(2), x.dim(), "diagonal");
  KILN_CHECK(d1 != d2, "diagonal: dimensions cannot be identical (", d1, ", ", d2, ")");
  int64_t n1 = x.sizes()[d1], n2 = x.sizes()[d2];
  int64_t len = off >= 0 ? std::max<int64_t>(std::min(n1, n2 - off), 0) : std::max<int64_t>(std::min(n1 + off, n2), 0);
  int64_t offset = x.storage_offset();
  if (len > 0) offset += off >= 0 ? off * x.strides()[d2] : -off * x.strides()[d1];
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d1 && i != d2) {
      sizes.push_back(x.sizes()[i]);
      strides.push_back(x.strides()[i]);
    }
  sizes.push_back(len);
  strides.push_back(x.strides()[d1] + x.strides()[d2]);
  return {view_meta(x, sizes, strides, offset)};
}

std::vector<TensorMeta> meta_as_strided(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& size = c.attrs.ints(0);
  const auto& stride = c.attrs.ints(1);
  KILN_CHECK(size.size() == stride.size(), "as_strided: mismatch in length of strides (", stride.size(),
             ") and shape (", size.size(), ")");
  int64_t offset = c.attrs.none(2) ? x.storage_offset() : c.attrs.i(2);
  KILN_CHECK(offset >= 0, "as_strided: negative storage offset ", offset);
  int64_t extent = offset + 1;
  bool empty = false;
  for (size_t i = 0; i < size.size(); ++i) {
    KILN_CHECK(size[i] >= 0 && stride[i] >= 0, "as_strided: negative size or stride in ", shape_str(size), " / ",
               shape_str(stride));
    if (size[i] == 0) empty = true;
    extent += (size[i] - 1) * stride[i];
  }
  if (x.has_storage() && !empty) {
    int64_t cap = static_cast<int64_t>(x.unsafe_impl()->storage->nbytes / x.element_size());
    KILN_CHECK(extent <= cap, "as_strided: setting a storage of ", cap, " elements out of bounds with size ",
               shape_str(size), ", stride ", shape_str(stride), ", offset ", offset);
  }
  return {view_meta(x, size, stride, offset)};
}

KILN_REGISTER_META(view, meta_view);
KILN_REGISTER_META(permute, meta_permute);
KILN_REGISTER_META(expand, meta_expand);
KILN_REGISTER_META(squeeze, meta_squeeze);
KILN_REGISTER_META(unsqueeze, meta_unsqueeze);
KILN_REGISTER_META(select, meta_select);
KILN_REGISTER_META(slice, meta_slice);
KILN_REGISTER_META(diagonal, meta_diagonal);
KILN_REGISTER_META(as_strided, meta_as_strided);

// ---- composite views ----
// Note [Composite views]
// A composite view is written once, as the prim views of input 0 its
// decomposition calls (`*_steps`). Its meta function runs those prims' metas,
// so eager without autograd (which makes views straight from the meta, see
// backend_call) and the decomposition (which autograd differentiates through)
// give the same sizes, strides and offset, and the same errors.
struct PrimView {
  OpId op;
  Attrs attrs;
};
using ViewSteps = std::vector<PrimView>;

template <ViewSteps (*Steps)(const OpCall&)>
std::vector<TensorMeta> meta_composite_view(const OpCall& c) {
  std::vector<TensorMeta> out;
  for (const PrimView& s : Steps(c)) {
    OpCall prim{s.op, c.inputs.first(1), s.attrs};
    out.push_back(op_info(s.op).meta(prim)[0]);
  }
  return out;
}
template <ViewSteps (*Steps)(const OpCall&)>
std::vector<Tensor> decomp_composite_view(const OpCall& c) {
  std::vector<Tensor> out;
  for (PrimView& s : Steps(c)) out.push_back(call_op1(s.op, {c.in(0)}, std::move(s.attrs)));
  return out;
}

std::vector<int64_t> transpose_perm(int64_t nd, int64_t d0, int64_t d1) {
  std::vector<int64_t> p(std::max<int64_t>(nd, 0));
  for (int64_t i = 0; i < nd; ++i) p[i] = i;
  if (nd > 0) std::swap(p[d0], p[d1]);
  return p;
}
ViewSteps transpose_steps(const OpCall& c) {
  const Tensor& x = c.in(0);
  int64_t d0 = wrap_dim(c.attrs.i(0), x.dim(), "transpose"), d1 = wrap_dim(c.attrs.i(1), x.dim(), "transpose");
  if (x.dim() == 0) return {{OpId::view, {Shape{}}}};
  return {{OpId::permute, {transpose_perm(x.dim(), d0, d1)}}};
}
ViewSteps t_steps(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got shape ", shape_str(x.sizes()));
  if (x.dim() < 2) return {{OpId::view, {x.sizes().vec()}}};
  return {{OpId::permute, {std::vector<int64_t>{1, 0}}}};
}
ViewSteps narrow_steps(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "narrow");
  int64_t size = x.sizes()[d], start = c.attrs.i(1), length = c.attrs.i(2);
  KILN_CHECK(start >= -size && start <= size, "narrow: start (", start, ") out of range for dimension ", d,
             " of size ", size);
  if (start < 0) start += size;
  KILN_CHECK(length >= 0 && start + length <= size, "narrow: start (", start, ") + length (", length,
             ") exceeds dimension size (", size, ")");
  return {{OpId::slice, {d, start, start + length, int64_t{1}}}};
}
ViewSteps expand_as_steps(const OpCall& c) { return {{OpId::expand, {c.in(1).sizes().vec()}}}; }
// One slice per piece of `sizes` along `d`, after split's checks.
ViewSteps split_sizes_steps(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  KILN_CHECK(x.dim() > 0, "split: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split: split sizes must be non-negative, got ", shape_str(sizes));
    total += s;
  }
  KILN_CHECK(total == x.sizes()[d], "split: split sizes ", shape_str(sizes), " must sum to the size of dimension ",
             d, " (", x.sizes()[d], ")");
  ViewSteps out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back({OpId::slice, {d, start, start + s, int64_t{1}}});
    start += s;
  }
  return out;
}
ViewSteps split_steps(const OpCall& c) { return split_sizes_steps(c.in(0), c.attrs.ints(0), c.attrs.i(1)); }
ViewSteps chunk_steps(const OpCall& c) {
  const Tensor& x = c.in(0);
  int64_t chunks = c.attrs.i(0);
  KILN_CHECK(chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
  KILN_CHECK(x.dim() > 0, "chunk: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(c.attrs.i(1), x.dim(), "chunk");
  int64_t size = x.sizes()[d];
  int64_t each = std::max<int64_t>((size + chunks - 1) / chunks, 1);
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < size; start += each) sizes.push_back(std::min(each, size - start));
  if (size == 0) sizes.assign(static_cast<size_t>(chunks), 0);  // torch: `chunks` empty pieces
  return split_sizes_steps(x, sizes, d);
}
ViewSteps unbind_steps(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() > 0, "unbind: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "unbind");
  ViewSteps out;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) out.push_back({OpId::select, {d, i}});
  return out;
}
#define KILN_COMPOSITE_VIEW(op)                            \
  KILN_REGISTER_META(op, meta_composite_view<op##_steps>); \
  KILN_REGISTER_DECOMP(op, decomp_composite_view<op##_steps>)
KILN_COMPOSITE_VIEW(transpose);
KILN_COMPOSITE_VIEW(t);
KILN_COMPOSITE_VIEW(narrow);
KILN_COMPOSITE_VIEW(expand_as);
KILN_COMPOSITE_VIEW(split);
KILN_COMPOSITE_VIEW(chunk);
KILN_COMPOSITE_VIEW(unbind);
// torch.atleast_{1,2,3}d, a view of x with leading (and, for 3-D, trailing) 1s.
ViewSteps atleast_steps(const OpCall& c, int64_t n) {
  KILN_CHECK(c.in(0).defined(), c.name(), ": expected a defined input tensor");
  std::vector<int64_t> s = c.in(0).sizes().vec();
  if (n == 3 && s.size() == 1) s = {1, s[0], 1};  // torch: [N] -> [1, N, 1]
  if (n == 3 && s.size() == 2) s.push_back(1);     // [M, N] -> [M, N, 1]
  while (static_cast<int64_t>(s.size()) < n) s.insert(s.begin(), 1);
  return {{OpId::view, {s}}};
}
ViewSteps atleast_1d_steps(const OpCall& c) { return atleast_steps(c, 1); }
ViewSteps atleast_2d_steps(const OpCall& c) { return atleast_steps(c, 2); }
ViewSteps atleast_3d_steps(const OpCall& c) { return atleast_steps(c, 3); }
KILN_COMPOSITE_VIEW(atleast_1d);
KILN_COMPOSITE_VIEW(atleast_2d);
KILN_COMPOSITE_VIEW(atleast_3d);
#undef KILN_COMPOSITE_VIEW

// ---- reshape-like composites ----
// Note [Meta strides of reshape-like ops]
// reshape, flatten, unflatten and contiguous return a view of the input when
// they can and a copy otherwise, so they are not VIEW ops in ops.def: a VIEW
// op's outputs are always made as aliases of input 0 (backend_call). Their
// meta functions still report the strides and offset eager gives (the view's,
// or a fresh contiguous tensor's), which tests/ops/meta_tests.cpp checks
// against eager. On the meta device backend_call gives every non-VIEW output
// contiguous strides, so there only their sizes and dtypes are compared.

// What eager's reshape gives: a view when the strides allow one, else a view
// of a contiguous clone (offset 0).
TensorMeta reshape_meta(const Tensor& x, const Shape& size) {
  if (auto st = view_strides(x.sizes(), x.strides(), size)) return view_meta(x, size, *st, x.storage_offset());
  return view_meta(x, size, *view_strides(x.sizes(), contiguous_strides(x.sizes()), size), 0);
}
Shape flatten_size(const Tensor& x, const Attrs& a) {
  if (x.dim() == 0) return {1};
  int64_t s = wrap_dim(a.i(0), x.dim(), "flatten"), e = wrap_dim(a.i(1), x.dim(), "flatten");
  KILN_CHECK(s <= e, "flatten: start_dim (", s, ") cannot come after end_dim (", e, ")");
  Shape size;
  for (int64_t i = 0; i < s; ++i) size.push_back(x.sizes()[i]);
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= x.sizes()[i];
  size.push_back(m);
  for (int64_t i = e + 1; i < x.dim(); ++i) size.push_back(x.sizes()[i]);
  return size;
}
Shape unflatten_size(const Tensor& x, const Attrs& a) {
  KILN_CHECK(x.dim() > 0, "unflatten: dimension specified as ", a.i(0), " but tensor has no dimensions");
  int64_t d = wrap_dim(a.i(0), x.dim(), "unflatten");
  Shape inner = infer_size(a.ints(1), x.sizes()[d], "unflatten", x.sizes());
  Shape size(x.sizes().begin(), x.sizes().begin() + d);
  size.insert(size.end(), inner.begin(), inner.end());
  size.insert(size.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return size;
}

std::vector<TensorMeta> meta_reshape(const OpCall& c) {
  const Tensor& x = c.in(0);
  return {reshape_meta(x, infer_size(c.attrs.ints(0), x.numel(), "reshape", x.sizes()))};
}
std::vector<TensorMeta> meta_flatten(const OpCall& c) {
  return {reshape_meta(c.in(0), flatten_size(c.in(0), c.attrs))};
}
std::vector<TensorMeta> meta_unflatten(const OpCall& c) {
  return {reshape_meta(c.in(0), unflatten_size(c.in(0), c.attrs))};
}
// contiguous returns its input itself when it is contiguous, else a clone.
std::vector<TensorMeta> meta_contiguous(const OpCall& c) {
  const Tensor& x = c.in(0);
  if (x.is_contiguous()) return {view_meta(x, x.sizes().vec(), x.strides().vec(), x.storage_offset())};
  return {view_meta(x, x.sizes().vec(), contiguous_strides(x.sizes()), 0)};
}

std::vector<Tensor> decomp_reshape(const OpCall& c) {
  const Tensor& x = c.in(0);
  Shape size = infer_size(c.attrs.ints(0), x.numel(), "reshape", x.sizes());
  // Symbolic sizes pass on to the view as written (Note [Symbolic attrs]) when no -1 needs inferring.
  AttrValue sz = std::vector<int64_t>(size.begin(), size.end());
  const auto& written = std::get<std::vector<int64_t>>(c.attrs.symbolic_values()[0]);
  if (c.attrs.has_symbolic() && attrs_live(c.attrs) && std::find(written.begin(), written.end(), -1) == written.end())
    sz = written;
  if (view_strides(x.sizes(), x.strides(), size)) return {call_op1(OpId::view, {x}, {sz})};
  return {call_op1(OpId::view, {call_op1(OpId::clone, {x})}, {sz})};
}
std::vector<Tensor> decomp_flatten(const OpCall& c) {
  return {call_op1(OpId::reshape, {c.in(0)}, {flatten_size(c.in(0), c.attrs)})};
}
std::vector<Tensor> decomp_unflatten(const OpCall& c) {
  return {call_op1(OpId::reshape, {c.in(0)}, {unflatten_size(c.in(0), c.attrs)})};
}
std::vector<Tensor> decomp_contiguous(const OpCall& c) {
  const Tensor& x = c.in(0);
  return {x.is_contiguous() ? x : call_op1(OpId::clone, {x})};
}
KILN_REGISTER_META(reshape, meta_reshape);
KILN_REGISTER_META(flatten, meta_flatten);
KILN_REGISTER_META(unflatten, meta_unflatten);
KILN_REGISTER_META(contiguous, meta_contiguous);
KILN_REGISTER_DECOMP(reshape, decomp_reshape);
KILN_REGISTER_DECOMP(flatten, decomp_flatten);
KILN_REGISTER_DECOMP(unflatten, decomp_unflatten);
KILN_REGISTER_DECOMP(contiguous, decomp_contiguous);

AttrValue opt_int(const std::optional<SymInt>& v) {
  return v ? AttrValue(v->raw()) : AttrValue(std::monostate{});
}
}  // namespace

Tensor view(const Tensor& x, SymIntArrayRef size) { return call_op1(OpId::view, {x}, {size.raw()}); }
Tensor reshape(const Tensor& x, SymIntArrayRef size) { return call_op1(OpId::reshape, {x}, {size.raw()}); }
Tensor flatten(const Tensor& x, int64_t s, int64_t e) { return call_op1(OpId::flatten, {x}, {s, e}); }
Tensor unflatten(const Tensor& x, int64_t d, SymIntArrayRef sizes) {
  return call_op1(OpId::unflatten, {x}, {d, sizes.raw()});
}
Tensor permute(const Tensor& x, IntArrayRef dims) { return call_op1(OpId::permute, {x}, {dims.vec()}); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return call_op1(OpId::transpose, {x}, {d0, d1}); }
Tensor t(const Tensor& x) { return call_op1(OpId::t, {x}); }
Tensor swapaxes(const Tensor& x, int64_t axis0, int64_t axis1) { return transpose(x, axis0, axis1); }
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1) { return transpose(x, dim0, dim1); }
Tensor atleast_1d(const Tensor& x) { return call_op1(OpId::atleast_1d, {x}); }
Tensor atleast_2d(const Tensor& x) { return call_op1(OpId::atleast_2d, {x}); }
Tensor atleast_3d(const Tensor& x) { return call_op1(OpId::atleast_3d, {x}); }
namespace {
std::vector<Tensor> each(const std::vector<Tensor>& xs, Tensor (*f)(const Tensor&)) {
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (const Tensor& x : xs) out.push_back(f(x));
  return out;
}
}  // namespace
std::vector<Tensor> atleast_1d(const std::vector<Tensor>& xs) { return each(xs, atleast_1d); }
std::vector<Tensor> atleast_2d(const std::vector<Tensor>& xs) { return each(xs, atleast_2d); }
std::vector<Tensor> atleast_3d(const std::vector<Tensor>& xs) { return each(xs, atleast_3d); }
Tensor expand(const Tensor& x, SymIntArrayRef size) { return call_op1(OpId::expand, {x}, {size.raw()}); }
Tensor expand_as(const Tensor& x, const Tensor& other) { return call_op1(OpId::expand_as, {x, other}); }
Tensor squeeze(const Tensor& x) { return call_op1(OpId::squeeze, {x}, {std::vector<int64_t>{}}); }
Tensor squeeze(const Tensor& x, IntArrayRef dims) {
  KILN_CHECK(!dims.empty() || x.dim() == 0, "squeeze: empty dim list; call squeeze(x) to squeeze every size-1 dim");
  return call_op1(OpId::squeeze, {x}, {dims.vec()});
}
Tensor unsqueeze(const Tensor& x, int64_t d) { return call_op1(OpId::unsqueeze, {x}, {d}); }
Tensor narrow(const Tensor& x, int64_t d, SymInt start, SymInt length) {
  return call_op1(OpId::narrow, {x}, {d, start.raw(), length.raw()});
}
Tensor select(const Tensor& x, int64_t d, SymInt index) { return call_op1(OpId::select, {x}, {d, index.raw()}); }
Tensor slice(const Tensor& x, int64_t d, std::optional<SymInt> start, std::optional<SymInt> end, SymInt step) {
  int64_t s = start ? start->raw() : 0;
  int64_t e = end ? end->raw() : std::numeric_limits<int64_t>::max();
  return call_op1(OpId::slice, {x}, {d, s, e, step.raw()});
}
Tensor diagonal(const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
  return call_op1(OpId::diagonal, {x}, {offset, d1, d2});
}
Tensor as_strided(const Tensor& x, SymIntArrayRef size, SymIntArrayRef stride, std::optional<SymInt> offset) {
  return call_op1(OpId::as_strided, {x}, {size.raw(), stride.raw(), opt_int(offset)});
}
std::vector<Tensor> split(const Tensor& x, SymInt split_size, int64_t dim) {
  KILN_CHECK(x.dim() > 0, "split: cannot be applied to a 0-dim tensor");
  int64_t each = split_size.expect_int();
  int64_t size = x.size(dim).expect_int();
  KILN_CHECK(each > 0 || (each == 0 && size == 0), "split: split_size must be positive, got ", each);
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < size; start += each) sizes.push_back(std::min(each, size - start));
  if (size == 0) sizes.push_back(0);
  return call_op(OpId::split, {x}, {sizes, dim});
}
std::vector<Tensor> split(const Tensor& x, SymIntArrayRef sizes, int64_t dim) {
  return call_op(OpId::split, {x}, {sizes.raw(), dim});
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { return call_op(OpId::chunk, {x}, {chunks, dim}); }
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) { return call_op(OpId::unbind, {x}, {dim}); }
Tensor contiguous(const Tensor& x) { return call_op1(OpId::contiguous, {x}); }
Tensor detach(const Tensor& x) { return x.detach(); }

// ---- Tensor methods ----
Tensor Tensor::view(SymIntArrayRef size) const { return kiln::view(*this, size); }
Tensor Tensor::reshape(SymIntArrayRef size) const { return kiln::reshape(*this, size); }
Tensor Tensor::view_as(const Tensor& o) const { return kiln::view(*this, o.sizes()); }
Tensor Tensor::reshape_as(const Tensor& o) const { return kiln::reshape(*this, o.sizes()); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }
Tensor Tensor::unflatten(int64_t d, SymIntArrayRef sizes) const { return kiln::unflatten(*this, d, sizes); }
Tensor Tensor::permute(IntArrayRef dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return kiln::transpose(*this, d0, d1); }
Tensor Tensor::swapaxes(int64_t a0, int64_t a1) const { return kiln::transpose(*this, a0, a1); }
Tensor Tensor::swapdims(int64_t d0, int64_t d1) const { return kiln::transpose(*this, d0, d1); }
Tensor Tensor::t() const { return kiln::t(*this); }
Tensor Tensor::mT() const {
  KILN_CHECK(dim() >= 2, "mT: tensor.mT is only supported on matrices or batches of matrices, got shape ",
             shape_str(sizes()));
  return kiln::transpose(*this, -2, -1);
}
Tensor Tensor::expand(SymIntArrayRef size) const { return kiln::expand(*this, size); }
Tensor Tensor::expand_as(const Tensor& o) const { return kiln::expand_as(*this, o); }
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, IntArrayRef(d)); }
Tensor Tensor::squeeze(IntArrayRef dims) const { return kiln::squeeze(*this, dims); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::narrow(int64_t d, SymInt start, SymInt length) const { return kiln::narrow(*this, d, start, length); }
Tensor Tensor::select(int64_t d, SymInt index) const { return kiln::select(*this, d, index); }
Tensor Tensor::slice(int64_t d, std::optional<SymInt> start, std::optional<SymInt> end, SymInt step) const {
  return kiln::slice(*this, d, start, end, step);
}
Tensor Tensor::diagonal(int64_t offset, int64_t d1, int64_t d2) const { return kiln::diagonal(*this, offset, d1, d2); }
Tensor Tensor::as_strided(SymIntArrayRef size, SymIntArrayRef stride, std::optional<SymInt> offset) const {
  return kiln::as_strided(*this, size, stride, offset);
}
std::vector<Tensor> Tensor::split(SymInt s, int64_t d) const { return kiln::split(*this, s, d); }
std::vector<Tensor> Tensor::split(SymIntArrayRef s, int64_t d) const { return kiln::split(*this, s, d); }
std::vector<Tensor> Tensor::chunk(int64_t n, int64_t d) const { return kiln::chunk(*this, n, d); }
std::vector<Tensor> Tensor::unbind(int64_t d) const { return kiln::unbind(*this, d); }

}  // namespace kiln
namespace kiln { Tensor Tensor::contiguous() const { return kiln::contiguous(*this); } }
