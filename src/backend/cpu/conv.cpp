// CPU kernels for convolution and pooling: tensors wired to the raw kernels of
// conv_kernels.h (contiguous NCHW, float/double). Float16/BFloat16 are computed
// in float32 and rounded once.
#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/dtype_dispatch.h"
#include "backend/cpu/loops.h"
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
  if (t == DType::Float32) f.template operator()<float>();
  else if (t == DType::Float64) f.template operator()<double>();
  else KILN_FAIL(op, ": not implemented for dtype ", t, " (expected a floating dtype)");
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
Conv2dParams direct_params(const ConvShape& s) {
  if (!s.transposed)
    return {s.N, s.C_in, s.H, s.W, s.C_out, s.kH, s.kW, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.groups};
  return {s.N, s.C_out, s.Ho, s.Wo, s.C_in, s.kH, s.kW, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.groups};
}

// ---- convolution ----
void convolution_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape s = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  const DType t = compute_type(outs[0].dtype());
  Tensor x = dense(c.in(0), t), w = dense(c.in(1), t), b = dense(c.in(2), t);
  Tensor y = buffer_for(outs[0], t);
  if (y.numel() > 0) {
    Conv2dParams p = direct_params(s);
    visit_compute(t, c.name(), [&]<class T>() {
      if (!s.transposed) {
        conv2d_forward<T>(p, ptr<T>(x), ptr<T>(w), ptr<T>(b), mptr<T>(y));
      } else {
        if (x.numel() == 0 || w.numel() == 0) {
          std::fill(mptr<T>(y), mptr<T>(y) + y.numel(), T(0));
        } else {
          conv2d_backward_input<T>(p, ptr<T>(x), ptr<T>(w), mptr<T>(y));
        }
        if (b.defined()) {
          const T* pb = ptr<T>(b);
          T* py = mptr<T>(y);
          const int64_t plane = s.Ho * s.Wo;
          parallel_for(0, s.N * s.C_out, 1, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) {
              const T v = pb[i % s.C_out];
              for (int64_t k = 0; k < plane; ++k) py[i * plane + k] += v;
            }
          });
        }
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
  const auto& mask = c.attrs.ints(6);
  const DType t = compute_type(c.in(1).dtype());
  Tensor g = dense(c.in(0), t), x = dense(c.in(1), t), w = dense(c.in(2), t);
  Conv2dParams p = direct_params(s);
  visit_compute(t, c.name(), [&]<class T>() {
    if (mask[0]) {
      Tensor gx = buffer_for(outs[0], t);
      if (gx.numel() > 0) {
        if (!s.transposed) conv2d_backward_input<T>(p, ptr<T>(g), ptr<T>(w), mptr<T>(gx));
        else conv2d_forward<T>(p, ptr<T>(g), ptr<T>(w), nullptr, mptr<T>(gx));
      }
      finish(outs[0], gx);
    }
    if (mask[1]) {
      Tensor gw = buffer_for(outs[1], t);
      if (gw.numel() > 0) {
        if (s.N == 0 || s.C_in == 0) std::fill(mptr<T>(gw), mptr<T>(gw) + gw.numel(), T(0));
        else if (!s.transposed) conv2d_backward_weight<T>(p, ptr<T>(g), ptr<T>(x), mptr<T>(gw));
        else conv2d_backward_weight<T>(p, ptr<T>(x), ptr<T>(g), mptr<T>(gw));
      }
      finish(outs[1], gw);
    }
    if (mask[2]) {
      Tensor gb = buffer_for(outs[2], t);
      channel_sum<T>(ptr<T>(g), s.N, s.C_out, s.Ho * s.Wo, mptr<T>(gb));
      finish(outs[2], gb);
    }
  });
}
KILN_REGISTER_KERNEL(convolution_backward, CPU, convolution_backward_kernel);

// ---- pooling ----
Pool2dParams pool_params(const PoolShape& s, bool count_include_pad, int64_t divisor) {
  Pool2dParams p{s.N, s.C, s.H, s.W, s.kH, s.kW, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.ceil_mode,
                 count_include_pad, divisor};
  KILN_CHECK(p.H_out() == s.Ho && p.W_out() == s.Wo, "internal: pool output size disagrees with the meta function");
  return p;
}

PoolShape max_pool_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
}
PoolShape avg_pool_shape(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3));
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

void avg_pool2d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
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

}  // namespace
}  // namespace kiln::cpu
