// Samples for creation and random ops (Note [Op samples]). Random ops are
// checked against the Philox stream contract computed here from core/philox.h
// (Note [Philox stream]), plus statistics, ranges and determinism.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/philox.h"
#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kAll = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
const std::vector<DType> kFloats = {kFloat16, kBFloat16, kFloat32, kFloat64};
const std::vector<Shape> kShapes = {{2, 3}, {}, {0, 4}, {5}};

std::string dname(DType t) { return std::string(dtype_name(t)); }

Ref filled(const Shape& s, double v) { return Ref(s, v); }
OpSample value_sample(std::string name, OpFn fn, OpFn ref) {
  OpSample s;
  s.name = std::move(name);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  return s;
}
OpSample check_sample(std::string name, OpFn fn, std::function<void(const TensorList&)> check) {
  OpSample s;
  s.name = std::move(name);
  s.fn = std::move(fn);
  s.check = std::move(check);
  s.compare_values = false;
  return s;
}
ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}

// ---- empty / full / zeros / ones ----
std::vector<OpSample> samples_empty() {
  std::vector<OpSample> out;
  for (DType t : kAll)
    for (const Shape& s : kShapes) {
      OpSample smp = value_sample(dname(t) + " " + shape_str(s), [s, t](const TensorList&) {
        return TensorList{kiln::empty(s, t)};
      }, [s, t](const TensorList&) { return TensorList{Ref(s).to(t)}; });
      smp.compare_values = false;
      out.push_back(smp);
    }
  out.push_back(check_sample("requires_grad option", [](const TensorList&) {
    return TensorList{kiln::empty({2}, TensorOptions(kFloat64).requires_grad())};
  }, [](const TensorList& o) { EXPECT_TRUE(o[0].requires_grad()); }));
  return out;
}
std::vector<ErrorSample> errors_factory(const char* name, std::function<void(Shape)> f) {
  return {err(std::string(name) + " negative size", [f] { f({2, -1}); }, "negative dimension")};
}
std::vector<ErrorSample> errors_empty() { return errors_factory("empty", [](Shape s) { kiln::empty(s); }); }

std::vector<OpSample> samples_full() {
  std::vector<OpSample> out;
  for (DType t : kAll)
    for (const Shape& s : kShapes) {
      double v = t == kBool ? 1.0 : 3.0;
      out.push_back(value_sample(dname(t) + " " + shape_str(s), [s, t, v](const TensorList&) {
        return TensorList{full(s, Scalar(v), t)};
      }, [s, t, v](const TensorList&) { return TensorList{filled(s, v).to(t)}; }));
    }
  // Dtype inferred from the value, as torch.full.
  out.push_back(value_sample("int value → int64", [](const TensorList&) { return TensorList{full({2}, 7)}; },
                             [](const TensorList&) { return TensorList{filled({2}, 7).to(kInt64)}; }));
  out.push_back(value_sample("bool value → bool", [](const TensorList&) { return TensorList{full({2}, true)}; },
                             [](const TensorList&) { return TensorList{filled({2}, 1).to(kBool)}; }));
  out.push_back(value_sample(
      "float value → float32", [](const TensorList&) { return TensorList{full({2}, 1.5)}; },
      [](const TensorList&) { return TensorList{filled({2}, 1.5).to(kFloat32)}; }));
  out.push_back(value_sample("scalar_tensor / tensor(Scalar)", [](const TensorList&) {
    return TensorList{scalar_tensor(2.5, kFloat64), tensor(Scalar(int64_t(4)))};
  }, [](const TensorList&) { return TensorList{filled({}, 2.5).to(kFloat64), filled({}, 4).to(kInt64)}; }));
  return out;
}
std::vector<ErrorSample> errors_full() { return errors_factory("full", [](Shape s) { full(s, 1.0); }); }

template <bool One>
std::vector<OpSample> samples_zeros_ones() {
  std::vector<OpSample> out;
  for (DType t : kAll)
    for (const Shape& s : kShapes)
      out.push_back(value_sample(dname(t) + " " + shape_str(s), [s, t](const TensorList&) {
        return TensorList{One ? ones(s, t) : zeros(s, t)};
      }, [s, t](const TensorList&) { return TensorList{filled(s, One ? 1 : 0).to(t)}; }));
  out.push_back(value_sample("default dtype", [](const TensorList&) { return TensorList{One ? ones({3}) : zeros({3})}; },
                             [](const TensorList&) { return TensorList{filled({3}, One ? 1 : 0).to(kFloat32)}; }));
  return out;
}
std::vector<ErrorSample> errors_zeros() { return errors_factory("zeros", [](Shape s) { zeros(s); }); }
std::vector<ErrorSample> errors_ones() { return errors_factory("ones", [](Shape s) { ones(s); }); }

// *_like: op 0 empty, 1 zeros, 2 ones, 3 full(2)
template <int Kind>
std::vector<OpSample> samples_like() {
  std::vector<OpSample> out;
  auto call = [](const Tensor& x, std::optional<TensorOptions> o) {
    if constexpr (Kind == 0) return empty_like(x, o);
    else if constexpr (Kind == 1) return zeros_like(x, o);
    else if constexpr (Kind == 2) return ones_like(x, o);
    else return full_like(x, 2, o);
  };
  double v = Kind == 1 ? 0 : Kind == 2 ? 1 : 2;
  for (DType t : kAll)
    for (bool nc : {false, true}) {
      Shape s{3, 4};
      OpSample smp = value_sample(dname(t) + (nc ? " noncontig" : ""), [call](const TensorList& in) {
        return TensorList{call(in[0], std::nullopt)};
      }, [s, t, v](const TensorList&) { return TensorList{filled(s, t == kBool ? (v != 0) : v).to(t)}; });
      smp.inputs = {make_input(s, t, 1, -2, 2, nc)};
      smp.compare_values = Kind != 0;
      out.push_back(smp);
    }
  OpSample o = value_sample("dtype override", [call](const TensorList& in) { return TensorList{call(in[0], kFloat64)}; },
                            [v](const TensorList&) { return TensorList{filled({2}, v).to(kFloat64)}; });
  o.inputs = {make_input({2}, kInt32, 2)};
  o.compare_values = Kind != 0;
  out.push_back(o);
  OpSample z = value_sample("0-d and empty", [call](const TensorList& in) {
    return TensorList{call(in[0], std::nullopt), call(in[1], std::nullopt)};
  }, [v](const TensorList&) { return TensorList{filled({}, v).to(kFloat32), filled({0, 2}, v).to(kFloat32)}; });
  z.inputs = {make_input({}, kFloat32, 3), make_input({0, 2}, kFloat32, 3)};
  z.compare_values = Kind != 0;
  out.push_back(z);
  return out;
}

// ---- arange / linspace / eye ----
Ref ref_range(double start, double step, int64_t n) {
  Ref r({n});
  for (int64_t i = 0; i < n; ++i) r.v[i] = start + step * static_cast<double>(i);
  return r;
}
std::vector<OpSample> samples_arange() {
  std::vector<OpSample> out;
  out.push_back(value_sample("arange(5) int64", [](const TensorList&) { return TensorList{arange(5)}; },
                             [](const TensorList&) { return TensorList{ref_range(0, 1, 5).to(kInt64)}; }));
  out.push_back(value_sample("arange(1, 10, 3)", [](const TensorList&) { return TensorList{arange(1, 10, 3)}; },
                             [](const TensorList&) { return TensorList{ref_range(1, 3, 3).to(kInt64)}; }));
  out.push_back(value_sample("negative step", [](const TensorList&) { return TensorList{arange(5, -4, -2)}; },
                             [](const TensorList&) { return TensorList{ref_range(5, -2, 5).to(kInt64)}; }));
  out.push_back(value_sample("float step: ceil length", [](const TensorList&) {
    return TensorList{arange(0.0, 1.0, 0.1), arange(1, 2.5, 0.5)};
  }, [](const TensorList&) { return TensorList{ref_range(0, 0.1, 10).to(kFloat32), ref_range(1, 0.5, 3).to(kFloat32)}; }));
  out.push_back(value_sample("empty range", [](const TensorList&) { return TensorList{arange(3, 3)}; },
                             [](const TensorList&) { return TensorList{Ref({0}).to(kInt64)}; }));
  for (DType t : kAll) {
    if (t == kBool) continue;
    out.push_back(value_sample(dname(t), [t](const TensorList&) { return TensorList{arange(0, 6, 1, t)}; },
                               [t](const TensorList&) { return TensorList{ref_range(0, 1, 6).to(t)}; }));
  }
  out.push_back(value_sample("float64 fractional", [](const TensorList&) {
    return TensorList{arange(-1.5, 2.0, 0.25, kFloat64)};
  }, [](const TensorList&) { return TensorList{ref_range(-1.5, 0.25, 14).to(kFloat64)}; }));
  return out;
}
std::vector<ErrorSample> errors_arange() {
  return {err("step 0", [] { arange(0, 5, 0); }, "step must be nonzero"),
          err("wrong sign", [] { arange(0, 5, -1); }, "inconsistent with step sign"),
          err("wrong sign float", [] { arange(5.0, 0.0, 0.5); }, "inconsistent with step sign"),
          err("bool dtype", [] { arange(0, 2, 1, kBool); }, "bool")};
}

Ref ref_linspace(double a, double b, int64_t n) {
  Ref r({n});
  for (int64_t i = 0; i < n; ++i) r.v[i] = n == 1 ? a : a + (b - a) * static_cast<double>(i) / static_cast<double>(n - 1);
  return r;
}
std::vector<OpSample> samples_linspace() {
  std::vector<OpSample> out;
  for (int64_t n : {0, 1, 2, 5, 50})
    out.push_back(value_sample("steps " + std::to_string(n), [n](const TensorList&) {
      return TensorList{linspace(-1, 3, n), linspace(2.0, -7.5, n, kFloat64)};
    }, [n](const TensorList&) { return TensorList{ref_linspace(-1, 3, n).to(kFloat32), ref_linspace(2, -7.5, n).to(kFloat64)}; }));
  out.push_back(value_sample("int64 truncates", [](const TensorList&) { return TensorList{linspace(0, 10, 4, kInt64)}; },
                             [](const TensorList&) {
                               Ref r({4});
                               r.v = {0, 3, 6, 10};
                               return TensorList{r.to(kInt64)};
                             }));
  out.push_back(value_sample(
      "7 steps float64", [](const TensorList&) { return TensorList{linspace(-1, 3, 7, kFloat64)}; },
      [](const TensorList&) { return TensorList{ref_linspace(-1, 3, 7).to(kFloat64)}; }));
  for (DType t : kFloats)
    out.push_back(value_sample(dname(t), [t](const TensorList&) { return TensorList{linspace(0, 1, 9, t)}; },
                               [t](const TensorList&) { return TensorList{ref_linspace(0, 1, 9).to(t)}; }));
  return out;
}
std::vector<ErrorSample> errors_linspace() { return {err("negative steps", [] { linspace(0, 1, -1); }, "non-negative")}; }

Ref ref_eye(int64_t n, int64_t m) {
  Ref r({n, m});
  for (int64_t i = 0; i < std::min(n, m); ++i) r.at({i, i}) = 1;
  return r;
}
std::vector<OpSample> samples_eye() {
  std::vector<OpSample> out;
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {2, 4}, {4, 2}, {0, 3}, {1, 1}})
    out.push_back(value_sample(std::to_string(n) + "x" + std::to_string(m), [n, m](const TensorList&) {
      return TensorList{eye(n, m)};
    }, [n, m](const TensorList&) { return TensorList{ref_eye(n, m).to(kFloat32)}; }));
  out.push_back(value_sample(
      "3x4 float32", [](const TensorList&) { return TensorList{eye(3, 4, kFloat32)}; },
      [](const TensorList&) { return TensorList{ref_eye(3, 4).to(kFloat32)}; }));
  out.push_back(value_sample("square default", [](const TensorList&) { return TensorList{eye(3)}; },
                             [](const TensorList&) { return TensorList{ref_eye(3, 3).to(kFloat32)}; }));
  for (DType t : kAll)
    out.push_back(value_sample(dname(t), [t](const TensorList&) { return TensorList{eye(3, 2, t)}; },
                               [t](const TensorList&) { return TensorList{ref_eye(3, 2).to(t)}; }));
  return out;
}
std::vector<ErrorSample> errors_eye() {
  return {err("negative n", [] { eye(-1); }, "n must be greater or equal to 0"),
          err("negative m", [] { eye(2, -3); }, "m must be greater or equal to 0")};
}

// Not ops, so not samples (a sample must call the op it is filed under): data
// wrapped or copied into a tensor, an uninitialised strided buffer, and
// copy_'s semantics (its samples are in samples_shape_copy.cpp).
TEST(TensorFromData, EveryCppTypeAndFromBlob) {
  TensorList r{
      tensor<bool>({true, false}), tensor<uint8_t>({1, 2}),     tensor<int8_t>({-1, 2}),
      tensor<int16_t>({3, 4}),     tensor<int32_t>({5, 6}),     tensor<int64_t>({7, 8}),
      tensor<float>({1.5f, 2.5f}), tensor<double>({0.25, 0.5}), tensor<int>(std::vector<int>{1, 2, 3, 4, 5, 6}, {2, 3}),
      tensor({1.0, 2.0}, kFloat16)};
  std::vector<DType> want = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat32, kFloat64, kInt32, kFloat16};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r[i].dtype(), want[i]) << i;
  EXPECT_EQ(r[2].to_vector<int64_t>(), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(r[8].sizes().vec(), (Shape{2, 3}));
  EXPECT_EQ(r[9].to_vector<double>(), (std::vector<double>{1.0, 2.0}));
  // from_blob: no copy, deleter runs when the last user dies, strides variant.
  float buf[6] = {0, 1, 2, 3, 4, 5};
  bool deleted = false;
  {
    Tensor b = from_blob(buf, {2, 3}, kFloat32, [&](void*) { deleted = true; });
    EXPECT_EQ(b.data_ptr(), static_cast<void*>(buf));
    buf[4] = 40;
    EXPECT_EQ(b.to_vector<double>()[4], 40.0);
    Tensor t = from_blob(buf, {3, 2}, {1, 3}, kFloat32);
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{0, 3, 1, 40, 2, 5}));
  }
  EXPECT_TRUE(deleted);
  EXPECT_THROW(tensor<float>({1.f, 2.f, 3.f}, {2, 2}), kiln::Error);
}

TEST(EmptyStrided, KeepsTheStrides) {
  Tensor e = empty_strided({2, 3}, {1, 2});
  EXPECT_EQ(e.strides().vec(), (Shape{1, 2}));
  EXPECT_FALSE(e.is_contiguous());
}

TEST(Copy, BroadcastDtypeVersionAutograd) {
  Tensor dst = zeros({2, 3}, kFloat64);
  uint32_t v0 = dst._version();
  dst.copy_(tensor<int32_t>({1, 2, 3}));
  EXPECT_GT(dst._version(), v0);
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor strided = zeros({3, 2}, kFloat32).t();
  strided.copy_(tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(strided.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // The gradient flows to src (summed over the broadcast dim); not to dst's old value.
  Tensor src = tensor<double>({1.0, 2.0, 3.0}).requires_grad_();
  Tensor old = tensor<double>({1.0, 1.0, 1.0}).requires_grad_();
  Tensor d = old * 2.0;
  Tensor target = zeros({2, 3}, kFloat64);
  target.copy_(src);
  d.copy_(src * 3.0);
  (target * tensor<double>({1.0, 10.0, 100.0})).sum().backward();
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{2, 20, 200}));
  d.sum().backward();
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{5, 23, 203}));
  EXPECT_FALSE(old.grad().defined());
  Tensor leaf = zeros({3}, kFloat64).requires_grad_();
  EXPECT_THROW(leaf.copy_(src), kiln::Error);
  // to(Device) / to(TensorOptions) on the same device.
  Tensor x = tensor<float>({1.f, 2.f});
  EXPECT_TRUE(x.to(kCPU).is_same(x));
  EXPECT_FALSE(x.to(kCPU, std::nullopt, false, true).is_same(x));
  EXPECT_EQ(x.to(TensorOptions(kFloat64)).dtype(), kFloat64);
}

}  // namespace

KILN_OP_SAMPLES(empty, samples_empty, errors_empty);
KILN_OP_SAMPLES(full, samples_full, errors_full);
KILN_OP_SAMPLES(zeros, samples_zeros_ones<false>, errors_zeros);
KILN_OP_SAMPLES(ones, samples_zeros_ones<true>, errors_ones);
KILN_OP_SAMPLES(empty_like, samples_like<0>, nullptr);
KILN_OP_SAMPLES(zeros_like, samples_like<1>, nullptr);
KILN_OP_SAMPLES(ones_like, samples_like<2>, nullptr);
KILN_OP_SAMPLES(full_like, samples_like<3>, nullptr);
KILN_OP_SAMPLES(arange, samples_arange, errors_arange);
KILN_OP_SAMPLES(linspace, samples_linspace, errors_linspace);
KILN_OP_SAMPLES(eye, samples_eye, errors_eye);

}  // namespace kiln::test
