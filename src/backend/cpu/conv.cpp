// CPU kernels for convolution and pooling: tensors wired to the raw kernels of
// conv_kernels.h (contiguous NCHW, float/double). Float16/BFloat16 are computed
// in float32 and rounded once.
#include <type_traits>

#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/convnd_kernels.h"
#include "core/dtype_dispatch.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn_conv.h"
#include "core/parallel.h"
#include "ops/conv_util.h"

namespace kiln::cpu {
namespace {

DType compute_type(DType t) { return (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t; }

// x as a contiguous tensor of dtype t (itself when it already is one).
Tensor dense(const Tensor& x, DType t) {
  if (!x.defined() || (x.dtype() == t && x.is_contiguous())) return x;
  Tensor out = make_tensor(x.sizes(), t, x.device());
  copy_cpu(out, x);
  return out;
}

// An output buffer of the compute type: `out` itself when it has it.
Tensor buffer_for(const Tensor& out, DType t) {
  return out.dtype() == t ? out : make_tensor(out.sizes(), t, out.device());
}
void finish(const Tensor& out, const Tensor& buf) {
  if (!buf.is_same(out)) copy_cpu(out, buf);
}

template <class F>
void visit_compute(DType t, const char* op, F&& f) {
  if (t == DType::Float32)
    f.template operator()<float>();
  else if (t == DType::Float64)
    f.template operator()<double>();
  else
    KILN_FAIL(op, ": not implemented for dtype ", t, " (expected a floating dtype)");
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T>
T* mptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// The direct convolution's parameters. For a transposed convolution these are
// those of the direct conv mapping its output to its input (Note [Transposed convolution]).
// 1-D convolutions are the H == 1 case of the 2-D kernels.
Conv2dParams direct_params(const ConvShape& s) {
  const int o = s.nd == 1 ? 0 : 1;  // index of W in the shape's arrays
  auto at = [&](const std::array<int64_t, 3>& v, int64_t one, int i) {
    return s.nd == 1 && i == 0 ? one : v[i - 1 + o];
  };
  const int64_t kH = at(s.k, 1, 0), kW = s.k[o], sh = at(s.stride, 1, 0), sw = s.stride[o];
  const int64_t ph = at(s.pad, 0, 0), pw = s.pad[o], dh = at(s.dil, 1, 0), dw = s.dil[o];
  if (!s.transposed) return {s.N, s.C_in, at(s.in, 1, 0), s.in[o], s.C_out, kH, kW, sh, sw, ph, pw, dh, dw, s.groups};
  return {s.N, s.C_out, at(s.out, 1, 0), s.out[o], s.C_in, kH, kW, sh, sw, ph, pw, dh, dw, s.groups};
}

// The same for the N-d kernels, spatial dims right-aligned in 3 (leading dims of 1).
ConvNdParams direct_nd_params(const ConvShape& s) {
  ConvNdParams p{s.N,
                 s.transposed ? s.C_out : s.C_in,
                 s.transposed ? s.C_in : s.C_out,
                 s.groups,
                 {1, 1, 1},
                 {1, 1, 1},
                 {1, 1, 1},
                 {0, 0, 0},
                 {1, 1, 1},
                 {1, 1, 1}};
  const int o = 3 - s.nd;
  for (int i = 0; i < s.nd; ++i) {
    p.in[o + i] = s.transposed ? s.out[i] : s.in[i];
    p.out[o + i] = s.transposed ? s.in[i] : s.out[i];
    p.k[o + i] = s.k[i], p.stride[o + i] = s.stride[i], p.pad[o + i] = s.pad[i], p.dil[o + i] = s.dil[i];
  }
  return p;
}

// The direct convolution in oneDNN's terms (spatial dims left-aligned, nd of them).
onednn::ConvDesc onednn_desc(const ConvShape& s) {
  onednn::ConvDesc d{
      s.nd, s.N, s.transposed ? s.C_out : s.C_in, s.transposed ? s.C_in : s.C_out, s.groups, {}, {}, {}, {}, {}, {}};
  for (int i = 0; i < s.nd; ++i) {
    d.in[i] = s.transposed ? s.out[i] : s.in[i];
    d.out[i] = s.transposed ? s.in[i] : s.out[i];
    d.k[i] = s.k[i], d.stride[i] = s.stride[i], d.pad[i] = s.pad[i], d.dil[i] = s.dil[i];
  }
  return d;
}
// Whether oneDNN may take this convolution: nothing empty (kiln's kernels write the
// zeros an empty reduction gives).
bool onednn_case(const ConvShape& s, const Tensor& x, const Tensor& w) {
  return s.N > 0 && s.C_in > 0 && s.C_out > 0 && x.numel() > 0 && w.numel() > 0 && s.out_plane() > 0;
}

// BFloat16 natively on oneDNN (CPUs with bf16 dot products), false where it does not take the
// case; kiln then computes it in float32 and rounds once, as before. A transposed conv's bias
// (forward) and gradient (backward) are kiln's float loops, so those cases go that way too.
bool convolution_bf16(const ConvShape& s, const OpCall& c, const Tensor& out) {
  using B = BFloat16;
  if (out.dtype() != DType::BFloat16 || !onednn::bf16_supported() || out.numel() == 0) return false;
  Tensor x = dense(c.in(0), DType::BFloat16), w = dense(c.in(1), DType::BFloat16);
  Tensor b = dense(c.in(2), DType::BFloat16);
  if (!onednn_case(s, x, w) || (s.transposed && b.defined())) return false;
  onednn::ConvDesc d = onednn_desc(s);
  d.bf16 = true;
  if (!s.transposed) return onednn::conv_forward(d, ptr<B>(x), ptr<B>(w), ptr<B>(b), mptr<B>(out));
  return onednn::conv_backward_data(d, ptr<B>(x), ptr<B>(w), mptr<B>(out));
}
bool convolution_backward_bf16(const ConvShape& s, const OpCall& c, std::vector<Tensor>& outs) {
  using B = BFloat16;
  const auto& mask = c.attrs.ints(6);
  if (c.in(1).dtype() != DType::BFloat16 || !onednn::bf16_supported()) return false;
  if (mask[2] && (s.transposed || !mask[1])) return false;
  for (int i = 0; i < 3; ++i)
    if (mask[i] && outs[i].dtype() != DType::BFloat16) return false;
  Tensor g = dense(c.in(0), DType::BFloat16), x = dense(c.in(1), DType::BFloat16);
  Tensor w = dense(c.in(2), DType::BFloat16);
  if (!onednn_case(s, x, w)) return false;
  onednn::ConvDesc d = onednn_desc(s);
  d.bf16 = true;
  if (mask[0]) {
    const bool ok = !s.transposed ? onednn::conv_backward_data(d, ptr<B>(g), ptr<B>(w), mptr<B>(outs[0]))
                                  : onednn::conv_forward(d, ptr<B>(g), ptr<B>(w), nullptr, mptr<B>(outs[0]));
    if (!ok) return false;
  }
  if (mask[1]) {
    const bool ok = !s.transposed ? onednn::conv_backward_weights(d, ptr<B>(x), ptr<B>(g), mptr<B>(outs[1]),
                                                                  mask[2] ? mptr<B>(outs[2]) : nullptr)
                                  : onednn::conv_backward_weights(d, ptr<B>(g), ptr<B>(x), mptr<B>(outs[1]), nullptr);
    if (!ok) return false;
  }
  return true;
}

// Every dtype torch's CPU convolutions compute: integers through the N-d kernels.
template <class F>
void visit_conv_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32:
      f.template operator()<float>();
      break;
    case DType::Float64:
      f.template operator()<double>();
      break;
    case DType::Int64:
      f.template operator()<int64_t>();
      break;
    case DType::Int32:
      f.template operator()<int32_t>();
      break;
    case DType::Int16:
      f.template operator()<int16_t>();
      break;
    case DType::Int8:
      f.template operator()<int8_t>();
      break;
    case DType::UInt8:
      f.template operator()<uint8_t>();
      break;
    default:
      KILN_FAIL(op, ": not implemented for dtype ", t);
  }
}

// Per-channel bias added to y [N, C, plane].
template <class T>
void add_bias(const T* b, int64_t N, int64_t C, int64_t plane, T* y) {
  parallel_for(0, N * C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T v = b[i % C];
      for (int64_t k = 0; k < plane; ++k) y[i * plane + k] += v;
    }
  });
}

// ---- convolution ----
void convolution_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape s = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  if (convolution_bf16(s, c, outs[0])) return;
  const DType t = compute_type(outs[0].dtype());
  Tensor x = dense(c.in(0), t), w = dense(c.in(1), t), b = dense(c.in(2), t);
  Tensor y = buffer_for(outs[0], t);
  // 1-D and 2-D floating convolutions take the tuned 2-D kernels; 3-D and integers the N-d ones.
  const bool fast = s.nd <= 2 && is_floating_point(t);
  if (t == DType::Float32 && y.numel() > 0 && onednn_case(s, x, w)) {
    const onednn::ConvDesc d = onednn_desc(s);
    bool done = false;
    if (!s.transposed) {
      done = onednn::conv_forward(d, ptr<float>(x), ptr<float>(w), ptr<float>(b), mptr<float>(y));
    } else if (onednn::conv_backward_data(d, ptr<float>(x), ptr<float>(w), mptr<float>(y))) {
      if (b.defined()) add_bias<float>(ptr<float>(b), s.N, s.C_out, s.out_plane(), mptr<float>(y));
      done = true;
    }
    if (done) {
      finish(outs[0], y);
      return;
    }
  }
  if (y.numel() > 0) {
    visit_conv_type(t, c.name(), [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {
        if (fast) {
          Conv2dParams p = direct_params(s);
          if (!s.transposed) {
            conv2d_forward<T>(p, ptr<T>(x), ptr<T>(w), ptr<T>(b), mptr<T>(y));
          } else {
            if (x.numel() == 0 || w.numel() == 0)
              std::fill(mptr<T>(y), mptr<T>(y) + y.numel(), T(0));
            else
              conv2d_backward_input<T>(p, ptr<T>(x), ptr<T>(w), mptr<T>(y));
            if (b.defined()) add_bias<T>(ptr<T>(b), s.N, s.C_out, s.out_plane(), mptr<T>(y));
          }
          return;
        }
      }
      ConvNdParams p = direct_nd_params(s);
      if (!s.transposed) {
        convnd_forward<T>(p, ptr<T>(x), ptr<T>(w), ptr<T>(b), mptr<T>(y));
      } else {
        convnd_backward_input<T>(p, ptr<T>(x), ptr<T>(w), mptr<T>(y));
        if (b.defined()) add_bias<T>(ptr<T>(b), s.N, s.C_out, s.out_plane(), mptr<T>(y));
      }
    });
  }
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(convolution, CPU, convolution_kernel);

// grad_bias[c] = sum of g over N, H, W (g contiguous [N, C, plane]).
template <class T>
void channel_sum(const T* g, int64_t N, int64_t C, int64_t plane, T* out) {
  parallel_for(0, C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t ch = lo; ch < hi; ++ch) {
      double acc = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* p = g + (n * C + ch) * plane;
        for (int64_t k = 0; k < plane; ++k) acc += static_cast<double>(p[k]);
      }
      out[ch] = static_cast<T>(acc);
    }
  });
}

void convolution_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape s = conv_shape(c.name(), c.in(1), c.in(2), Tensor(), c.attrs);
  // All outputs at once or none: a case oneDNN refuses half-way is redone below in float32.
  if (convolution_backward_bf16(s, c, outs)) return;
  const auto& mask = c.attrs.ints(6);
  const DType t = compute_type(c.in(1).dtype());
  Tensor g = dense(c.in(0), t), x = dense(c.in(1), t), w = dense(c.in(2), t);
  visit_compute(t, c.name(), [&]<class T>() {
    // d/dx of a direct conv is its transposed conv and the other way round;
    // the weight gradient swaps input and grad_output for transposed convs.
    // float32 goes to oneDNN when it takes the case (onednn_conv.h), else kiln's kernels.
    const bool dnn = std::is_same_v<T, float> && onednn_case(s, x, w);
    const onednn::ConvDesc d = onednn_desc(s);
    auto conv = [&](const T* in, const T* wt, T* out) {
      if constexpr (std::is_same_v<T, float>)
        if (dnn && onednn::conv_forward(d, in, wt, nullptr, out)) return;
      if (s.nd <= 2)
        conv2d_forward<T>(direct_params(s), in, wt, nullptr, out);
      else
        convnd_forward<T>(direct_nd_params(s), in, wt, nullptr, out);
    };
    auto conv_t = [&](const T* gy, const T* wt, T* gx) {
      if constexpr (std::is_same_v<T, float>)
        if (dnn && onednn::conv_backward_data(d, gy, wt, gx)) return;
      if (s.nd <= 2)
        conv2d_backward_input<T>(direct_params(s), gy, wt, gx);
      else
        convnd_backward_input<T>(direct_nd_params(s), gy, wt, gx);
    };
    // gb: the bias gradient from the same oneDNN pass (direct convs); false: not computed.
    auto conv_w = [&](const T* gy, const T* in, T* gw, T* gb) {
      if constexpr (std::is_same_v<T, float>)
        if (dnn && onednn::conv_backward_weights(d, in, gy, gw, gb)) return true;
      if (s.nd <= 2)
        conv2d_backward_weight<T>(direct_params(s), gy, in, gw);
      else
        convnd_backward_weight<T>(direct_nd_params(s), gy, in, gw);
      return false;
    };
    if (mask[0]) {
      Tensor gx = buffer_for(outs[0], t);
      if (gx.numel() > 0) {
        if (!s.transposed)
          conv_t(ptr<T>(g), ptr<T>(w), mptr<T>(gx));
        else
          conv(ptr<T>(g), ptr<T>(w), mptr<T>(gx));
      }
      finish(outs[0], gx);
    }
    bool bias_done = false;
    Tensor gb = mask[2] ? buffer_for(outs[2], t) : Tensor();
    if (mask[1]) {
      Tensor gw = buffer_for(outs[1], t);
      if (gw.numel() > 0) {
        if (s.N == 0 || s.C_in == 0)
          std::fill(mptr<T>(gw), mptr<T>(gw) + gw.numel(), T(0));
        else if (!s.transposed)
          bias_done = conv_w(ptr<T>(g), ptr<T>(x), mptr<T>(gw), mask[2] ? mptr<T>(gb) : nullptr) && mask[2];
        else
          conv_w(ptr<T>(x), ptr<T>(g), mptr<T>(gw), nullptr);
      }
      finish(outs[1], gw);
    }
    if (mask[2]) {
      if (!bias_done) channel_sum<T>(ptr<T>(g), s.N, s.C_out, s.out_plane(), mptr<T>(gb));
      finish(outs[2], gb);
    }
  });
}
KILN_REGISTER_KERNEL(convolution_backward, CPU, convolution_backward_kernel);

// ---- pooling ----
Pool2dParams pool_params(const PoolShape& s, bool count_include_pad, int64_t divisor) {
  Pool2dParams p{s.N,    s.C, s.H, s.W, s.kH, s.kW, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.ceil_mode, count_include_pad,
                 divisor};
  KILN_CHECK(p.H_out() == s.Ho && p.W_out() == s.Wo, "internal: pool output size disagrees with the meta function");
  return p;
}

PoolShape max_pool_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
}
PoolShape avg_pool_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3), false);
}
int64_t divisor(const OpCall& c) { return c.attrs.none(5) ? 0 : c.attrs.i(5); }

void max_pool2d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool2dParams p = pool_params(max_pool_shape(c, c.in(0)), false, 0);
  const DType t = compute_type(c.in(0).dtype());
  Tensor x = dense(c.in(0), t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) max_pool2d_forward<T>(p, ptr<T>(x), mptr<T>(y), mptr<int64_t>(outs[1]));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(max_pool2d, CPU, max_pool2d_kernel);

void max_pool2d_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool2dParams p = pool_params(max_pool_shape(c, c.in(1)), false, 0);
  const DType t = compute_type(outs[0].dtype());
  Tensor g = dense(c.in(0), t), idx = dense(c.in(2), DType::Int64), gx = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (gx.numel() > 0) max_pool2d_backward<T>(p, ptr<T>(g), ptr<int64_t>(idx), mptr<T>(gx));
  });
  finish(outs[0], gx);
}
KILN_REGISTER_KERNEL(max_pool2d_backward, CPU, max_pool2d_backward_kernel);

// An int64 avg_pool2d runs as the 3-D kernel with D = 1 (torch computes int64 avg pools).
Pool3dParams as_pool3d(const PoolShape& s, bool count_include_pad, int64_t divisor) {
  return {s.N * s.C, {1, s.H, s.W},   {1, s.kH, s.kW},   {1, s.sh, s.sw}, {0, s.ph, s.pw},
          {1, 1, 1}, {1, s.Ho, s.Wo}, count_include_pad, divisor};
}

void avg_pool2d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (c.in(0).dtype() == DType::Int64) {
    Pool3dParams p = as_pool3d(avg_pool_shape(c, c.in(0)), c.attrs.b(4), divisor(c));
    Tensor x = dense(c.in(0), DType::Int64);
    if (outs[0].numel() > 0) avg_pool3d_forward<int64_t>(p, ptr<int64_t>(x), mptr<int64_t>(outs[0]));
    return;
  }
  Pool2dParams p = pool_params(avg_pool_shape(c, c.in(0)), c.attrs.b(4), divisor(c));
  const DType t = compute_type(c.in(0).dtype());
  Tensor x = dense(c.in(0), t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) avg_pool2d_forward<T>(p, ptr<T>(x), mptr<T>(y));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(avg_pool2d, CPU, avg_pool2d_kernel);

void avg_pool2d_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool2dParams p = pool_params(avg_pool_shape(c, c.in(1)), c.attrs.b(4), divisor(c));
  const DType t = compute_type(outs[0].dtype());
  Tensor g = dense(c.in(0), t), gx = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (gx.numel() > 0) avg_pool2d_backward<T>(p, ptr<T>(g), mptr<T>(gx));
  });
  finish(outs[0], gx);
}
KILN_REGISTER_KERNEL(avg_pool2d_backward, CPU, avg_pool2d_backward_kernel);

// ---- 3-D and adaptive pooling ----
Pool3dParams pool3d_params(const PoolNdShape& s, bool count_include_pad, int64_t divisor) {
  return {s.N * s.C, s.in, s.k, s.stride, s.pad, s.dil, s.out, count_include_pad, divisor};
}
PoolNdShape max_pool3d_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_nd_shape(c.name(), 3, x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
}
PoolNdShape avg_pool3d_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_nd_shape(c.name(), 3, x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3), false);
}

void max_pool3d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool3dParams p = pool3d_params(max_pool3d_shape(c, c.in(0)), false, 0);
  const DType t = compute_type(c.in(0).dtype());
  Tensor x = dense(c.in(0), t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) max_pool3d_forward<T>(p, ptr<T>(x), mptr<T>(y), mptr<int64_t>(outs[1]));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(max_pool3d, CPU, max_pool3d_kernel);

void avg_pool3d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool3dParams p = pool3d_params(avg_pool3d_shape(c, c.in(0)), c.attrs.b(4), divisor(c));
  const DType t = compute_type(c.in(0).dtype());
  Tensor x = dense(c.in(0), t), y = buffer_for(outs[0], t);
  if (y.numel() > 0) {
    if (t == DType::Int64)
      avg_pool3d_forward<int64_t>(p, ptr<int64_t>(x), mptr<int64_t>(y));
    else
      visit_compute(t, c.name(), [&]<class T>() { avg_pool3d_forward<T>(p, ptr<T>(x), mptr<T>(y)); });
  }
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(avg_pool3d, CPU, avg_pool3d_kernel);

void avg_pool3d_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Pool3dParams p = pool3d_params(avg_pool3d_shape(c, c.in(1)), c.attrs.b(4), divisor(c));
  const DType t = compute_type(outs[0].dtype());
  Tensor g = dense(c.in(0), t), gx = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (gx.numel() > 0) avg_pool3d_backward<T>(p, ptr<T>(g), mptr<T>(gx));
  });
  finish(outs[0], gx);
}
KILN_REGISTER_KERNEL(avg_pool3d_backward, CPU, avg_pool3d_backward_kernel);

void adaptive_max_pool3d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  const int64_t r = xin.dim();
  Pool3dParams p{};
  p.planes = 1;
  for (int64_t d = 0; d < r - 3; ++d) p.planes *= xin.sizes()[d];
  for (int i = 0; i < 3; ++i) p.in[i] = xin.sizes()[r - 3 + i], p.out[i] = outs[0].sizes()[r - 3 + i];
  const DType t = compute_type(xin.dtype());
  Tensor x = dense(xin, t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) adaptive_max_pool3d_forward<T>(p, ptr<T>(x), mptr<T>(y), mptr<int64_t>(outs[1]));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(adaptive_max_pool3d, CPU, adaptive_max_pool3d_kernel);

// ---- im2col / col2im ----
// The image is x [N, C, H, W] (N = 1 when unbatched); attrs from `first`:
// kernel_size, dilation, padding, stride, each one int or a pair.
ConvNdParams fold_params(const OpCall& c, size_t first, const Tensor& image, int64_t rows_or_c, bool cols_given) {
  auto pair = [&](size_t k) { return int_pair(c.name(), "argument", c.attrs.ints(first + k)); };
  auto k = pair(0), d = pair(1), pd = pair(2), st = pair(3);
  const int64_t r = image.dim();
  ConvNdParams p{r == 4 ? image.sizes()[0] : 1,
                 0,
                 0,
                 1,
                 {1, image.sizes()[r - 2], image.sizes()[r - 1]},
                 {1, k[0], k[1]},
                 {1, st[0], st[1]},
                 {0, pd[0], pd[1]},
                 {1, d[0], d[1]},
                 {1, 1, 1}};
  p.C_in = cols_given ? rows_or_c / (k[0] * k[1]) : rows_or_c;
  p.C_out = p.C_in;
  for (int i = 1; i < 3; ++i) p.out[i] = (p.in[i] + 2 * p.pad[i] - (p.dil[i] * (p.k[i] - 1) + 1)) / p.stride[i] + 1;
  return p;
}

void im2col_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  ConvNdParams p = fold_params(c, 0, xin, xin.sizes()[xin.dim() - 3], false);
  const DType t = compute_type(xin.dtype());
  Tensor x = dense(xin, t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) im2col_nd<T>(p, ptr<T>(x), mptr<T>(y));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(im2col, CPU, im2col_kernel);

void col2im_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  ConvNdParams p = fold_params(c, 1, outs[0], xin.sizes()[xin.dim() - 2], true);
  const DType t = compute_type(xin.dtype());
  Tensor x = dense(xin, t), y = buffer_for(outs[0], t);
  visit_compute(t, c.name(), [&]<class T>() {
    if (y.numel() > 0) col2im_nd<T>(p, ptr<T>(x), mptr<T>(y));
  });
  finish(outs[0], y);
}
KILN_REGISTER_KERNEL(col2im, CPU, col2im_kernel);

}  // namespace
}  // namespace kiln::cpu
