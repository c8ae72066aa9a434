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

std::array<int64_t, 2> int_pair(const char* op, const char* what, IntArrayRef v) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, op, ": expected ", what, " to be a single int or a pair of ints, got ",
             v.size(), " values");
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, const Attrs& a) {
  ConvShape s{};
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", shape_str(x.sizes()));
  KILN_CHECK(w.dim() == 4, op, ": expected a 4-D weight, got weight of shape ", shape_str(w.sizes()),
             " for input of shape ", shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  KILN_CHECK(x.dtype() == w.dtype(), op, ": input type (", x.dtype(), ") and weight type (", w.dtype(),
             ") should be the same");
  auto [sh, sw] = int_pair(op, "stride", a.ints(0));
  auto [ph, pw] = int_pair(op, "padding", a.ints(1));
  auto [dh, dw] = int_pair(op, "dilation", a.ints(2));
  s.transposed = a.b(3);
  auto [oph, opw] = int_pair(op, "output_padding", a.ints(4));
  s.groups = a.i(5);
  KILN_CHECK(sh > 0 && sw > 0, op, ": non-positive stride is not supported, got stride [", sh, ", ", sw, "]");
  KILN_CHECK(ph >= 0 && pw >= 0, op, ": negative padding is not supported, got padding [", ph, ", ", pw, "]");
  KILN_CHECK(dh > 0 && dw > 0, op, ": dilation should be greater than zero, got dilation [", dh, ", ", dw, "]");
  KILN_CHECK(s.groups > 0, op, ": non-positive groups is not supported, got groups=", s.groups);
  s.sh = sh, s.sw = sw, s.ph = ph, s.pw = pw, s.dh = dh, s.dw = dw, s.oph = oph, s.opw = opw;
  s.N = x.sizes()[0];
  s.C_in = x.sizes()[1];
  s.H = x.sizes()[2];
  s.W = x.sizes()[3];
  s.kH = w.sizes()[2];
  s.kW = w.sizes()[3];
  const int64_t G = s.groups;
  if (!s.transposed) {
    KILN_CHECK(oph == 0 && opw == 0, op, ": output_padding requires transposed=true");
    KILN_CHECK(w.sizes()[0] % G == 0, op, ": given groups=", G, ", expected weight to be divisible by ", G,
               " at dimension 0, but got weight of size ", shape_str(w.sizes()), " instead");
    KILN_CHECK(s.C_in == w.sizes()[1] * G, op, ": given groups=", G, ", weight of size ", shape_str(w.sizes()),
               ", expected input", shape_str(x.sizes()), " to have ", w.sizes()[1] * G, " channels, but got ",
               s.C_in, " channels instead");
    s.C_out = w.sizes()[0];
    const int64_t eh = dh * (s.kH - 1) + 1, ew = dw * (s.kW - 1) + 1;
    const int64_t ih = s.H + 2 * ph, iw = s.W + 2 * pw;
    KILN_CHECK(ih >= eh && iw >= ew, op, ": calculated padded input size per channel: (", ih, " x ", iw,
               "). Kernel size: (", eh, " x ", ew, "). Kernel size can't be greater than actual input size");
    s.Ho = (ih - eh) / sh + 1;
    s.Wo = (iw - ew) / sw + 1;
  } else {
    KILN_CHECK(s.C_in == w.sizes()[0], op, ": given transposed=1, weight of size ", shape_str(w.sizes()),
               ", expected input", shape_str(x.sizes()), " to have ", w.sizes()[0], " channels, but got ", s.C_in,
               " channels instead");
    KILN_CHECK(s.C_in % G == 0, op, ": given groups=", G, ", expected weight to be divisible by ", G,
               " at dimension 0, but got weight of size ", shape_str(w.sizes()), " instead");
    KILN_CHECK(oph >= 0 && opw >= 0 && (oph < sh || oph < dh) && (opw < sw || opw < dw), op,
               ": output padding must be smaller than either stride or dilation, but got output_padding [", oph, ", ",
               opw, "], stride [", sh, ", ", sw, "], dilation [", dh, ", ", dw, "]");
    KILN_CHECK(oph < sh && opw < sw, op, ": not supported yet: output_padding >= stride (allowed by dilation), got ",
               "output_padding [", oph, ", ", opw, "] with stride [", sh, ", ", sw, "]");
    s.C_out = w.sizes()[1] * G;
    s.Ho = (s.H - 1) * sh - 2 * ph + dh * (s.kH - 1) + oph + 1;
    s.Wo = (s.W - 1) * sw - 2 * pw + dw * (s.kW - 1) + opw + 1;
    KILN_CHECK(s.Ho > 0 && s.Wo > 0, op, ": given input size per channel (", s.H, " x ", s.W,
               "), calculated output size per channel (", s.Ho, " x ", s.Wo, ") is too small");
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

PoolShape pool_shape(const char* op, const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode) {
  PoolShape p{};
  KILN_CHECK((x.dim() == 3 || x.dim() == 4) && x.sizes()[x.dim() - 1] > 0 && x.sizes()[x.dim() - 2] > 0 &&
                 x.sizes()[x.dim() - 3] > 0,
             op, ": expected a 3-D or 4-D (batch mode) input with non-zero channel and spatial sizes, got shape ",
             shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  auto [kh, kw] = int_pair(op, "kernel_size", kernel);
  auto [sh, sw] = stride.empty() ? std::array<int64_t, 2>{kh, kw} : int_pair(op, "stride", stride);
  auto [ph, pw] = int_pair(op, "padding", padding);
  auto [dh, dw] = int_pair(op, "dilation", dilation);
  KILN_CHECK(kh > 0 && kw > 0, op, ": kernel size should be greater than zero, but got kernel_size [", kh, ", ", kw,
             "]");
  KILN_CHECK(sh > 0 && sw > 0, op, ": stride should be greater than zero, but got stride [", sh, ", ", sw, "]");
  KILN_CHECK(dh > 0 && dw > 0, op, ": dilation should be greater than zero, but got dilation [", dh, ", ", dw, "]");
  KILN_CHECK(ph >= 0 && pw >= 0 && ph <= kh / 2 && pw <= kw / 2, op,
             ": pad should be at most half of effective kernel size, but got padding [", ph, ", ", pw,
             "] for kernel_size [", kh, ", ", kw, "]");
  p.batched = x.dim() == 4;
  const int64_t o = p.batched ? 1 : 0;
  p.N = p.batched ? x.sizes()[0] : 1;
  p.C = x.sizes()[o];
  p.H = x.sizes()[o + 1];
  p.W = x.sizes()[o + 2];
  p.kH = kh, p.kW = kw, p.sh = sh, p.sw = sw, p.ph = ph, p.pw = pw, p.dh = dh, p.dw = dw;
  p.ceil_mode = ceil_mode;
  // torch's pooling_output_shape: in ceil mode the last window must start inside the input or left padding.
  auto out = [&](int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d) {
    const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t n = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (n - 1) * s >= in + pad) --n;
    return n;
  };
  p.Ho = out(p.H, kh, sh, ph, dh);
  p.Wo = out(p.W, kw, sw, pw, dw);
  KILN_CHECK(p.Ho >= 1 && p.Wo >= 1, op, ": given input size (", p.C, "x", p.H, "x", p.W,
             "), calculated output size (", p.C, "x", p.Ho, "x", p.Wo, ") is too small");
  return p;
}

namespace {

// ---- convolution prims ----
std::vector<TensorMeta> meta_convolution(const OpCall& c) {
  ConvShape s = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  return one_output({s.N, s.C_out, s.Ho, s.Wo}, c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(convolution, meta_convolution);

// Outputs not asked for by output_mask get shape [0].
std::vector<TensorMeta> meta_convolution_backward(const OpCall& c) {
  const Tensor& g = c.in(0);
  const Tensor& x = c.in(1);
  const Tensor& w = c.in(2);
  ConvShape s = conv_shape(c.name(), x, w, Tensor(), c.attrs);
  KILN_CHECK(g.dim() == 4 && g.sizes() == IntArrayRef(Shape{s.N, s.C_out, s.Ho, s.Wo}), c.name(),
             ": expected grad_out of shape ", shape_str(Shape{s.N, s.C_out, s.Ho, s.Wo}), ", got ",
             shape_str(g.sizes()));
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
std::vector<int64_t> pair_vec(const char* op, const char* what, IntArrayRef v) {
  auto p = int_pair(op, what, v);
  return {p[0], p[1]};
}

// conv1d/conv2d accept unbatched input (one fewer dim); returns whether it was.
bool unbatched(const char* op, const Tensor& x, int64_t batched_dim) {
  KILN_CHECK(x.dim() == batched_dim || x.dim() == batched_dim - 1, op, ": expected ", batched_dim - 1,
             "-D (unbatched) or ", batched_dim, "-D (batched) input, but got input of shape ", shape_str(x.sizes()));
  return x.dim() == batched_dim - 1;
}

// The `convolution` attrs of conv2d / conv_transpose2d, checked in the
// decomposition's order (shared by the meta function, so errors agree).
Attrs conv2d_prim_attrs(const OpCall& c, bool transposed) {
  const char* op = c.name();
  if (!transposed)  // (stride, padding, dilation, groups)
    return Attrs{pair_vec(op, "stride", c.attrs.ints(0)),
                 pair_vec(op, "padding", c.attrs.ints(1)),
                 pair_vec(op, "dilation", c.attrs.ints(2)),
                 false,
                 std::vector<int64_t>{0, 0},
                 c.attrs.i(3)};
  // (stride, padding, output_padding, groups, dilation)
  return Attrs{pair_vec(op, "stride", c.attrs.ints(0)),         pair_vec(op, "padding", c.attrs.ints(1)),
               pair_vec(op, "dilation", c.attrs.ints(4)),       true,
               pair_vec(op, "output_padding", c.attrs.ints(2)), c.attrs.i(3)};
}

// conv1d runs as a conv2d over [N, C, 1, L] with a [C_out, C_in/groups, 1, k] weight.
Attrs conv1d_prim_attrs(const OpCall& c) {
  const char* op = c.name();
  KILN_CHECK(c.in(1).dim() == 3, op, ": expected a 3-D weight [C_out, C_in/groups, k], got shape ",
             shape_str(c.in(1).sizes()));
  auto one = [&](size_t k, const char* what) {
    const auto& v = c.attrs.ints(k);
    KILN_CHECK(v.size() == 1, op, ": expected ", what, " to be a single int, got ", v.size(), " values");
    return v[0];
  };
  return Attrs{std::vector<int64_t>{1, one(0, "stride")},
               std::vector<int64_t>{0, one(1, "padding")},
               std::vector<int64_t>{1, one(2, "dilation")},
               false,
               std::vector<int64_t>{0, 0},
               c.attrs.i(3)};
}

Tensor conv2d_impl(const OpCall& c, bool transposed) {
  bool ub = unbatched(c.name(), c.in(0), 4);
  Tensor x = ub ? unsqueeze(c.in(0), 0) : c.in(0);
  Tensor y = call_op1(OpId::convolution, {x, c.in(1), c.in(2)}, conv2d_prim_attrs(c, transposed));
  return ub ? squeeze(y, std::vector<int64_t>{0}) : y;
}

Tensor conv1d_impl(const OpCall& c) {
  bool ub = unbatched(c.name(), c.in(0), 3);
  Tensor x = ub ? unsqueeze(c.in(0), 0) : c.in(0);
  Attrs a = conv1d_prim_attrs(c);
  Tensor y = call_op1(OpId::convolution, {unsqueeze(x, 2), unsqueeze(c.in(1), 2), c.in(2)}, a);
  y = squeeze(y, std::vector<int64_t>{2});
  return ub ? squeeze(y, std::vector<int64_t>{0}) : y;
}

std::vector<Tensor> decomp_conv2d(const OpCall& c) { return {conv2d_impl(c, false)}; }
std::vector<Tensor> decomp_conv_transpose2d(const OpCall& c) { return {conv2d_impl(c, true)}; }
std::vector<Tensor> decomp_conv1d(const OpCall& c) { return {conv1d_impl(c)}; }
KILN_REGISTER_DECOMP(conv2d, decomp_conv2d);
KILN_REGISTER_DECOMP(conv_transpose2d, decomp_conv_transpose2d);
KILN_REGISTER_DECOMP(conv1d, decomp_conv1d);

// The composites' metas run the prim's shape checks on the shapes their
// decompositions pass it (storage-less stand-ins: a meta function runs no op),
// under the prim's name, so errors read as they do from the decomposition.
Tensor shape_as(const Tensor& t, Shape sizes) {
  return make_meta_tensor(sizes, contiguous_strides(sizes), t.dtype(), Device(DeviceType::Meta));
}
Tensor with_dim(const Tensor& t, int64_t d) {
  Shape s = t.sizes().vec();
  s.insert(s.begin() + d, 1);
  return shape_as(t, s);
}
std::vector<TensorMeta> meta_conv2d_common(const OpCall& c, bool transposed) {
  bool ub = unbatched(c.name(), c.in(0), 4);
  Attrs a = conv2d_prim_attrs(c, transposed);
  ConvShape s = conv_shape(op_name(OpId::convolution), ub ? with_dim(c.in(0), 0) : c.in(0), c.in(1), c.in(2), a);
  Shape out{s.N, s.C_out, s.Ho, s.Wo};
  if (ub) out.erase(out.begin());
  return one_output(out, c.in(0).dtype(), output_device(c.inputs));
}
std::vector<TensorMeta> meta_conv2d(const OpCall& c) { return meta_conv2d_common(c, false); }
std::vector<TensorMeta> meta_conv_transpose2d(const OpCall& c) { return meta_conv2d_common(c, true); }
std::vector<TensorMeta> meta_conv1d(const OpCall& c) {
  bool ub = unbatched(c.name(), c.in(0), 3);
  Attrs a = conv1d_prim_attrs(c);
  Tensor x = with_dim(ub ? with_dim(c.in(0), 0) : c.in(0), 2);
  ConvShape s = conv_shape(op_name(OpId::convolution), x, with_dim(c.in(1), 2), c.in(2), a);
  Shape out{s.N, s.C_out, s.Wo};
  if (ub) out.erase(out.begin());
  return one_output(out, c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(conv2d, meta_conv2d);
KILN_REGISTER_META(conv_transpose2d, meta_conv_transpose2d);
KILN_REGISTER_META(conv1d, meta_conv1d);

// ---- pooling prims ----
std::vector<TensorMeta> meta_max_pool2d(const OpCall& c) {
  const Attrs& a = c.attrs;
  PoolShape p = pool_shape(c.name(), c.in(0), a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
  Device d = output_device(c.inputs);
  auto out = one_output(p.out_sizes(), c.in(0).dtype(), d);
  out.push_back(out[0]);
  out[1].dtype = DType::Int64;
  return out;
}
KILN_REGISTER_META(max_pool2d, meta_max_pool2d);

std::vector<TensorMeta> meta_max_pool2d_backward(const OpCall& c) {
  const Attrs& a = c.attrs;
  const Tensor& x = c.in(1);
  PoolShape p = pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
  KILN_CHECK(c.in(0).sizes() == IntArrayRef(p.out_sizes()) && c.in(2).sizes() == IntArrayRef(p.out_sizes()),
             c.name(), ": expected grad_out and indices of shape ", shape_str(p.out_sizes()), ", got ",
             shape_str(c.in(0).sizes()), " and ", shape_str(c.in(2).sizes()));
  KILN_CHECK(c.in(2).dtype() == DType::Int64, c.name(), ": expected int64 indices, got ", c.in(2).dtype());
  return one_output(x.sizes().vec(), x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(max_pool2d_backward, meta_max_pool2d_backward);

PoolShape avg_pool_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  if (!a.none(5))
    KILN_CHECK(a.i(5) != 0, c.name(), ": divisor must be not zero");
  return pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3));
}

std::vector<TensorMeta> meta_avg_pool2d(const OpCall& c) {
  return one_output(avg_pool_shape(c, c.in(0)).out_sizes(), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(avg_pool2d, meta_avg_pool2d);

std::vector<TensorMeta> meta_avg_pool2d_backward(const OpCall& c) {
  const Tensor& x = c.in(1);
  PoolShape p = avg_pool_shape(c, x);
  KILN_CHECK(c.in(0).sizes() == IntArrayRef(p.out_sizes()), c.name(), ": expected grad_out of shape ",
             shape_str(p.out_sizes()), ", got ", shape_str(c.in(0).sizes()));
  return one_output(x.sizes().vec(), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(avg_pool2d_backward, meta_avg_pool2d_backward);

// ---- adaptive_avg_pool2d ----
// torch's windows: start = floor(i*In/Out), end = ceil((i+1)*In/Out). When Out
// divides In they are a plain avg_pool2d; otherwise out = P_h @ x @ P_w^T with
// averaging matrices (differentiable, any device, no kernel of its own).
Tensor adaptive_pool_matrix(int64_t in, int64_t out, DType t, Device d) {
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = (i * in) / out, e = ((i + 1) * in + out - 1) / out;
    for (int64_t k = s; k < e; ++k) m[static_cast<size_t>(i * in + k)] = 1.0 / static_cast<double>(e - s);
  }
  return tensor<double>(m, std::vector<int64_t>{out, in}, kFloat64).to(TensorOptions(t).device(d));
}

std::vector<TensorMeta> meta_adaptive_avg_pool2d(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto [oh, ow] = int_pair(c.name(), "output_size", c.attrs.ints(0));
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, c.name(), ": expected a 3-D or 4-D input, got shape ",
             shape_str(x.sizes()));
  for (int64_t d = 1; d < x.dim(); ++d)
    KILN_CHECK(x.sizes()[d] > 0, c.name(), ": expected input to have non-zero size for non-batch dimensions, but ",
               "input has shape ", shape_str(x.sizes()));
  KILN_CHECK(oh >= 0 && ow >= 0, c.name(), ": output_size must be non-negative, got [", oh, ", ", ow, "]");
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": not implemented for dtype ", x.dtype(),
             " (expected a floating dtype)");
  Shape s(x.sizes().begin(), x.sizes().end() - 2);
  s.push_back(oh);
  s.push_back(ow);
  return one_output(s, x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(adaptive_avg_pool2d, meta_adaptive_avg_pool2d);

std::vector<Tensor> decomp_adaptive_avg_pool2d(const OpCall& c) {
  Shape out = meta_adaptive_avg_pool2d(c)[0].sizes;
  const Tensor& x = c.in(0);
  const int64_t H = x.sizes()[x.dim() - 2], W = x.sizes()[x.dim() - 1];
  const int64_t oh = out[out.size() - 2], ow = out[out.size() - 1];
  if (oh > 0 && ow > 0 && H % oh == 0 && W % ow == 0) {
    std::vector<int64_t> k{H / oh, W / ow};
    return {call_op1(OpId::avg_pool2d, {x}, {k, k, std::vector<int64_t>{0, 0}, false, true, std::monostate{}})};
  }
  // Float16/BFloat16: averaging weights and sums in float32, rounded once.
  const bool half = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  const DType ct = half ? kFloat32 : x.dtype();
  Tensor ph = adaptive_pool_matrix(H, oh, ct, x.device());
  Tensor pw = adaptive_pool_matrix(W, ow, ct, x.device());
  Tensor r = matmul(matmul(ph, half ? to(x, ct) : x), transpose(pw, 0, 1));
  return {half ? to(r, x.dtype()) : r};
}
KILN_REGISTER_DECOMP(adaptive_avg_pool2d, decomp_adaptive_avg_pool2d);

Attrs conv_attrs(IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return Attrs{stride.vec(), padding.vec(), dilation.vec(), groups};
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  return call_op1(OpId::conv1d, {x, weight, bias}, conv_attrs(stride, padding, dilation, groups));
}
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  return call_op1(OpId::conv2d, {x, weight, bias}, conv_attrs(stride, padding, dilation, groups));
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  return call_op1(OpId::conv_transpose2d, {x, weight, bias},
                  {stride.vec(), padding.vec(), output_padding.vec(), groups, dilation.vec()});
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  auto outs = call_op(OpId::max_pool2d, {x},
                      {kernel_size.vec(), stride.vec(), padding.vec(), dilation.vec(), ceil_mode});
  return {outs[0], outs[1]};
}
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return call_op1(OpId::avg_pool2d, {x},
                  {kernel_size.vec(), stride.vec(), padding.vec(), ceil_mode, count_include_pad,
                   opt_attr(divisor_override)});
}
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size) {
  return call_op1(OpId::adaptive_avg_pool2d, {x}, {output_size.vec()});
}

}  // namespace kiln
