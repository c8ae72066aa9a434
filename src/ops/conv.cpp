// Convolution and pooling: the prims' shapes and checks (torch's messages),
// the composites conv1d/conv2d/conv_transpose2d/adaptive_avg_pool2d, and the
// public functions. VJPs in grad_conv.cpp, kernels in backend/cpu/conv.cpp.
#include <array>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/conv_util.h"
#include "ops/meta_util.h"

namespace kiln {

// torch's _single/_pair/_triple: one value for every dim or one per dim.
std::array<int64_t, 3> int_tuple(const char* op, const char* what, IntArrayRef v, int n) {
  KILN_CHECK(v.size() == 1 || v.size() == static_cast<size_t>(n), op, ": expected ", what, " to be a single int",
             n == 1   ? ""
             : n == 2 ? " or a pair of ints"
                      : " or " + std::to_string(n) + " ints",
             ", got ", v.size(), " values");
  std::array<int64_t, 3> r{0, 0, 0};
  for (int i = 0; i < n; ++i) r[i] = v.size() == 1 ? v[0] : v[i];
  return r;
}

std::array<int64_t, 2> int_pair(const char* op, const char* what, IntArrayRef v) {
  auto t = int_tuple(op, what, v, 2);
  return {t[0], t[1]};
}

namespace {
std::string dims_str(const std::array<int64_t, 3>& v, int n, const char* sep = ", ") {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}
bool all_of_n(const std::array<int64_t, 3>& v, int n, bool (*f)(int64_t)) {
  for (int i = 0; i < n; ++i)
    if (!f(v[i])) return false;
  return true;
}
}  // namespace

bool avg_pool_dtype_ok(DType t) { return is_floating_point(t) || t == DType::Int64; }

ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, const Attrs& a) {
  ConvShape s{};
  KILN_CHECK(w.dim() >= 3 && w.dim() <= 5, op, ": expected a 3-D, 4-D or 5-D weight, got weight of shape ",
             shape_str(w.sizes()), " for input of shape ", shape_str(x.sizes()));
  const int nd = static_cast<int>(w.dim()) - 2;
  KILN_CHECK(x.dim() == w.dim(), op, ": expected ", w.dim(), "-D input to match the ", w.dim(), "-D weight of shape ",
             shape_str(w.sizes()), ", got input of shape ", shape_str(x.sizes()));
  // torch's CPU convolutions compute every integer type (slowly); Bool has no kernel.
  KILN_CHECK(x.dtype() != DType::Bool, op, ": not implemented for dtype ", x.dtype());
  KILN_CHECK(x.dtype() == w.dtype(), op, ": input type (", x.dtype(), ") and weight type (", w.dtype(),
             ") should be the same");
  s.nd = nd;
  s.stride = int_tuple(op, "stride", a.ints(0), nd);
  s.pad = int_tuple(op, "padding", a.ints(1), nd);
  s.dil = int_tuple(op, "dilation", a.ints(2), nd);
  s.transposed = a.b(3);
  s.opad = int_tuple(op, "output_padding", a.ints(4), nd);
  s.groups = a.i(5);
  KILN_CHECK(all_of_n(s.stride, nd, [](int64_t v) { return v > 0; }), op,
             ": non-positive stride is not supported, got stride [", dims_str(s.stride, nd), "]");
  KILN_CHECK(all_of_n(s.pad, nd, [](int64_t v) { return v >= 0; }), op,
             ": negative padding is not supported, got padding [", dims_str(s.pad, nd), "]");
  KILN_CHECK(all_of_n(s.dil, nd, [](int64_t v) { return v > 0; }), op,
             ": dilation should be greater than zero, got dilation [", dims_str(s.dil, nd), "]");
  KILN_CHECK(s.groups > 0, op, ": non-positive groups is not supported, got groups=", s.groups);
  s.N = x.sizes()[0];
  s.C_in = x.sizes()[1];
  for (int i = 0; i < nd; ++i) s.in[i] = x.sizes()[2 + i], s.k[i] = w.sizes()[2 + i];
  const int64_t G = s.groups;
  if (!s.transposed) {
    KILN_CHECK(all_of_n(s.opad, nd, [](int64_t v) { return v == 0; }), op, ": output_padding requires transposed=true");
    KILN_CHECK(w.sizes()[0] % G == 0, op, ": given groups=", G, ", expected weight to be divisible by ", G,
               " at dimension 0, but got weight of size ", shape_str(w.sizes()), " instead");
    KILN_CHECK(s.C_in == w.sizes()[1] * G, op, ": given groups=", G, ", weight of size ", shape_str(w.sizes()),
               ", expected input", shape_str(x.sizes()), " to have ", w.sizes()[1] * G, " channels, but got ", s.C_in,
               " channels instead");
    s.C_out = w.sizes()[0];
    std::array<int64_t, 3> eff{}, padded{};
    bool fits = true;
    for (int i = 0; i < nd; ++i) {
      eff[i] = s.dil[i] * (s.k[i] - 1) + 1;
      padded[i] = s.in[i] + 2 * s.pad[i];
      fits = fits && padded[i] >= eff[i];
    }
    KILN_CHECK(fits, op, ": calculated padded input size per channel: (", dims_str(padded, nd, " x "),
               "). Kernel size: (", dims_str(eff, nd, " x "), "). Kernel size can't be greater than actual input size");
    for (int i = 0; i < nd; ++i) s.out[i] = (padded[i] - eff[i]) / s.stride[i] + 1;
  } else {
    KILN_CHECK(s.C_in == w.sizes()[0], op, ": given transposed=1, weight of size ", shape_str(w.sizes()),
               ", expected input", shape_str(x.sizes()), " to have ", w.sizes()[0], " channels, but got ", s.C_in,
               " channels instead");
    KILN_CHECK(s.C_in % G == 0, op, ": given groups=", G, ", expected weight to be divisible by ", G,
               " at dimension 0, but got weight of size ", shape_str(w.sizes()), " instead");
    bool op_ok = true, op_lt_stride = true;
    for (int i = 0; i < nd; ++i) {
      op_ok = op_ok && s.opad[i] >= 0 && (s.opad[i] < s.stride[i] || s.opad[i] < s.dil[i]);
      op_lt_stride = op_lt_stride && s.opad[i] < s.stride[i];
    }
    KILN_CHECK(op_ok, op, ": output padding must be smaller than either stride or dilation, but got output_padding [",
               dims_str(s.opad, nd), "], stride [", dims_str(s.stride, nd), "], dilation [", dims_str(s.dil, nd), "]");
    KILN_CHECK(op_lt_stride, op, ": not supported yet: output_padding >= stride (allowed by dilation), got ",
               "output_padding [", dims_str(s.opad, nd), "] with stride [", dims_str(s.stride, nd), "]");
    s.C_out = w.sizes()[1] * G;
    bool pos = true;
    for (int i = 0; i < nd; ++i) {
      s.out[i] = (s.in[i] - 1) * s.stride[i] - 2 * s.pad[i] + s.dil[i] * (s.k[i] - 1) + s.opad[i] + 1;
      pos = pos && s.out[i] > 0;
    }
    KILN_CHECK(pos, op, ": given input size per channel (", dims_str(s.in, nd, " x "),
               "), calculated output size per channel (", dims_str(s.out, nd, " x "), ") is too small");
  }
  if (bias.defined()) {
    KILN_CHECK(bias.dim() == 1 && bias.sizes()[0] == s.C_out, op, ": given weight of size ", shape_str(w.sizes()),
               ", expected bias to be 1-dimensional with ", s.C_out, " elements, but got bias of size ",
               shape_str(bias.sizes()), " instead");
    KILN_CHECK(bias.dtype() == x.dtype(), op, ": input type (", x.dtype(), ") and bias type (", bias.dtype(),
               ") should be the same");
  }
  return s;
}

int64_t pooling_output_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t n = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (n - 1) * s >= in + pad) --n;
  return n;
}

PoolNdShape pool_nd_shape(const char* op, int nd, const Tensor& x, IntArrayRef kernel, IntArrayRef stride,
                          IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, bool floating_only) {
  PoolNdShape p{};
  p.nd = nd;
  bool nonzero = x.dim() == nd + 1 || x.dim() == nd + 2;
  for (int64_t d = x.dim() - nd - 1; nonzero && d < x.dim(); ++d) nonzero = x.sizes()[d] > 0;
  KILN_CHECK(nonzero, op, ": expected a ", nd + 1, "-D or ", nd + 2,
             "-D (batch mode) input with non-zero channel and spatial sizes, got shape ", shape_str(x.sizes()));
  KILN_CHECK(floating_only ? is_floating_point(x.dtype()) : avg_pool_dtype_ok(x.dtype()), op,
             ": not implemented for dtype ", x.dtype(),
             floating_only ? " (expected a floating dtype)" : " (expected a floating dtype or int64)");
  p.k = int_tuple(op, "kernel_size", kernel, nd);
  p.stride = stride.empty() ? p.k : int_tuple(op, "stride", stride, nd);
  p.pad = int_tuple(op, "padding", padding, nd);
  p.dil = int_tuple(op, "dilation", dilation, nd);
  KILN_CHECK(all_of_n(p.k, nd, [](int64_t v) { return v > 0; }), op,
             ": kernel size should be greater than zero, but got kernel_size [", dims_str(p.k, nd), "]");
  KILN_CHECK(all_of_n(p.stride, nd, [](int64_t v) { return v > 0; }), op,
             ": stride should be greater than zero, but got stride [", dims_str(p.stride, nd), "]");
  KILN_CHECK(all_of_n(p.dil, nd, [](int64_t v) { return v > 0; }), op,
             ": dilation should be greater than zero, but got dilation [", dims_str(p.dil, nd), "]");
  bool pad_ok = true;
  for (int i = 0; i < nd; ++i) pad_ok = pad_ok && p.pad[i] >= 0 && p.pad[i] <= p.k[i] / 2;
  KILN_CHECK(pad_ok, op, ": pad should be at most half of effective kernel size, but got padding [",
             dims_str(p.pad, nd), "] for kernel_size [", dims_str(p.k, nd), "]");
  p.batched = x.dim() == nd + 2;
  const int64_t o = p.batched ? 1 : 0;
  p.N = p.batched ? x.sizes()[0] : 1;
  p.C = x.sizes()[o];
  p.ceil_mode = ceil_mode;
  bool ok = true;
  for (int i = 0; i < nd; ++i) {
    p.in[i] = x.sizes()[o + 1 + i];
    p.out[i] = pooling_output_size(p.in[i], p.k[i], p.pad[i], p.stride[i], p.dil[i], ceil_mode);
    ok = ok && p.out[i] >= 1;
  }
  KILN_CHECK(ok, op, ": given input size (", p.C, "x", dims_str(p.in, nd, "x"), "), calculated output size (", p.C, "x",
             dims_str(p.out, nd, "x"), ") is too small");
  return p;
}

PoolShape pool_shape(const char* op, const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode, bool floating_only) {
  const PoolNdShape g = pool_nd_shape(op, 2, x, kernel, stride, padding, dilation, ceil_mode, floating_only);
  return PoolShape{g.N,      g.C,      g.in[0],  g.in[1],  g.k[0],    g.k[1],    g.stride[0], g.stride[1],
                   g.pad[0], g.pad[1], g.dil[0], g.dil[1], ceil_mode, g.batched, g.out[0],    g.out[1]};
}

namespace {

// ---- convolution prims ----
std::vector<TensorMeta> meta_convolution(const OpCall& c) {
  ConvShape s = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  return one_output(s.out_sizes(), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(convolution, meta_convolution);

// Outputs not asked for by output_mask get shape [0].
std::vector<TensorMeta> meta_convolution_backward(const OpCall& c) {
  const Tensor& g = c.in(0);
  const Tensor& x = c.in(1);
  const Tensor& w = c.in(2);
  ConvShape s = conv_shape(c.name(), x, w, Tensor(), c.attrs);
  KILN_CHECK(g.sizes() == IntArrayRef(s.out_sizes()), c.name(), ": expected grad_out of shape ",
             shape_str(s.out_sizes()), ", got ", shape_str(g.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  KILN_CHECK(g.dtype() == x.dtype(), c.name(), ": expected grad_out of dtype ", x.dtype(), ", got ", g.dtype());
  const auto& mask = c.attrs.ints(6);
  KILN_CHECK(mask.size() == 3, c.name(), ": expected output_mask of 3 values, got ", mask.size());
  Device d = output_device(c.inputs);
  std::vector<TensorMeta> out(3);
  out[0].sizes = mask[0] ? Shape(x.sizes().begin(), x.sizes().end()) : Shape{0};
  out[1].sizes = mask[1] ? Shape(w.sizes().begin(), w.sizes().end()) : Shape{0};
  out[2].sizes = mask[2] ? Shape{s.C_out} : Shape{0};
  for (auto& m : out) m.dtype = x.dtype(), m.device = d;
  return out;
}
KILN_REGISTER_META(convolution_backward, meta_convolution_backward);

// ---- conv composites ----
// conv{1,2,3}d / conv_transpose{1,2,3}d accept unbatched input (one fewer dim); returns whether it was.
bool unbatched(const char* op, const Tensor& x, int64_t batched_dim) {
  KILN_CHECK(x.dim() == batched_dim || x.dim() == batched_dim - 1, op, ": expected ", batched_dim - 1,
             "-D (unbatched) or ", batched_dim, "-D (batched) input, but got input of shape ", shape_str(x.sizes()));
  return x.dim() == batched_dim - 1;
}

// The `convolution` attrs of an nd-d conv or transposed conv composite, checked
// in the decomposition's order (shared by the meta function, so errors agree).
Attrs conv_prim_attrs(const OpCall& c, bool transposed, int nd) {
  const char* op = c.name();
  KILN_CHECK(c.in(1).dim() == nd + 2, op, ": expected a ", nd + 2, "-D weight, got weight of shape ",
             shape_str(c.in(1).sizes()));
  auto vec = [&](size_t k, const char* what) {
    auto t = int_tuple(op, what, c.attrs.ints(k), nd);
    return std::vector<int64_t>(t.begin(), t.begin() + nd);
  };
  if (!transposed)  // (stride, padding, dilation, groups)
    return Attrs{vec(0, "stride"), vec(1, "padding"), vec(2, "dilation"), false, std::vector<int64_t>(nd, 0),
                 c.attrs.i(3)};
  // (stride, padding, output_padding, groups, dilation)
  return Attrs{vec(0, "stride"), vec(1, "padding"), vec(4, "dilation"), true, vec(2, "output_padding"), c.attrs.i(3)};
}

template <int ND, bool Transposed>
std::vector<Tensor> decomp_conv(const OpCall& c) {
  Attrs a = conv_prim_attrs(c, Transposed, ND);
  bool ub = unbatched(c.name(), c.in(0), ND + 2);
  Tensor x = ub ? unsqueeze(c.in(0), 0) : c.in(0);
  Tensor y = call_op1(OpId::convolution, {x, c.in(1), c.in(2)}, a);
  return {ub ? squeeze(y, std::vector<int64_t>{0}) : y};
}
KILN_REGISTER_DECOMP(conv1d, (decomp_conv<1, false>));
KILN_REGISTER_DECOMP(conv2d, (decomp_conv<2, false>));
KILN_REGISTER_DECOMP(conv3d, (decomp_conv<3, false>));
KILN_REGISTER_DECOMP(conv_transpose1d, (decomp_conv<1, true>));
KILN_REGISTER_DECOMP(conv_transpose2d, (decomp_conv<2, true>));
KILN_REGISTER_DECOMP(conv_transpose3d, (decomp_conv<3, true>));

// The composites' metas run the prim's shape checks on the shapes their
// decompositions pass it (storage-less stand-ins: a meta function runs no op),
// under the composite's name: errors name the op the user called.
Tensor shape_as(const Tensor& t, Shape sizes) {
  return make_meta_tensor(sizes, contiguous_strides(sizes), t.dtype(), Device(DeviceType::Meta));
}
Tensor with_dim(const Tensor& t, int64_t d) {
  Shape s = t.sizes().vec();
  s.insert(s.begin() + d, 1);
  return shape_as(t, s);
}
template <int ND, bool Transposed>
std::vector<TensorMeta> meta_conv(const OpCall& c) {
  Attrs a = conv_prim_attrs(c, Transposed, ND);
  bool ub = unbatched(c.name(), c.in(0), ND + 2);
  ConvShape s = conv_shape(c.name(), ub ? with_dim(c.in(0), 0) : c.in(0), c.in(1), c.in(2), a);
  Shape out = s.out_sizes();
  if (ub) out.erase(out.begin());
  return one_output(out, c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(conv1d, (meta_conv<1, false>));
KILN_REGISTER_META(conv2d, (meta_conv<2, false>));
KILN_REGISTER_META(conv3d, (meta_conv<3, false>));
KILN_REGISTER_META(conv_transpose1d, (meta_conv<1, true>));
KILN_REGISTER_META(conv_transpose2d, (meta_conv<2, true>));
KILN_REGISTER_META(conv_transpose3d, (meta_conv<3, true>));

// ---- pooling over ND = 1, 2, 3 spatial dims ----
// The 1-D pools are composites over the 2-D prims; their metas check the user's
// 1-D arguments under their own name before the decomposition adds a dim.
// A max pool's outputs: the values and their int64 indices, both of shape s.
std::vector<TensorMeta> values_and_indices(const OpCall& c, Shape s) {
  auto out = one_output(std::move(s), c.in(0).dtype(), output_device(c.inputs));
  out.push_back(out[0]);
  out[1].dtype = DType::Int64;
  return out;
}
template <int ND>
std::vector<TensorMeta> meta_max_pool(const OpCall& c) {
  const Attrs& a = c.attrs;
  return values_and_indices(
      c, pool_nd_shape(c.name(), ND, c.in(0), a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4)).out_sizes());
}
KILN_REGISTER_META(max_pool1d, meta_max_pool<1>);
KILN_REGISTER_META(max_pool2d, meta_max_pool<2>);
KILN_REGISTER_META(max_pool3d, meta_max_pool<3>);

std::vector<TensorMeta> meta_max_pool2d_backward(const OpCall& c) {
  const Attrs& a = c.attrs;
  const Tensor& x = c.in(1);
  PoolShape p = pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
  KILN_CHECK(c.in(0).sizes() == IntArrayRef(p.out_sizes()) && c.in(2).sizes() == IntArrayRef(p.out_sizes()), c.name(),
             ": expected grad_out and indices of shape ", shape_str(p.out_sizes()), ", got ",
             shape_str(c.in(0).sizes()), " and ", shape_str(c.in(2).sizes()));
  KILN_CHECK(c.in(2).dtype() == DType::Int64, c.name(), ": expected int64 indices, got ", c.in(2).dtype());
  return one_output(x.sizes().vec(), x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(max_pool2d_backward, meta_max_pool2d_backward);

// avg_pool1d has no divisor_override attr (torch's neither).
PoolNdShape avg_pool_shape(const OpCall& c, const Tensor& x, int nd) {
  const Attrs& a = c.attrs;
  if (a.size() > 5 && !a.none(5)) KILN_CHECK(a.i(5) != 0, c.name(), ": divisor must be not zero");
  return pool_nd_shape(c.name(), nd, x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3), false);
}
template <int ND>
std::vector<TensorMeta> meta_avg_pool(const OpCall& c) {
  return one_output(avg_pool_shape(c, c.in(0), ND).out_sizes(), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(avg_pool1d, meta_avg_pool<1>);
KILN_REGISTER_META(avg_pool2d, meta_avg_pool<2>);
KILN_REGISTER_META(avg_pool3d, meta_avg_pool<3>);

template <int ND>
std::vector<TensorMeta> meta_avg_pool_backward(const OpCall& c) {
  const Tensor& x = c.in(1);
  PoolNdShape p = avg_pool_shape(c, x, ND);
  KILN_CHECK(c.in(0).sizes() == IntArrayRef(p.out_sizes()), c.name(), ": expected grad_out of shape ",
             shape_str(p.out_sizes()), ", got ", shape_str(c.in(0).sizes()));
  return one_output(x.sizes().vec(), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(avg_pool2d_backward, meta_avg_pool_backward<2>);
KILN_REGISTER_META(avg_pool3d_backward, meta_avg_pool_backward<3>);

// ---- 1-D pooling: the 2-D prims over [.., C, 1, L] ----
std::vector<int64_t> one_d(const char* op, const char* what, IntArrayRef v, int64_t pad_value) {
  if (v.empty()) return {};  // stride: defaults to kernel_size
  return {pad_value, int_tuple(op, what, v, 1)[0]};
}
Attrs max_pool1d_2d_attrs(const OpCall& c) {
  const char* op = c.name();
  const Attrs& a = c.attrs;
  return Attrs{one_d(op, "kernel_size", a.ints(0), 1), one_d(op, "stride", a.ints(1), 1),
               one_d(op, "padding", a.ints(2), 0), one_d(op, "dilation", a.ints(3), 1), a.b(4)};
}
std::vector<Tensor> decomp_max_pool1d(const OpCall& c) {
  const int64_t d = c.in(0).dim() - 1;
  auto r = call_op(OpId::max_pool2d, {unsqueeze(c.in(0), d)}, max_pool1d_2d_attrs(c));
  // The 2-D indices h * L + w are w: h is always 0.
  return {squeeze(r[0], std::vector<int64_t>{d}), squeeze(r[1], std::vector<int64_t>{d})};
}
KILN_REGISTER_DECOMP(max_pool1d, decomp_max_pool1d);

Attrs avg_pool1d_2d_attrs(const OpCall& c) {
  const char* op = c.name();
  const Attrs& a = c.attrs;
  return Attrs{one_d(op, "kernel_size", a.ints(0), 1),
               one_d(op, "stride", a.ints(1), 1),
               one_d(op, "padding", a.ints(2), 0),
               a.b(3),
               a.b(4),
               std::monostate{}};
}
std::vector<Tensor> decomp_avg_pool1d(const OpCall& c) {
  const int64_t d = c.in(0).dim() - 1;
  Tensor y = call_op1(OpId::avg_pool2d, {unsqueeze(c.in(0), d)}, avg_pool1d_2d_attrs(c));
  return {squeeze(y, std::vector<int64_t>{d})};
}
KILN_REGISTER_DECOMP(avg_pool1d, decomp_avg_pool1d);

// ---- adaptive pooling over nd = 1, 2, 3 spatial dims ----
// The output shape: the input's leading (batch, channel) dims and output_size.
Shape adaptive_out_shape(const OpCall& c, int nd, bool floating_only) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, c.name(), ": expected a ", nd + 1, "-D or ", nd + 2,
             "-D input, got shape ", shape_str(x.sizes()));
  for (int64_t d = x.dim() == nd + 2 ? 1 : 0; d < x.dim(); ++d)
    KILN_CHECK(x.sizes()[d] > 0, c.name(), ": expected input to have non-zero size for non-batch dimensions, but ",
               "input has shape ", shape_str(x.sizes()));
  auto o = int_tuple(c.name(), "output_size", c.attrs.ints(0), nd);
  for (int i = 0; i < nd; ++i)
    KILN_CHECK(o[i] >= 0, c.name(), ": output_size must be non-negative, got ", shape_str(c.attrs.ints(0)));
  KILN_CHECK(!floating_only || is_floating_point(x.dtype()), c.name(), ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  Shape s(x.sizes().begin(), x.sizes().end() - nd);
  for (int i = 0; i < nd; ++i) s.push_back(o[i]);
  return s;
}

template <int ND>
std::vector<TensorMeta> meta_adaptive_avg_pool(const OpCall& c) {
  return one_output(adaptive_out_shape(c, ND, true), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(adaptive_avg_pool1d, meta_adaptive_avg_pool<1>);
KILN_REGISTER_META(adaptive_avg_pool2d, meta_adaptive_avg_pool<2>);
KILN_REGISTER_META(adaptive_avg_pool3d, meta_adaptive_avg_pool<3>);

std::vector<Tensor> decomp_adaptive_avg_pool1d(const OpCall& c) {
  Shape out = adaptive_out_shape(c, 1, true);
  const int64_t d = c.in(0).dim() - 1;
  Tensor y = call_op1(OpId::adaptive_avg_pool2d, {unsqueeze(c.in(0), d)}, {std::vector<int64_t>{1, out.back()}});
  return {squeeze(y, std::vector<int64_t>{d})};
}
KILN_REGISTER_DECOMP(adaptive_avg_pool1d, decomp_adaptive_avg_pool1d);

// torch's windows: start = floor(i*In/Out), end = ceil((i+1)*In/Out). When Out
// divides In they are a plain avg pool; otherwise one averaging matrix per
// spatial dim (differentiable, any device, no kernel of its own).
Tensor adaptive_pool_matrix(int64_t in, int64_t out, DType t, Device d) {
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = (i * in) / out, e = ((i + 1) * in + out - 1) / out;
    for (int64_t k = s; k < e; ++k) m[static_cast<size_t>(i * in + k)] = 1.0 / static_cast<double>(e - s);
  }
  return tensor<double>(m, std::vector<int64_t>{out, in}, kFloat64).to(TensorOptions(t).device(d));
}

template <int ND>
std::vector<Tensor> decomp_adaptive_avg_pool(const OpCall& c) {
  static_assert(ND == 2 || ND == 3);
  Shape out = adaptive_out_shape(c, ND, true);
  const Tensor& x = c.in(0);
  const int64_t r = x.dim();
  std::vector<int64_t> k;
  bool divides = true;
  for (int64_t d = r - ND; d < r; ++d) {
    divides = divides && out[d] > 0 && x.sizes()[d] % out[d] == 0;
    k.push_back(out[d] > 0 ? x.sizes()[d] / out[d] : 0);
  }
  if (divides)
    return {call_op1(ND == 2 ? OpId::avg_pool2d : OpId::avg_pool3d, {x},
                     {k, k, std::vector<int64_t>(ND, 0), false, true, std::monostate{}})};
  // Float16/BFloat16: averaging weights and sums in float32, rounded once.
  const bool half = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  const DType ct = half ? kFloat32 : x.dtype();
  auto P = [&](int64_t d) { return adaptive_pool_matrix(x.sizes()[d], out[d], ct, x.device()); };
  // H then W as one P_h @ x @ P_w^T, then D (P_d along dim r-3).
  Tensor y = matmul(matmul(P(r - 2), half ? to(x, ct) : x), transpose(P(r - 1), 0, 1));
  if (ND == 3) y = transpose(matmul(P(r - 3), transpose(y, r - 3, r - 2)), r - 3, r - 2);
  return {half ? to(y, x.dtype()) : y};
}
KILN_REGISTER_DECOMP(adaptive_avg_pool2d, decomp_adaptive_avg_pool<2>);
KILN_REGISTER_DECOMP(adaptive_avg_pool3d, decomp_adaptive_avg_pool<3>);

template <int ND>
std::vector<TensorMeta> meta_adaptive_max_pool(const OpCall& c) {
  return values_and_indices(c, adaptive_out_shape(c, ND, true));
}
KILN_REGISTER_META(adaptive_max_pool1d, meta_adaptive_max_pool<1>);
KILN_REGISTER_META(adaptive_max_pool2d, meta_adaptive_max_pool<2>);
KILN_REGISTER_META(adaptive_max_pool3d, meta_adaptive_max_pool<3>);

// 1-D and 2-D run as the 3-D prim with size-1 leading spatial dims: its flat
// plane indices (d * H + h) * W + w are then the 1-D / 2-D ones.
template <int ND>
std::vector<Tensor> decomp_adaptive_max_pool(const OpCall& c) {
  Shape out = adaptive_out_shape(c, ND, true);
  Tensor x = c.in(0);
  const int64_t d = x.dim() - ND;
  std::vector<int64_t> o3(3 - ND, 1), added;
  for (int i = 0; i < 3 - ND; ++i) {
    x = unsqueeze(x, d);
    added.push_back(d + i);
  }
  for (int i = 0; i < ND; ++i) o3.push_back(out[out.size() - ND + i]);
  auto r = call_op(OpId::adaptive_max_pool3d, {x}, {o3});
  return {squeeze(r[0], added), squeeze(r[1], added)};
}
KILN_REGISTER_DECOMP(adaptive_max_pool1d, decomp_adaptive_max_pool<1>);
KILN_REGISTER_DECOMP(adaptive_max_pool2d, decomp_adaptive_max_pool<2>);

// ---- im2col / col2im (F.unfold / F.fold) ----
struct FoldArgs {
  std::array<int64_t, 3> k, dil, pad, stride;
};
FoldArgs fold_args(const char* op, IntArrayRef k, IntArrayRef d, IntArrayRef p, IntArrayRef s) {
  FoldArgs f{int_tuple(op, "kernel_size", k, 2), int_tuple(op, "dilation", d, 2), int_tuple(op, "padding", p, 2),
             int_tuple(op, "stride", s, 2)};
  KILN_CHECK(f.k[0] > 0 && f.k[1] > 0, op, ": kernel size should be greater than zero, but got kernel_height: ", f.k[0],
             " kernel_width: ", f.k[1]);
  KILN_CHECK(f.dil[0] > 0 && f.dil[1] > 0, op,
             ": dilation should be greater than zero, but got dilation_height: ", f.dil[0],
             " dilation_width: ", f.dil[1]);
  KILN_CHECK(f.pad[0] >= 0 && f.pad[1] >= 0, op, ": padding should be non-negative, but got pad_height: ", f.pad[0],
             " pad_width: ", f.pad[1]);
  KILN_CHECK(f.stride[0] > 0 && f.stride[1] > 0, op,
             ": stride should be greater than zero, but got stride_height: ", f.stride[0],
             " stride_width: ", f.stride[1]);
  return f;
}
// Sliding blocks per spatial dim of an H x W (padded) image.
std::array<int64_t, 2> fold_blocks(const FoldArgs& f, int64_t H, int64_t W) {
  return {(H + 2 * f.pad[0] - (f.dil[0] * (f.k[0] - 1) + 1)) / f.stride[0] + 1,
          (W + 2 * f.pad[1] - (f.dil[1] * (f.k[1] - 1) + 1)) / f.stride[1] + 1};
}

std::vector<TensorMeta> meta_im2col(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  FoldArgs f = fold_args(op, c.attrs.ints(0), c.attrs.ints(1), c.attrs.ints(2), c.attrs.ints(3));
  KILN_CHECK((x.dim() == 3 || x.dim() == 4) && x.sizes()[x.dim() - 1] > 0 && x.sizes()[x.dim() - 2] > 0 &&
                 x.sizes()[x.dim() - 3] > 0,
             op, ": Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions ",
             "for input, but got: ", shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  const int64_t H = x.sizes()[x.dim() - 2], W = x.sizes()[x.dim() - 1];
  auto [bh, bw] = fold_blocks(f, H, W);
  KILN_CHECK(bh >= 1 && bw >= 1, op, ": Given input with spatial size (", H, ", ", W, "), kernel_size=(", f.k[0], ", ",
             f.k[1], "), dilation=(", f.dil[0], ", ", f.dil[1], "), padding=(", f.pad[0], ", ", f.pad[1],
             "), calculated shape of the array of sliding blocks as (", bh, ", ", bw,
             "), but its components must be at least one.");
  Shape s{x.sizes()[x.dim() - 3] * f.k[0] * f.k[1], bh * bw};
  if (x.dim() == 4) s.insert(s.begin(), x.sizes()[0]);
  return one_output(s, x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(im2col, meta_im2col);

std::vector<TensorMeta> meta_col2im(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  auto o = int_tuple(op, "output_size", c.attrs.ints(0), 2);
  FoldArgs f = fold_args(op, c.attrs.ints(1), c.attrs.ints(2), c.attrs.ints(3), c.attrs.ints(4));
  KILN_CHECK((x.dim() == 2 || x.dim() == 3) && x.sizes()[x.dim() - 1] > 0 && x.sizes()[x.dim() - 2] > 0, op,
             ": Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions ",
             "for input, but got: ", shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  KILN_CHECK(o[0] > 0 && o[1] > 0, op, ": output_size should be greater than zero, got ", shape_str(c.attrs.ints(0)));
  const int64_t rows = x.sizes()[x.dim() - 2], L = x.sizes()[x.dim() - 1], kk = f.k[0] * f.k[1];
  KILN_CHECK(rows % kk == 0, op, ": Expected size of input's dimension 1 to be divisible by the product of ",
             "kernel_size, but got input.size(1)=", rows, " and kernel_size=(", f.k[0], ", ", f.k[1], ")");
  auto [bh, bw] = fold_blocks(f, o[0], o[1]);
  KILN_CHECK(bh >= 1 && bw >= 1 && bh * bw == L, op, ": Given output_size=(", o[0], ", ", o[1], "), kernel_size=(",
             f.k[0], ", ", f.k[1], "), dilation=(", f.dil[0], ", ", f.dil[1], "), padding=(", f.pad[0], ", ", f.pad[1],
             "), stride=(", f.stride[0], ", ", f.stride[1],
             "), expected size of input's dimension 2 to match the calculated number of sliding blocks ", bh, " * ", bw,
             " = ", bh * bw, ", but got input.size(2)=", L, ".");
  Shape s{rows / kk, o[0], o[1]};
  if (x.dim() == 3) s.insert(s.begin(), x.sizes()[0]);
  return one_output(s, x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(col2im, meta_col2im);

// The public functions of every rank call their op with the same attrs.
Tensor conv_call(OpId op, const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                 IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return call_op1(op, {x, weight, bias}, {stride.vec(), padding.vec(), dilation.vec(), groups});
}
Tensor conv_transpose_call(OpId op, const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  return call_op1(op, {x, weight, bias}, {stride.vec(), padding.vec(), output_padding.vec(), groups, dilation.vec()});
}
std::tuple<Tensor, Tensor> max_pool_call(OpId op, const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  auto outs = call_op(op, {x}, {kernel_size.vec(), stride.vec(), padding.vec(), dilation.vec(), ceil_mode});
  return {outs[0], outs[1]};
}
Tensor avg_pool_call(OpId op, const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                     bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  Attrs a{kernel_size.vec(), stride.vec(), padding.vec(), ceil_mode, count_include_pad};
  if (op != OpId::avg_pool1d) a.push_back(opt_attr(divisor_override));  // avg_pool1d has none
  return call_op1(op, {x}, std::move(a));
}
std::tuple<Tensor, Tensor> adaptive_max_pool_call(OpId op, const Tensor& x, IntArrayRef output_size) {
  auto outs = call_op(op, {x}, {output_size.vec()});
  return {outs[0], outs[1]};
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  return conv_call(OpId::conv1d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  return conv_call(OpId::conv2d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  return conv_call(OpId::conv3d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  return conv_transpose_call(OpId::conv_transpose1d, x, weight, bias, stride, padding, output_padding, groups,
                             dilation);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  return conv_transpose_call(OpId::conv_transpose2d, x, weight, bias, stride, padding, output_padding, groups,
                             dilation);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  return conv_transpose_call(OpId::conv_transpose3d, x, weight, bias, stride, padding, output_padding, groups,
                             dilation);
}

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return max_pool_call(OpId::max_pool1d, x, kernel_size, stride, padding, dilation, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return max_pool_call(OpId::max_pool2d, x, kernel_size, stride, padding, dilation, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return max_pool_call(OpId::max_pool3d, x, kernel_size, stride, padding, dilation, ceil_mode);
}
Tensor max_pool1d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(max_pool_call(OpId::max_pool1d, x, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(max_pool_call(OpId::max_pool2d, x, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool3d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(max_pool_call(OpId::max_pool3d, x, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool1d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad) {
  return avg_pool_call(OpId::avg_pool1d, x, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_call(OpId::avg_pool2d, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override);
}
Tensor avg_pool3d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_call(OpId::avg_pool3d, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override);
}

Tensor adaptive_avg_pool1d(const Tensor& x, IntArrayRef output_size) {
  return call_op1(OpId::adaptive_avg_pool1d, {x}, {output_size.vec()});
}
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size) {
  return call_op1(OpId::adaptive_avg_pool2d, {x}, {output_size.vec()});
}
Tensor adaptive_avg_pool3d(const Tensor& x, IntArrayRef output_size) {
  return call_op1(OpId::adaptive_avg_pool3d, {x}, {output_size.vec()});
}
std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, IntArrayRef output_size) {
  return adaptive_max_pool_call(OpId::adaptive_max_pool1d, x, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, IntArrayRef output_size) {
  return adaptive_max_pool_call(OpId::adaptive_max_pool2d, x, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, IntArrayRef output_size) {
  return adaptive_max_pool_call(OpId::adaptive_max_pool3d, x, output_size);
}
Tensor adaptive_max_pool1d(const Tensor& x, IntArrayRef output_size) {
  return std::get<0>(adaptive_max_pool_call(OpId::adaptive_max_pool1d, x, output_size));
}
Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size) {
  return std::get<0>(adaptive_max_pool_call(OpId::adaptive_max_pool2d, x, output_size));
}
Tensor adaptive_max_pool3d(const Tensor& x, IntArrayRef output_size) {
  return std::get<0>(adaptive_max_pool_call(OpId::adaptive_max_pool3d, x, output_size));
}

namespace nn::functional {

namespace {
// torch.nn.functional.lp_pool{1,2}d: (sum over the window of x^p)^(1/p),
// computed as avg_pool * kernel size; sign(out) * relu(|out|) as torch writes it.
// The window is checked here so that errors name lp_pool1d/2d and the user's values.
Tensor lp_pool(const char* op, int nd, const Tensor& x, double norm_type, IntArrayRef kernel_size, IntArrayRef stride,
               bool ceil_mode) {
  Tensor xp = pow(x, norm_type);
  const PoolNdShape p = pool_nd_shape(op, nd, xp, kernel_size, stride, 0, 1, ceil_mode, false);
  int64_t window = 1;
  for (int i = 0; i < nd; ++i) window *= p.k[i];
  Tensor out = nd == 1 ? kiln::avg_pool1d(xp, kernel_size, stride, 0, ceil_mode)
                       : kiln::avg_pool2d(xp, kernel_size, stride, 0, ceil_mode);
  return pow(mul(mul(sign(out), relu(abs(out))), static_cast<double>(window)), 1.0 / norm_type);
}
}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, IntArrayRef kernel_size, IntArrayRef stride, bool ceil_mode) {
  return lp_pool("lp_pool1d", 1, x, norm_type, kernel_size, stride, ceil_mode);
}
Tensor lp_pool2d(const Tensor& x, double norm_type, IntArrayRef kernel_size, IntArrayRef stride, bool ceil_mode) {
  return lp_pool("lp_pool2d", 2, x, norm_type, kernel_size, stride, ceil_mode);
}

// torch.nn.functional.unfold / fold: the im2col / col2im ops.
Tensor unfold(const Tensor& x, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  return call_op1(OpId::im2col, {x}, {kernel_size.vec(), dilation.vec(), padding.vec(), stride.vec()});
}
Tensor fold(const Tensor& x, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
            IntArrayRef padding, IntArrayRef stride) {
  return call_op1(OpId::col2im, {x},
                  {output_size.vec(), kernel_size.vec(), dilation.vec(), padding.vec(), stride.vec()});
}

}  // namespace nn::functional

}  // namespace kiln
