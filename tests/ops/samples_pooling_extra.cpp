// Samples for the ops of src/ops/pooling_extra.cpp (Note [Op samples]):
// channel_shuffle, max_unpool2d and fractional_max_pool2d against naive loops written from torch's
// kernels (fractional_max_pool2d's windows with torch's generate_intervals, in the input's type).
#include <cmath>

#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

// ---- channel_shuffle: out[n, j * g + i] = in[n, i * k + j], k = C / g ----
Ref channel_shuffle_ref(const Ref& x, int64_t g) {
  Ref out(x.shape);
  int64_t n = x.shape[0], c = x.shape[1], k = c / g, inner = x.numel() / std::max<int64_t>(n * c, 1);
  if (x.numel() == 0) return out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t e = 0; e < inner; ++e)
          out.v[(b * c + j * g + i) * inner + e] = x.v[(b * c + i * k + j) * inner + e];
  return out;
}
std::vector<OpSample> channel_shuffle_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t g, bool module = false) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) {
      return TensorList{module ? kiln::nn::ChannelShuffle(g).forward(in[0]) : channel_shuffle(in[0], g)};
    };
    s.reference = [=](const TensorList& in) {
      return TensorList{channel_shuffle_ref(Ref::of(in[0]), g).to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : {kFloat32, kFloat64, DType::BFloat16, kInt64, DType::Bool})
    add("[2,6,3,4] groups 2 " + dname(t), make_input({2, 6, 3, 4}, t, 3700), 2);
  add("[2,6,5] groups 3", make_input({2, 6, 5}, kFloat64, 3701), 3);
  add("noncontig [3,4,2,3] groups 2", make_input({3, 4, 2, 3}, kFloat64, 3702, -2, 2, true), 2);
  add("groups 1 (identity)", make_input({2, 4, 3}, kFloat32, 3703), 1);
  add("groups C (identity)", make_input({2, 4, 3}, kFloat32, 3704), 4);
  add("empty batch [0,4,3]", make_input({0, 4, 3}, kFloat32, 3705), 2);
  add("5-D [1,6,2,2,2] groups 3", make_input({1, 6, 2, 2, 2}, kFloat64, 3706), 3);
  add("nn::ChannelShuffle(2)", make_input({1, 4, 2, 2}, kFloat64, 3707), 2, true);
  return v;
}
std::vector<ErrorSample> channel_shuffle_errors() {
  return {{"2-D input",
           [] {
             channel_shuffle(make_input({2, 4}, kFloat32, 1), 2);
           },
           "channel_shuffle: expects input to have at least 3 dimensions, but got input of shape [2, 4]"},
          {"groups 0",
           [] {
             channel_shuffle(make_input({2, 4, 3}, kFloat32, 1), 0);
           },
           "channel_shuffle: Number of groups to divide channels in must be positive"},
          {"not divisible",
           [] {
             channel_shuffle(make_input({2, 5, 3}, kFloat32, 1), 2);
           },
           "channel_shuffle: Number of channels must be divisible by groups. Got 5 channels and 2 groups"}};
}
KILN_OP_SAMPLES(channel_shuffle, channel_shuffle_samples, channel_shuffle_errors);

// ---- max_unpool2d ----
// Distinct indices as a kernel x kernel, stride-kernel max pool produces: window (h, w) picks
// (h * k + dh) * oW + (w * k + dw), dh and dw from the seed.
Tensor pool_indices(const Shape& in, int64_t k, int64_t ow, uint64_t seed) {
  Ref r(in);
  int64_t h = in[in.size() - 2], w = in.back();
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t hw = i % (h * w), y = hw / w, x = hw % w;
    uint64_t z = (seed + static_cast<uint64_t>(i)) * 2654435761u;
    int64_t dh = static_cast<int64_t>((z >> 7) % static_cast<uint64_t>(k));
    int64_t dw = static_cast<int64_t>((z >> 17) % static_cast<uint64_t>(k));
    r.v[i] = static_cast<double>((y * k + dh) * ow + x * k + dw);
  }
  return r.to(kInt64);
}
Ref max_unpool2d_ref(const Ref& x, const Ref& idx, int64_t oh, int64_t ow) {
  Shape os = x.shape;
  os[os.size() - 2] = oh;
  os.back() = ow;
  Ref out(os);
  int64_t plane = x.shape[x.dim() - 2] * x.shape.back();
  for (int64_t i = 0; i < x.numel(); ++i) out.v[(i / plane) * oh * ow + static_cast<int64_t>(idx.v[i])] = x.v[i];
  return out;
}
std::vector<OpSample> max_unpool2d_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t k, std::optional<std::vector<int64_t>> output_size, int64_t oh,
                 int64_t ow, bool module = false) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, pool_indices(x.sizes().vec(), k, ow, 3800 + v.size())};
    s.fn = [=](const TensorList& in) {
      if (module) return TensorList{kiln::nn::MaxUnpool2d(k).forward(in[0], in[1], output_size)};
      return TensorList{max_unpool2d(in[0], in[1], k, {}, 0, output_size)};
    };
    s.reference = [=](const TensorList& in) {
      return TensorList{max_unpool2d_ref(Ref::of(in[0]), Ref::of(in[1]), oh, ow).to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : {kFloat32, kFloat64, DType::BFloat16})
    add("[2,3,2,3] k2 " + dname(t), make_input({2, 3, 2, 3}, t, 3801), 2, std::nullopt, 4, 6);
  add("3-D [2,3,2] k3", make_input({2, 3, 2}, kFloat64, 3802), 3, std::nullopt, 9, 6);
  add("noncontig [2,2,3,2] k2", make_input({2, 2, 3, 2}, kFloat64, 3803, -2, 2, true), 2, std::nullopt, 6, 4);
  add("output_size [5,7] (odd input sizes)", make_input({1, 2, 2, 3}, kFloat64, 3804), 2, std::vector<int64_t>{5, 7}, 5,
      7);
  add("output_size [N,C,5,7]", make_input({1, 2, 2, 3}, kFloat32, 3805), 2, std::vector<int64_t>{1, 2, 5, 7}, 5, 7);
  add("empty batch [0,2,2,2]", make_input({0, 2, 2, 2}, kFloat32, 3806), 2, std::nullopt, 4, 4);
  add("nn::MaxUnpool2d(2)", make_input({1, 2, 2, 2}, kFloat64, 3807), 2, std::nullopt, 4, 4, true);
  {
    OpSample s;  // round trip: unpool(max_pool2d_with_indices(x)) keeps each window's max in place
    s.name = "round trip with max_pool2d_with_indices";
    Tensor x = make_input({2, 3, 4, 6}, kFloat64, 3808);
    auto [o, i] = max_pool2d_with_indices(x, 2);
    s.inputs = {o, i};
    s.fn = [](const TensorList& in) { return TensorList{max_unpool2d(in[0], in[1], 2)}; };
    s.reference = [](const TensorList& in) {
      return TensorList{max_unpool2d_ref(Ref::of(in[0]), Ref::of(in[1]), 4, 6).to(kFloat64)};
    };
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> max_unpool2d_errors() {
  auto x = [] { return make_input({1, 1, 2, 2}, kFloat32, 1); };
  auto idx = [] { return kiln::tensor<int64_t>({0, 3, 8, 15}, {1, 1, 2, 2}); };
  return {{"int32 indices", [=] { max_unpool2d(x(), idx().to(kInt32), 2); },
           "max_unpool2d: elements in indices should be type int64 but got: int32"},
          {"shape mismatch",
           [=] {
             max_unpool2d(make_input({1, 1, 2, 3}, kFloat32, 1), idx(), 2);
           },
           "max_unpool2d: Expected shape of indices to be same as that of the input tensor ([1, 1, 2, 3])"},
          {"2-D input",
           [] {
             max_unpool2d(make_input({2, 2}, kFloat32, 1), kiln::tensor<int64_t>({0, 1, 2, 3}, {2, 2}), 2);
           },
           "max_unpool2d: Input to max_unpooling2d should be a 3d or 4d Tensor"},
          {"index outside the plane",
           [=] {
             max_unpool2d(x(), kiln::tensor<int64_t>({0, 3, 8, 16}, {1, 1, 2, 2}), 2);
           },
           "max_unpool2d: Found an invalid max index: 16 (output volumes are of size 4x4)"},
          {"negative index",
           [=] {
             max_unpool2d(x(), kiln::tensor<int64_t>({0, -1, 8, 9}, {1, 1, 2, 2}), 2);
           },
           "max_unpool2d: Found an invalid max index: -1"},
          {"output_size out of range",
           [=] {
             max_unpool2d(x(), idx(), 2, {}, 0, std::vector<int64_t>{6, 4});
           },
           "max_unpool2d: invalid output_size [6, 4] (dim 0 must be between 2 and 6)"},
          {"output_size of 3",
           [=] {
             max_unpool2d(x(), idx(), 2, {}, 0, std::vector<int64_t>{1, 4, 4});
           },
           "max_unpool2d: output_size should be a sequence containing 2 or 4 elements"}};
}
KILN_OP_SAMPLES(max_unpool2d, max_unpool2d_samples, max_unpool2d_errors);

// ---- fractional_max_pool2d: torch's generate_intervals and window max, in T (float or double) ----
template <class T>
std::vector<int64_t> intervals_ref(T sample, int64_t in, int64_t out, int64_t pool) {
  std::vector<int64_t> seq(static_cast<size_t>(out));
  if (out > 1) {
    T alpha = static_cast<T>(in - pool) / static_cast<T>(out - 1);
    for (int64_t i = 0; i < out - 1; ++i)
      seq[i] = static_cast<int>((static_cast<T>(i) + sample) * alpha) - static_cast<int>(sample * alpha);
  }
  if (out > 0) seq[out - 1] = in - pool;
  return seq;
}
// Returns {out, indices}; 3-D input as one batch.
std::pair<Ref, Ref> fractional_ref(const Ref& x, const Ref& rs, bool dbl, int64_t kh, int64_t kw, int64_t oh,
                                   int64_t ow) {
  int64_t nd = x.dim(), h = x.shape[nd - 2], w = x.shape[nd - 1];
  int64_t planes = x.numel() / (h * w);
  Shape os = x.shape;
  os[nd - 2] = oh;
  os[nd - 1] = ow;
  Ref out(os), idx(os);
  for (int64_t p = 0; p < planes; ++p) {
    double s0 = rs.v[p * 2], s1 = rs.v[p * 2 + 1];
    auto sw = dbl ? intervals_ref<double>(s0, w, ow, kw) : intervals_ref<float>(static_cast<float>(s0), w, ow, kw);
    auto sh = dbl ? intervals_ref<double>(s1, h, oh, kh) : intervals_ref<float>(static_cast<float>(s1), h, oh, kh);
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -kInf;
        int64_t bi = sh[i] * w + sw[j];
        for (int64_t a = sh[i]; a < sh[i] + kh; ++a)
          for (int64_t b = sw[j]; b < sw[j] + kw; ++b) {
            double val = x.v[p * h * w + a * w + b];
            if (val > best) {
              best = val;
              bi = a * w + b;
            }
          }
        out.v[(p * oh + i) * ow + j] = best;
        idx.v[(p * oh + i) * ow + j] = static_cast<double>(bi);
      }
  }
  return {out, idx};
}
std::vector<OpSample> fractional_max_pool2d_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t kh, int64_t kw, int64_t oh, int64_t ow, bool grad = true) {
    OpSample s;
    s.name = std::move(name);
    int64_t n = x.dim() == 4 ? x.sizes()[0] : 1, c = x.sizes()[x.dim() - 3];
    s.inputs = {x, make_input({n, c, 2}, x.dtype(), 3900 + v.size(), 0, 1)};
    s.fn = [=](const TensorList& in) {
      auto [o, i] =
          fractional_max_pool2d_with_indices(in[0], {kh, kw}, std::vector<int64_t>{oh, ow}, std::nullopt, in[1]);
      return TensorList{o, i};
    };
    s.reference = [=](const TensorList& in) {
      auto [o, i] = fractional_ref(Ref::of(in[0]), Ref::of(in[1]), in[0].dtype() == kFloat64, kh, kw, oh, ow);
      return TensorList{o.to(in[0].dtype()), i.to(kInt64)};
    };
    s.check_grad = grad;
    s.grad_inputs = {0};
    v.push_back(s);
  };
  add("[2,3,7,9] k2 -> [4,5] float32", make_input({2, 3, 7, 9}, kFloat32, 3901), 2, 2, 4, 5);
  add("[2,3,7,9] k2 -> [4,5] float64", make_input({2, 3, 7, 9}, kFloat64, 3902), 2, 2, 4, 5);
  add("3-D [3,8,8] k3 -> [3,3] float64", make_input({3, 8, 8}, kFloat64, 3903), 3, 3, 3, 3);
  add("k [2,3] -> [5,4] noncontig", make_input({1, 2, 8, 9}, kFloat64, 3904, -2, 2, true), 2, 3, 5, 4);
  add("largest output (in - k + 1)", make_input({1, 2, 6, 5}, kFloat64, 3905), 2, 2, 5, 4);
  add("output 1x1", make_input({1, 2, 5, 5}, kFloat64, 3906), 3, 3, 1, 1);
  add("bfloat16 [1,2,6,6] k2 -> [3,3]", make_input({1, 2, 6, 6}, DType::BFloat16, 3907), 2, 2, 3, 3, false);
  add("empty batch [0,2,5,5]", make_input({0, 2, 5, 5}, kFloat32, 3908), 2, 2, 3, 3, false);
  {
    OpSample s;  // output_ratio, samples drawn from a generator: shapes and windows' maxima
    s.name = "output_ratio 0.5, drawn samples; nn::FractionalMaxPool2d";
    s.inputs = {make_input({2, 3, 10, 8}, kFloat32, 3909)};
    s.fn = [](const TensorList& in) {
      Generator g(3);
      auto [o, i] = fractional_max_pool2d_with_indices(in[0], 3, std::nullopt, std::vector<double>{0.5}, {}, &g);
      kiln::nn::FractionalMaxPool2d m(3, std::nullopt, std::vector<double>{0.5, 0.5});
      EXPECT_EQ(m.forward(in[0]).sizes().vec(), (Shape{2, 3, 5, 4}));
      return TensorList{o, i};
    };
    s.compare_values = false;
    s.check_grad = false;
    s.check = [x = s.inputs[0]](const TensorList& o) {
      EXPECT_EQ(o[0].sizes().vec(), (Shape{2, 3, 5, 4}));
      auto xv = x.to_vector<double>(), ov = o[0].to_vector<double>();
      auto iv = o[1].to_vector<int64_t>();
      for (size_t k = 0; k < ov.size(); ++k) EXPECT_EQ(ov[k], xv[(k / 20) * 80 + iv[k]]) << "value at its index";
    };
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> fractional_max_pool2d_errors() {
  auto rs = [](int64_t n, int64_t c, DType t = kFloat32) { return make_input({n, c, 2}, t, 1, 0, 1); };
  auto f = [](const Tensor& x, int64_t k, int64_t o, const Tensor& r) {
    return fractional_max_pool2d(x, k, std::vector<int64_t>{o, o}, std::nullopt, r);
  };
  return {{"2-D input",
           [=] {
             f(make_input({5, 5}, kFloat32, 1), 2, 2, rs(1, 5));
           },
           "fractional_max_pool2d: Expected 3D or 4D tensor, but got: [5, 5]"},
          {"pool too large",
           [=] {
             f(make_input({1, 1, 5, 5}, kFloat32, 1), 3, 4, rs(1, 1));
           },
           "fractional_max_pool2d: pool height 3 too large relative to input height 5"},
          {"samples of another shape",
           [=] {
             f(make_input({2, 3, 5, 5}, kFloat32, 1), 2, 2, rs(1, 3));
           },
           "fractional_max_pool2d: expected _random_samples of shape [2, 3, 2] for input of shape [2, 3, 5, 5], got "
           "[1, 3, 2]"},
          {"samples of another dtype",
           [=] {
             f(make_input({1, 3, 5, 5}, kFloat32, 1), 2, 2, rs(1, 3, kFloat64));
           },
           "fractional_max_pool2d: expected _random_samples of the input's dtype float32, got float64"},
          {"integer input",
           [=] {
             f(make_input({1, 1, 5, 5}, kInt64, 1), 2, 2, rs(1, 1, kInt64));
           },
           "fractional_max_pool2d: expected a floating point input, got dtype int64"},
          {"empty plane",
           [=] {
             f(make_input({1, 1, 0, 5}, kFloat32, 1), 1, 1, rs(1, 1));
           },
           "fractional_max_pool2d: Expected input to have non-zero size for non-batch dimensions"},
          {"neither output_size nor output_ratio",
           [] {
             fractional_max_pool2d(make_input({1, 1, 5, 5}, kFloat32, 1), 2);
           },
           "fractional_max_pool2d: requires specifying either an output_size or an output_ratio"}};
}
KILN_OP_SAMPLES(fractional_max_pool2d, fractional_max_pool2d_samples, fractional_max_pool2d_errors);

}  // namespace
}  // namespace kiln::test
