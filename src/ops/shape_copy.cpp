// Shape copies: repeat, cat, stack, flip, roll, tril, triu, pad (public
// functions, meta functions, decompositions). VJP rules are in
// grad_shape_copy.cpp, CPU kernels in backend/cpu/shape_copy.cpp.
#include <algorithm>
#include <set>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {

std::string dims_str(const std::vector<int64_t>& v) { return shape_str(v); }

// Wrapped, duplicate-free dims (a flip/roll argument).
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    KILN_CHECK(seen.insert(w).second, op, ": dim ", w, " appears multiple times in the list of dims ", dims_str(dims));
    out.push_back(w);
  }
  return out;
}

// ---- repeat ----
std::vector<TensorMeta> meta_repeat(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& reps = c.attrs.ints(0);
  KILN_CHECK(static_cast<int64_t>(reps.size()) >= x.dim(), "repeat: number of dimensions of repeat dims ",
             dims_str(reps), " can not be smaller than number of dimensions of tensor ", shape_str(x.sizes()));
  int64_t lead = static_cast<int64_t>(reps.size()) - x.dim();
  Shape out(reps.size());
  for (size_t d = 0; d < reps.size(); ++d) {
    KILN_CHECK(reps[d] >= 0, "repeat: repeats can not be negative, got ", dims_str(reps));
    int64_t s = static_cast<int64_t>(d) < lead ? 1 : x.sizes()[d - lead];
    out[d] = s * reps[d];
  }
  return one_output(out, x.dtype(), x.device());
}
KILN_REGISTER_META(repeat, meta_repeat);

// repeat = view as [1, s0, 1, s1, ...], expand to [r0, s0, r1, s1, ...], reshape.
std::vector<Tensor> decomp_repeat(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& reps = c.attrs.ints(0);
  int64_t lead = static_cast<int64_t>(reps.size()) - x.dim();
  Shape inter, expanded, out;
  for (size_t d = 0; d < reps.size(); ++d) {
    int64_t s = static_cast<int64_t>(d) < lead ? 1 : x.sizes()[d - lead];
    inter.insert(inter.end(), {1, s});
    expanded.insert(expanded.end(), {reps[d], s});
    out.push_back(s * reps[d]);
  }
  return {reshape(expand(reshape(x, inter), expanded), out)};
}
KILN_REGISTER_DECOMP(repeat, decomp_repeat);

// ---- cat / stack ----
bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

std::vector<TensorMeta> meta_cat(const OpCall& c) {
  KILN_CHECK(!c.inputs.empty(), "cat: expected a non-empty list of Tensors");
  DType dt = c.in(0).dtype();
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.in(i);
    KILN_CHECK(t.defined(), "cat: tensor at position ", i, " is undefined");
    KILN_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    KILN_CHECK(t.device() == c.in(0).device(), "cat: expected all tensors to be on the same device, but found ",
               c.in(0).device(), " and ", t.device(), " (at position ", i, ")");
    dt = promote_types(dt, t.dtype());
  }
  // The first tensor that is not a legacy 1-D empty one sets the shape.
  const Tensor* ref = nullptr;
  size_t ref_i = 0;
  for (size_t i = 0; i < c.inputs.size() && !ref; ++i)
    if (!legacy_empty(c.in(i))) ref = &c.in(i), ref_i = i;
  if (!ref) {
    wrap_dim(c.attrs.i(0), 1, "cat");
    return one_output({0}, dt, c.in(0).device());
  }
  int64_t nd = ref->dim();
  int64_t dim = wrap_dim(c.attrs.i(0), nd, "cat");
  Shape out = ref->sizes().vec();
  out[dim] = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.in(i);
    if (legacy_empty(t) && nd != 1) continue;
    KILN_CHECK(t.dim() == nd, "cat: tensors must have same number of dimensions: got ", nd, " (tensor ", ref_i,
               ", shape ", shape_str(ref->sizes()), ") and ", t.dim(), " (tensor ", i, ", shape ",
               shape_str(t.sizes()), ")");
    for (int64_t d = 0; d < nd; ++d)
      KILN_CHECK(d == dim || t.sizes()[d] == ref->sizes()[d], "cat: sizes of tensors must match except in dimension ",
                 dim, ". Expected size ", ref->sizes()[d], " but got size ", t.sizes()[d], " for tensor number ", i,
                 " in the list (shapes ", shape_str(ref->sizes()), " and ", shape_str(t.sizes()), ")");
    out[dim] += t.sizes()[dim];
  }
  return one_output(out, dt, c.in(0).device());
}
KILN_REGISTER_META(cat, meta_cat);

std::vector<TensorMeta> meta_stack(const OpCall& c) {
  KILN_CHECK(!c.inputs.empty(), "stack: expects a non-empty TensorList");
  const Tensor& a = c.in(0);
  DType dt = a.dtype();
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    KILN_CHECK(c.in(i).defined(), "stack: tensor at position ", i, " is undefined");
    KILN_CHECK(c.in(i).sizes() == a.sizes(), "stack: expects each tensor to be equal size, but got ",
               shape_str(a.sizes()), " at entry 0 and ", shape_str(c.in(i).sizes()), " at entry ", i);
    dt = promote_types(dt, c.in(i).dtype());
  }
  int64_t dim = wrap_dim(c.attrs.i(0), a.dim() + 1, "stack");
  Shape out = a.sizes().vec();
  out.insert(out.begin() + dim, static_cast<int64_t>(c.inputs.size()));
  return one_output(out, dt, a.device());
}
KILN_REGISTER_META(stack, meta_stack);

std::vector<Tensor> decomp_stack(const OpCall& c) {
  meta_stack(c);  // errors first, with stack's name
  int64_t dim = wrap_dim(c.attrs.i(0), c.in(0).dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : c.inputs) parts.push_back(unsqueeze(t, dim));
  return {call_op1(OpId::cat, parts, {dim})};
}
KILN_REGISTER_DECOMP(stack, decomp_stack);

// ---- flip / roll ----
std::vector<TensorMeta> meta_flip(const OpCall& c) {
  wrap_dims(c.attrs.ints(0), c.in(0).dim(), "flip");
  return one_output(c.in(0).sizes().vec(), c.in(0).dtype(), c.in(0).device());
}
KILN_REGISTER_META(flip, meta_flip);

std::vector<TensorMeta> meta_roll(const OpCall& c) {
  const auto& shifts = c.attrs.ints(0);
  const auto& dims = c.attrs.ints(1);
  KILN_CHECK(!shifts.empty(), "roll: `shifts` required");
  KILN_CHECK(shifts.size() == dims.size() || (dims.empty() && shifts.size() == 1),
             "roll: shifts and dimensions must align. shifts: ", shifts.size(), ", dims: ", dims.size());
  for (int64_t d : dims) {
    // wrap_dim lets 0-d tensors take dim 0 or -1; roll, as torch, does not.
    KILN_CHECK(c.in(0).dim() > 0, "roll: dimension specified as ", d, " but tensor has no dimensions");
    wrap_dim(d, c.in(0).dim(), "roll");
  }
  return one_output(c.in(0).sizes().vec(), c.in(0).dtype(), c.in(0).device());
}
KILN_REGISTER_META(roll, meta_roll);

// roll along one dim = cat of the last `s` entries and the first n - s.
Tensor roll_one(const Tensor& x, int64_t shift, int64_t dim) {
  int64_t n = x.sizes()[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return call_op1(OpId::cat, {narrow(x, dim, n - s, s), narrow(x, dim, 0, n - s)}, {dim});
}
std::vector<Tensor> decomp_roll(const OpCall& c) {
  meta_roll(c);
  const auto& shifts = c.attrs.ints(0);
  const auto& dims = c.attrs.ints(1);
  const Tensor& x = c.in(0);
  if (dims.empty()) return {reshape(roll_one(flatten(x), shifts[0], 0), x.sizes().vec())};
  Tensor r = x;
  for (size_t k = 0; k < dims.size(); ++k) r = roll_one(r, shifts[k], wrap_dim(dims[k], x.dim(), "roll"));
  return {r.is_same(x) ? clone(x) : r};
}
KILN_REGISTER_DECOMP(roll, decomp_roll);

// ---- tril / triu ----
std::vector<TensorMeta> meta_tri(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() >= 2, c.name(), ": input tensor must have at least 2 dimensions, got shape ",
             shape_str(x.sizes()));
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(tril, meta_tri);
KILN_REGISTER_META(triu, meta_tri);

// tril keeps j - i <= k, triu keeps j - i >= k: a mask from two aranges.
std::vector<Tensor> decomp_tri(const OpCall& c) {
  meta_tri(c);
  const Tensor& x = c.in(0);
  int64_t n = x.sizes()[x.dim() - 2], m = x.sizes()[x.dim() - 1];
  Tensor i = unsqueeze(arange(n, TensorOptions(kInt64).device(x.device())), 1);
  Tensor j = arange(m, TensorOptions(kInt64).device(x.device()));
  Tensor diff = sub(j, i);
  Tensor keep = c.op == OpId::tril ? le(diff, Scalar(c.attrs.i(0))) : ge(diff, Scalar(c.attrs.i(0)));
  return {where(keep, x, zeros({}, TensorOptions(x.dtype()).device(x.device())))};
}
KILN_REGISTER_DECOMP(tril, decomp_tri);
KILN_REGISTER_DECOMP(triu, decomp_tri);

// ---- pad ----
std::vector<TensorMeta> meta_pad(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& pad = c.attrs.ints(0);
  const std::string& mode = c.attrs.str(1);
  KILN_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate", "pad: unsupported mode '", mode,
             "' (expected constant, reflect or replicate)");
  KILN_CHECK(pad.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", pad.size());
  KILN_CHECK(static_cast<int64_t>(pad.size()) / 2 <= x.dim(), "pad: padding length ", pad.size(),
             " is too large for an input of shape ", shape_str(x.sizes()), " (at most 2 per dimension)");
  // As torch's reflection/replication pads: n padded dims take (C, *) or (N, C, *), n <= 3.
  const int64_t np = static_cast<int64_t>(pad.size()) / 2;
  KILN_CHECK(mode == "constant" || (np >= 1 && np <= 3 && (x.dim() == np + 1 || x.dim() == np + 2)), "pad: ", mode,
             " padding of ", np, " dimension(s) needs a ", np + 1, "-D (unbatched) or ", np + 2,
             "-D input (1 to 3 padded dimensions), got shape ", shape_str(x.sizes()));
  Shape out = x.sizes().vec();
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(k);
    int64_t l = pad[2 * k], r = pad[2 * k + 1], n = x.sizes()[d];
    if (mode == "constant") {
      out[d] = n + l + r;
      KILN_CHECK(out[d] >= 0, "pad: the input size ", n, " at dimension ", d, " plus padding (", l, ", ", r,
                 ") is negative (input shape ", shape_str(x.sizes()), ")");
      continue;
    }
    KILN_CHECK(l >= 0 && r >= 0, "pad: ", mode, " padding must be non-negative, got (", l, ", ", r,
               ") at dimension ", d);
    if (mode == "reflect")
      KILN_CHECK(l < n && r < n, "pad: padding size should be less than the corresponding input dimension, but "
                 "got padding (", l, ", ", r, ") at dimension ", d, " of input ", shape_str(x.sizes()));
    else
      KILN_CHECK(n > 0 || (l == 0 && r == 0), "pad: replicate padding of an empty dimension ", d, " of input ",
                 shape_str(x.sizes()));
    out[d] = n + l + r;
  }
  return one_output(out, x.dtype(), x.device());
}
KILN_REGISTER_META(pad, meta_pad);

// Circular padding wraps each padded dim around once: the last l entries before, the first r
// after (torch's _pad_circular), composed of narrow and cat so autograd and every backend get it.
// A negative side crops first, and the wrap comes from what is left (as torch 2's).
Tensor pad_circular(const Tensor& x, IntArrayRef pad) {
  KILN_CHECK(pad.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", pad.size());
  const int64_t n = static_cast<int64_t>(pad.size()) / 2;
  KILN_CHECK(n >= 1 && (x.dim() == n + 1 || x.dim() == n + 2), "pad: circular padding of ", n, " dimension(s) needs a ",
             n + 1, "-D (unbatched) or ", n + 2, "-D input, got shape ", shape_str(x.sizes()));
  Tensor y = x;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t d = x.dim() - 1 - k, l = pad[2 * k], r = pad[2 * k + 1], size = x.sizes()[d];
    const int64_t crop_l = std::max<int64_t>(-l, 0), crop_r = std::max<int64_t>(-r, 0);
    KILN_CHECK(crop_l + crop_r <= size, "pad: negative circular padding (", l, ", ", r, ") at dimension ", d,
               " removes more than the ", size, " entries of input ", shape_str(x.sizes()));
    const int64_t kept = size - crop_l - crop_r, wrap_l = std::max<int64_t>(l, 0), wrap_r = std::max<int64_t>(r, 0);
    KILN_CHECK(wrap_l <= kept && wrap_r <= kept, "pad: Padding value causes wrapping around more than once: padding (",
               l, ", ", r, ") at dimension ", d, " of input ", shape_str(x.sizes()));
    if (l == 0 && r == 0) continue;
    Tensor c = narrow(y, d, crop_l, kept);
    y = cat({narrow(c, d, kept - wrap_l, wrap_l), c, narrow(c, d, 0, wrap_r)}, d);
  }
  return y;
}

// Negative reflect/replicate padding crops that side, as torch's reflection and replication pads:
// each output index takes torch's source index (ReflectionPad.cpp / ReplicationPad.cpp: mirrored or
// edge positions counted in the padded frame, then shifted past the cropped entries), so a
// reflection may reach into the cropped part exactly as torch's does. One index_select per dim,
// which autograd and every backend have.
Tensor pad_cropping(const Tensor& x, IntArrayRef pad, const std::string& mode) {
  KILN_CHECK(pad.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", pad.size());
  const int64_t np = static_cast<int64_t>(pad.size()) / 2;
  KILN_CHECK(np >= 1 && np <= 3 && (x.dim() == np + 1 || x.dim() == np + 2), "pad: ", mode, " padding of ", np,
             " dimension(s) needs a ", np + 1, "-D (unbatched) or ", np + 2,
             "-D input (1 to 3 padded dimensions), got shape ", shape_str(x.sizes()));
  Tensor y = x;
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = x.dim() - 1 - k, l = pad[2 * k], r = pad[2 * k + 1], in = x.sizes()[d];
    int64_t out = 0;
    KILN_CHECK(!__builtin_add_overflow(in, l, &out) && !__builtin_add_overflow(out, r, &out), "pad: the input size ",
               in, " at dimension ", d, " plus padding (", l, ", ", r, ") overflows int64");
    KILN_CHECK(out >= 1, "pad: the input size ", in, " at dimension ", d, " plus padding (", l, ", ", r,
               ") leaves no entries (input shape ", shape_str(x.sizes()), ")");
    if (mode == "reflect")
      KILN_CHECK(l < in && r < in, "pad: padding size should be less than the corresponding input dimension, but "
                 "got padding (", l, ", ", r, ") at dimension ", d, " of input ", shape_str(x.sizes()));
    if (l == 0 && r == 0) continue;
    const int64_t i_start = std::max<int64_t>(0, -l), o_start = std::max<int64_t>(0, l);
    // Host indices (while tracing too): a length that cannot be held is an error naming it.
    std::vector<int64_t> src;
    try {
      src.resize(static_cast<size_t>(out));
    } catch (const std::exception&) {
      KILN_FAIL("pad: cannot allocate the ", out, " indices of ", mode, " padding (", l, ", ", r, ") at dimension ",
                d, " of input ", shape_str(x.sizes()));
    }
    for (int64_t j = 0; j < out; ++j) {
      int64_t p = 0;
      if (mode == "reflect")
        p = j < l ? 2 * l - j : j < in + l ? j : 2 * (in + l - 1) - j;
      else
        p = j < l ? l : j < in + l ? j : in + l - 1;
      src[static_cast<size_t>(j)] = p - o_start + i_start;
      KILN_CHECK(src[static_cast<size_t>(j)] >= 0 && src[static_cast<size_t>(j)] < in, "pad: ", mode, " padding (", l, ", ", r, ") at dimension ", d,
                 " of input ", shape_str(x.sizes()), " reads outside the input");
    }
    y = index_select(y, d, tensor<int64_t>(src, {out}, TensorOptions(kInt64).device(x.device())));
  }
  return y;
}

}  // namespace

// ---- public functions ----
Tensor repeat(const Tensor& x, SymIntArrayRef repeats) { return call_op1(OpId::repeat, {x}, {repeats.raw()}); }
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) { return call_op1(OpId::cat, xs, {dim}); }
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) { return call_op1(OpId::stack, xs, {dim}); }
Tensor flip(const Tensor& x, IntArrayRef dims) { return call_op1(OpId::flip, {x}, {dims.vec()}); }
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  return call_op1(OpId::roll, {x}, {shifts.vec(), dims.vec()});
}
Tensor tril(const Tensor& x, int64_t diagonal) { return call_op1(OpId::tril, {x}, {diagonal}); }
Tensor triu(const Tensor& x, int64_t diagonal) { return call_op1(OpId::triu, {x}, {diagonal}); }
Tensor pad(const Tensor& x, IntArrayRef pad, const std::string& mode, std::optional<double> value) {
  KILN_CHECK(!value || mode == "constant" || *value == 0.0, "pad: padding mode \"", mode,
             "\" doesn't take in value argument");
  if (mode == "circular") return pad_circular(x, pad);
  if ((mode == "reflect" || mode == "replicate") && std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p < 0; }))
    return pad_cropping(x, pad, mode);
  return call_op1(OpId::pad, {x}, {pad.vec(), mode, value.value_or(0.0)});
}

Tensor Tensor::repeat(SymIntArrayRef repeats) const { return kiln::repeat(*this, repeats); }
Tensor Tensor::flip(IntArrayRef dims) const { return kiln::flip(*this, dims); }
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const { return kiln::roll(*this, shifts, dims); }
Tensor Tensor::tril(int64_t diagonal) const { return kiln::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return kiln::triu(*this, diagonal); }

}  // namespace kiln

// ---- fliplr, flipud, hstack, vstack, column_stack, dstack ----
namespace kiln {
namespace {
std::vector<TensorMeta> meta_flip_lr_ud(const OpCall& c) {
  const Tensor& x = c.in(0);
  const int64_t need = c.op == OpId::fliplr ? 2 : 1;
  KILN_CHECK(x.defined(), c.name(), ": expected a defined input tensor");
  KILN_CHECK(x.dim() >= need, c.name(), ": Input must be >= ", need, "-d, got shape ", shape_str(x.sizes()));
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
std::vector<Tensor> decomp_flip_lr_ud(const OpCall& c) {
  meta_flip_lr_ud(c);
  return {flip(c.in(0), {c.op == OpId::fliplr ? 1 : 0})};
}

// Each input's shape as the stacking op reshapes it (atleast_1d/2d/3d, or a column), and the dim
// the reshaped inputs are concatenated along.
Shape stacked_shape(OpId op, IntArrayRef s) {
  Shape v = s.vec();
  if (op == OpId::column_stack) return v.size() <= 1 ? Shape{v.empty() ? 1 : v[0], 1} : v;
  if (op == OpId::dstack && v.size() == 1) return {1, v[0], 1};
  if (op == OpId::dstack && v.size() == 2) return {v[0], v[1], 1};
  const size_t n = op == OpId::hstack ? 1 : op == OpId::dstack ? 3 : 2;
  while (v.size() < n) v.insert(v.begin(), 1);
  return v;
}
int64_t stack_dim(const OpCall& c) {
  if (c.op == OpId::vstack) return 0;
  if (c.op == OpId::dstack) return 2;
  if (c.op == OpId::column_stack) return 1;
  for (const Tensor& t : c.inputs)  // hstack: along 0 only when every input is (at most) 1-D
    if (t.dim() > 1) return 1;
  return 0;
}
std::vector<TensorMeta> meta_stack_like(const OpCall& c) {
  KILN_CHECK(!c.inputs.empty(), c.name(), ": expects a non-empty TensorList");
  const int64_t dim = stack_dim(c);
  DType dt = c.in(0).dtype();
  Shape out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.in(i);
    KILN_CHECK(t.defined(), c.name(), ": tensor at position ", i, " is undefined");
    KILN_CHECK(t.device() == c.in(0).device(), c.name(), ": expected all tensors to be on the same device, but found ",
               c.in(0).device(), " and ", t.device(), " (at position ", i, ")");
    dt = promote_types(dt, t.dtype());
    Shape s = stacked_shape(c.op, t.sizes());
    if (i == 0) {
      out = s;
      continue;
    }
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int64_t>(d) == dim || s[d] == out[d];
    KILN_CHECK(ok, c.name(), ": sizes of tensors must match except in dimension ", dim, ": tensor 0 is ",
               shape_str(c.in(0).sizes()), " (as ", shape_str(out), "), tensor ", i, " is ", shape_str(t.sizes()),
               " (as ", shape_str(s), ")");
    out[static_cast<size_t>(dim)] += s[static_cast<size_t>(dim)];
  }
  return one_output(out, dt, c.in(0).device());
}
std::vector<Tensor> decomp_stack_like(const OpCall& c) {
  meta_stack_like(c);  // errors first, with the op's name
  std::vector<Tensor> parts;
  for (const Tensor& t : c.inputs) {
    Shape s = stacked_shape(c.op, t.sizes());
    parts.push_back(s == t.sizes().vec() ? t : reshape(t, s));
  }
  return {call_op1(OpId::cat, parts, {stack_dim(c)})};
}
KILN_REGISTER_META(fliplr, meta_flip_lr_ud);
KILN_REGISTER_META(flipud, meta_flip_lr_ud);
KILN_REGISTER_META(hstack, meta_stack_like);
KILN_REGISTER_META(vstack, meta_stack_like);
KILN_REGISTER_META(column_stack, meta_stack_like);
KILN_REGISTER_META(dstack, meta_stack_like);
KILN_REGISTER_DECOMP(fliplr, decomp_flip_lr_ud);
KILN_REGISTER_DECOMP(flipud, decomp_flip_lr_ud);
KILN_REGISTER_DECOMP(hstack, decomp_stack_like);
KILN_REGISTER_DECOMP(vstack, decomp_stack_like);
KILN_REGISTER_DECOMP(column_stack, decomp_stack_like);
KILN_REGISTER_DECOMP(dstack, decomp_stack_like);
}  // namespace

Tensor fliplr(const Tensor& x) { return call_op1(OpId::fliplr, {x}); }
Tensor flipud(const Tensor& x) { return call_op1(OpId::flipud, {x}); }
Tensor hstack(const std::vector<Tensor>& xs) { return call_op1(OpId::hstack, xs); }
Tensor vstack(const std::vector<Tensor>& xs) { return call_op1(OpId::vstack, xs); }
Tensor row_stack(const std::vector<Tensor>& xs) { return vstack(xs); }
Tensor dstack(const std::vector<Tensor>& xs) { return call_op1(OpId::dstack, xs); }
Tensor column_stack(const std::vector<Tensor>& xs) { return call_op1(OpId::column_stack, xs); }
}  // namespace kiln
