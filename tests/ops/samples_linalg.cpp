// Samples for the linear algebra ops. References are naive fp64 loops over
// the inputs' values (tests/ops/ref.h), sharing nothing with the GEMM kernels.
#include <limits>
#include <map>

#include "dispatch/dispatch.h"
#include "kiln/backends.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kMmTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8};

std::string tname(DType t) { return std::string(dtype_name(t)); }

// torch.matmul semantics on fp64 arrays: 1-D operands get a unit dim, batch dims broadcast.
Ref ref_matmul(const Ref& a, const Ref& b) {
  Shape as = a.shape, bs = b.shape;
  if (a.dim() == 1) as.insert(as.begin(), 1);
  if (b.dim() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = ref_broadcast(ba, bb);
  Shape full = batch;
  full.insert(full.end(), {M, N});
  Ref out(full);
  for (int64_t f = 0; f < out.numel(); ++f) {
    Shape idx = unravel(f, full);
    const int64_t i = idx[idx.size() - 2], j = idx.back();
    Shape bidx(idx.begin(), idx.end() - 2);
    const int64_t oa = broadcast_index(bidx, ba) * M * K, ob = broadcast_index(bidx, bb) * K * N;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += a.v[oa + i * K + k] * b.v[ob + k * N + j];
    out.v[f] = acc;
  }
  Shape final_shape = batch;
  if (a.dim() > 1) final_shape.push_back(M);
  if (b.dim() > 1) final_shape.push_back(N);
  out.shape = final_shape;
  return out;
}

// Values the integer types hold exactly (uint8 is non-negative).
Tensor input(const Shape& s, DType t, uint64_t seed, bool noncontig = false) {
  if (t == kUInt8) return make_input(s, t, seed, 0, 4, noncontig);
  return make_input(s, t, seed, -2, 2, noncontig);
}

OpSample sample(std::string name, TensorList in, OpFn fn, OpFn ref, double atol = 0) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(in);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  s.atol = atol;
  return s;
}

OpFn matmul_ref(std::function<Tensor(const Tensor&)> fa = nullptr, std::function<Tensor(const Tensor&)> fb = nullptr) {
  return [fa, fb](const TensorList& in) {
    Tensor a = fa ? fa(in[0]) : in[0];
    Tensor b = fb ? fb(in[1]) : in[1];
    return TensorList{ref_matmul(Ref::of(a), Ref::of(b)).to(in[0].dtype())};
  };
}

// ---- mm ----
std::vector<OpSample> mm_samples() {
  std::vector<OpSample> v;
  OpFn f = [](const TensorList& in) { return TensorList{mm(in[0], in[1])}; };
  for (DType t : kMmTypes)
    v.push_back(sample("3x4 @ 4x5 " + tname(t), {input({3, 4}, t, 1), input({4, 5}, t, 2)}, f, matmul_ref()));
  for (DType t : {kFloat32, kFloat64}) {
    auto tr = [](const Tensor& x) { return x.t(); };
    v.push_back(sample("transposed mat1 " + tname(t), {input({4, 3}, t, 3), input({4, 5}, t, 4)},
                       [](const TensorList& in) { return TensorList{mm(in[0].t(), in[1])}; }, matmul_ref(tr)));
    v.push_back(sample("transposed mat2 " + tname(t), {input({3, 4}, t, 5), input({5, 4}, t, 6)},
                       [](const TensorList& in) { return TensorList{in[0].mm(in[1].t())}; }, matmul_ref(nullptr, tr)));
    v.push_back(sample("both transposed " + tname(t), {input({4, 3}, t, 7), input({5, 4}, t, 8)},
                       [](const TensorList& in) { return TensorList{mm(in[0].t(), in[1].t())}; },
                       matmul_ref(tr, tr)));
    v.push_back(sample("strided " + tname(t), {input({3, 4}, t, 9, true), input({4, 2}, t, 10, true)}, f,
                       matmul_ref()));
  }
  v.push_back(sample("strided int32", {input({3, 4}, kInt32, 9, true), input({4, 2}, kInt32, 10, true)}, f,
                     matmul_ref()));
  v.push_back(sample("row vector", {input({1, 4}, kFloat64, 11), input({4, 3}, kFloat64, 12)}, f, matmul_ref()));
  v.push_back(sample("large float32", {input({37, 70}, kFloat32, 13), input({70, 29}, kFloat32, 14)}, f,
                     matmul_ref(), 1e-4));
  auto empty = [&](const char* name, Shape a, Shape b) {
    OpSample s = sample(name, {input(a, kFloat32, 15), input(b, kFloat32, 16)}, f, matmul_ref());
    s.check_grad = false;
    v.push_back(s);
  };
  empty("K = 0 gives zeros", {3, 0}, {0, 4});
  empty("M = 0", {0, 3}, {3, 4});
  empty("N = 0", {2, 3}, {3, 0});
  return v;
}
std::vector<ErrorSample> mm_errors() {
  return {{"shape mismatch", [] { mm(input({2, 3}, kFloat32, 1), input({4, 5}, kFloat32, 2)); },
           "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"},
          {"3-D", [] { mm(input({2, 3, 4}, kFloat32, 1), input({4, 5}, kFloat32, 2)); }, "2-D matrix"},
          {"dtype mismatch", [] { mm(input({2, 3}, kFloat32, 1), input({3, 5}, kFloat64, 2)); }, "same dtype"},
          {"bool", [] { mm(input({2, 3}, kBool, 1), input({3, 5}, kBool, 2)); }, "bool"}};
}
KILN_OP_SAMPLES(mm, mm_samples, mm_errors);

// ---- bmm ----
std::vector<OpSample> bmm_samples() {
  std::vector<OpSample> v;
  OpFn f = [](const TensorList& in) { return TensorList{bmm(in[0], in[1])}; };
  for (DType t : kMmTypes)
    v.push_back(sample("2x3x4 @ 2x4x5 " + tname(t), {input({2, 3, 4}, t, 1), input({2, 4, 5}, t, 2)}, f,
                       matmul_ref()));
  auto tr = [](const Tensor& x) { return x.transpose(1, 2); };
  v.push_back(sample("transposed batch2", {input({3, 2, 4}, kFloat64, 3), input({3, 5, 4}, kFloat64, 4)},
                     [](const TensorList& in) { return TensorList{bmm(in[0], in[1].transpose(1, 2))}; },
                     matmul_ref(nullptr, tr)));
  v.push_back(sample("strided", {input({2, 3, 4}, kFloat32, 5, true), input({2, 4, 3}, kFloat32, 6, true)}, f,
                     matmul_ref()));
  auto ex = [](const Tensor& x) { return x.expand(Shape{3, 2, 4}); };
  v.push_back(sample("stride-0 batch", {input({1, 2, 4}, kFloat64, 7), input({3, 4, 2}, kFloat64, 8)},
                     [ex](const TensorList& in) { return TensorList{bmm(ex(in[0]), in[1])}; }, matmul_ref(ex)));
  v.push_back(sample("many small batches", {input({40, 3, 5}, kFloat32, 9), input({40, 5, 2}, kFloat32, 10)}, f,
                     matmul_ref()));
  for (auto [name, a, b] : std::vector<std::tuple<const char*, Shape, Shape>>{
           {"empty batch", {0, 2, 3}, {0, 3, 4}}, {"K = 0 gives zeros", {2, 3, 0}, {2, 0, 4}}}) {
    OpSample s = sample(name, {input(a, kFloat32, 11), input(b, kFloat32, 12)}, f, matmul_ref());
    s.check_grad = false;
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> bmm_errors() {
  return {{"batch mismatch", [] { bmm(input({2, 3, 4}, kFloat32, 1), input({3, 4, 5}, kFloat32, 2)); },
           "cannot be multiplied"},
          {"inner mismatch", [] { bmm(input({2, 3, 4}, kFloat32, 1), input({2, 5, 5}, kFloat32, 2)); },
           "cannot be multiplied"},
          {"2-D", [] { bmm(input({3, 4}, kFloat32, 1), input({2, 4, 5}, kFloat32, 2)); }, "3-D tensor"}};
}
KILN_OP_SAMPLES(bmm, bmm_samples, bmm_errors);

// ---- matmul ----
std::vector<OpSample> matmul_samples() {
  std::vector<OpSample> v;
  OpFn f = [](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; };
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},          {{3, 4}, {4}},          {{4}, {4, 3}},       {{3, 4}, {4, 2}},
      {{2, 3, 4}, {4, 2}}, {{2, 3, 4}, {4}},       {{4}, {2, 4, 3}},    {{3, 4}, {2, 4, 2}},
      {{2, 1, 3, 4}, {3, 4, 5}}, {{2, 3, 4}, {2, 4, 1}}, {{1, 2, 4}, {3, 1, 4, 2}}};
  uint64_t seed = 1;
  for (auto& [a, b] : cases) {
    std::string name = shape_str(a) + " @ " + shape_str(b);
    v.push_back(sample(name + " float64", {input(a, kFloat64, seed), input(b, kFloat64, seed + 1)}, f, matmul_ref()));
    seed += 2;
  }
  for (DType t : kMmTypes)
    v.push_back(sample("broadcast batch " + tname(t), {input({2, 1, 3, 4}, t, 30), input({3, 4, 2}, t, 31)}, f,
                       matmul_ref()));
  v.push_back(sample("strided", {input({2, 3, 4}, kFloat32, 32, true), input({4, 5}, kFloat32, 33, true)}, f,
                     matmul_ref()));
  v.push_back(sample("method, transposed", {input({4, 3}, kFloat64, 34), input({2, 4, 5}, kFloat64, 35)},
                     [](const TensorList& in) { return TensorList{in[0].t().matmul(in[1])}; },
                     matmul_ref([](const Tensor& x) { return x.t(); })));
  OpSample e = sample("empty K", {input({2, 3, 0}, kFloat32, 36), input({0, 4}, kFloat32, 37)}, f, matmul_ref());
  e.check_grad = false;
  v.push_back(e);
  return v;
}
std::vector<ErrorSample> matmul_errors() {
  return {{"0-d", [] { matmul(input({}, kFloat32, 1), input({3}, kFloat32, 2)); }, "at least 1-D"},
          {"inner mismatch", [] { matmul(input({2, 3, 4}, kFloat32, 1), input({5, 6}, kFloat32, 2)); },
           "matmul: mat1 and mat2 shapes cannot be multiplied ([2, 3, 4] and [5, 6])"},
          {"batch mismatch", [] { matmul(input({2, 3, 4}, kFloat32, 1), input({3, 4, 6}, kFloat32, 2)); },
           "matmul"},
          {"dtype mismatch", [] { matmul(input({3}, kFloat32, 1), input({3}, kInt64, 2)); }, "same dtype"}};
}
KILN_OP_SAMPLES(matmul, matmul_samples, matmul_errors);

// ---- addmm / baddbmm ----
OpFn addmm_ref(double beta, double alpha) {
  return [beta, alpha](const TensorList& in) {
    Ref p = ref_matmul(Ref::of(in[1]), Ref::of(in[2]));
    Ref s = Ref::of(in[0]);
    Ref out(p.shape);
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double sv = beta == 0 ? 0.0 : beta * s.v[broadcast_index(unravel(i, p.shape), s.shape)];
      out.v[i] = sv + alpha * p.v[i];
    }
    return TensorList{out.to(in[1].dtype())};
  };
}

std::vector<OpSample> addmm_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(sample("beta 0.5 alpha 2, bias row " + tname(t), {input({5}, t, 1), input({3, 4}, t, 2), input({4, 5}, t, 3)},
                       [](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2], 0.5, 2.0)}; },
                       addmm_ref(0.5, 2.0)));
  v.push_back(sample("defaults full self", {input({3, 5}, kFloat64, 4), input({3, 4}, kFloat64, 5), input({4, 5}, kFloat64, 6)},
                     [](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2])}; }, addmm_ref(1, 1)));
  v.push_back(sample("int64 integer scalars", {input({3, 1}, kInt64, 7), input({3, 4}, kInt64, 8), input({4, 5}, kInt64, 9)},
                     [](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2], 2, 3)}; }, addmm_ref(2, 3)));
  OpSample nan = sample("beta 0 ignores NaN self", {full(Shape{3, 5}, std::numeric_limits<double>::quiet_NaN(), kFloat32),
                                                    input({3, 4}, kFloat32, 10), input({4, 5}, kFloat32, 11)},
                        [](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2], 0, 1)}; },
                        addmm_ref(0, 1));
  nan.check_grad = false;
  v.push_back(nan);
  v.push_back(sample("strided", {input({3, 5}, kFloat32, 12, true), input({3, 4}, kFloat32, 13, true),
                                 input({4, 5}, kFloat32, 14, true)},
                     [](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2])}; }, addmm_ref(1, 1)));
  return v;
}
std::vector<ErrorSample> addmm_errors() {
  return {{"self not broadcastable", [] { addmm(input({4}, kFloat32, 1), input({3, 4}, kFloat32, 2), input({4, 5}, kFloat32, 3)); },
           "addmm"},
          {"inner mismatch", [] { addmm(input({5}, kFloat32, 1), input({3, 4}, kFloat32, 2), input({3, 5}, kFloat32, 3)); },
           "mat1 and mat2 shapes cannot be multiplied"},
          {"float alpha with ints", [] { addmm(input({5}, kInt64, 1), input({3, 4}, kInt64, 2), input({4, 5}, kInt64, 3), 1, 0.5); },
           "alpha must not be a floating point number"}};
}
KILN_OP_SAMPLES(addmm, addmm_samples, addmm_errors);

std::vector<OpSample> baddbmm_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(sample("beta 0.5 alpha -1 " + tname(t), {input({2, 1, 5}, t, 1), input({2, 3, 4}, t, 2), input({2, 4, 5}, t, 3)},
                       [](const TensorList& in) { return TensorList{baddbmm(in[0], in[1], in[2], 0.5, -1.0)}; },
                       addmm_ref(0.5, -1.0)));
  v.push_back(sample("defaults int32", {input({5}, kInt32, 4), input({2, 3, 4}, kInt32, 5), input({2, 4, 5}, kInt32, 6)},
                     [](const TensorList& in) { return TensorList{baddbmm(in[0], in[1], in[2])}; }, addmm_ref(1, 1)));
  return v;
}
std::vector<ErrorSample> baddbmm_errors() {
  return {{"self too big", [] { baddbmm(input({3, 2, 3, 5}, kFloat32, 1), input({2, 3, 4}, kFloat32, 2), input({2, 4, 5}, kFloat32, 3)); },
           "baddbmm"},
          {"batch mismatch", [] { baddbmm(input({5}, kFloat32, 1), input({2, 3, 4}, kFloat32, 2), input({3, 4, 5}, kFloat32, 3)); },
           "cannot be multiplied"}};
}
KILN_OP_SAMPLES(baddbmm, baddbmm_samples, baddbmm_errors);

// ---- linear ----
OpFn linear_ref() {
  return [](const TensorList& in) {
    Ref x = Ref::of(in[0]), w = Ref::of(in[1]);
    Ref wt({w.shape[1], w.shape[0]});
    for (int64_t i = 0; i < w.shape[0]; ++i)
      for (int64_t j = 0; j < w.shape[1]; ++j) wt.v[j * w.shape[0] + i] = w.v[i * w.shape[1] + j];
    Ref out = ref_matmul(x, wt);
    if (in.size() > 2 && in[2].defined()) {
      Ref b = Ref::of(in[2]);
      for (int64_t i = 0; i < out.numel(); ++i) out.v[i] += b.v[i % b.numel()];
    }
    return TensorList{out.to(in[0].dtype())};
  };
}

std::vector<OpSample> linear_samples() {
  std::vector<OpSample> v;
  OpFn f = [](const TensorList& in) { return TensorList{linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor())}; };
  for (DType t : kFloatTypes)
    v.push_back(sample("[2,3,4] x [5,4] + bias " + tname(t), {input({2, 3, 4}, t, 1), input({5, 4}, t, 2), input({5}, t, 3)},
                       f, linear_ref()));
  v.push_back(sample("no bias", {input({3, 4}, kFloat64, 4), input({2, 4}, kFloat64, 5)}, f, linear_ref()));
  v.push_back(sample("1-D input", {input({4}, kFloat64, 6), input({3, 4}, kFloat64, 7), input({3}, kFloat64, 8)}, f,
                     linear_ref()));
  v.push_back(sample("strided", {input({3, 4}, kFloat32, 9, true), input({2, 4}, kFloat32, 10, true),
                                 input({2}, kFloat32, 11, true)}, f, linear_ref()));
  v.push_back(sample("int64", {input({3, 4}, kInt64, 12), input({2, 4}, kInt64, 13), input({2}, kInt64, 14)}, f,
                     linear_ref()));
  return v;
}
std::vector<ErrorSample> linear_errors() {
  return {{"in_features mismatch", [] { linear(input({3, 4}, kFloat32, 1), input({2, 5}, kFloat32, 2)); },
           "linear: input and weight shapes cannot be multiplied"},
          {"bias shape", [] { linear(input({3, 4}, kFloat32, 1), input({2, 4}, kFloat32, 2), input({3}, kFloat32, 3)); },
           "bias"}};
}
KILN_OP_SAMPLES(linear, linear_samples, linear_errors);

// ---- _addmm_bias (Note [Bias epilogue]): a @ b + bias over the columns ----
std::vector<OpSample> addmm_bias_samples() {
  std::vector<OpSample> v;
  OpFn f = [](const TensorList& in) { return TensorList{call_op1(OpId::_addmm_bias, {in[0], in[1], in[2]})}; };
  OpFn ref = [](const TensorList& in) {
    Ref out = ref_matmul(Ref::of(in[1]), Ref::of(in[2])), b = Ref::of(in[0]);
    for (int64_t i = 0; i < out.numel(); ++i) out.v[i] += b.v[i % std::max<int64_t>(1, b.numel())];
    return TensorList{out.to(in[1].dtype())};
  };
  for (DType t : kFloatTypes)
    v.push_back(sample("[3,4] @ [4,5] + [5] " + tname(t), {input({5}, t, 1), input({3, 4}, t, 2), input({4, 5}, t, 3)},
                       f, ref, t == kFloat16 || t == kBFloat16 ? 3e-2 : 0));
  // linear's layout: b is the weight [n, k] transposed.
  for (DType t : {kFloat32, kFloat64}) {
    OpSample s = sample("weight transposed " + tname(t), {input({6}, t, 4), input({7, 5}, t, 5), input({6, 5}, t, 6)},
                        [](const TensorList& in) {
                          return TensorList{call_op1(OpId::_addmm_bias, {in[0], in[1], in[2].t()})};
                        },
                        [ref](const TensorList& in) { return ref({in[0], in[1], in[2].t()}); });
    v.push_back(s);
    v.push_back(sample("strided " + tname(t), {input({3}, t, 7, true), input({4, 2}, t, 8, true), input({2, 3}, t, 9, true)},
                       f, ref));
  }
  v.push_back(sample("large float32", {input({29}, kFloat32, 10), input({37, 70}, kFloat32, 11), input({70, 29}, kFloat32, 12)},
                     f, ref, 1e-4));
  auto empty = [&](const char* name, Shape a, Shape b) {
    OpSample s = sample(name, {input({b[1]}, kFloat32, 13), input(a, kFloat32, 14), input(b, kFloat32, 15)}, f, ref);
    s.check_grad = false;
    v.push_back(s);
  };
  empty("K = 0 gives the bias", {3, 0}, {0, 4});
  empty("M = 0", {0, 3}, {3, 4});
  empty("N = 0", {2, 3}, {3, 0});
  return v;
}
std::vector<ErrorSample> addmm_bias_errors() {
  auto call = [](const Tensor& bias, const Tensor& a, const Tensor& b) { call_op1(OpId::_addmm_bias, {bias, a, b}); };
  return {{"bias length", [=] { call(input({4}, kFloat32, 1), input({2, 3}, kFloat32, 2), input({3, 5}, kFloat32, 3)); },
           "_addmm_bias: expected a [m, k], b [k, n] and bias [n]"},
          {"3-D", [=] { call(input({5}, kFloat32, 1), input({2, 2, 3}, kFloat32, 2), input({3, 5}, kFloat32, 3)); },
           "expected a [m, k]"},
          {"dtype mismatch", [=] { call(input({5}, kFloat64, 1), input({2, 3}, kFloat32, 2), input({3, 5}, kFloat32, 3)); },
           "same dtype"},
          {"integer", [=] { call(input({5}, kInt64, 1), input({2, 3}, kInt64, 2), input({3, 5}, kInt64, 3)); },
           "expected floating operands"}};
}
KILN_OP_SAMPLES(_addmm_bias, addmm_bias_samples, addmm_bias_errors);

// ---- _addmm_epilogue (Note [GEMM epilogues]): act(a @ b + bias) + residual ----
// The activations in double with std:: math, sharing nothing with the functors or oneDNN.
double ref_activation(const std::string& act, double x) {
  if (act == "relu") return x < 0 ? 0 : x;
  if (act == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (act == "gelu_tanh") return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  if (act == "silu") return x / (1 + std::exp(-x));
  return x;
}

// The op alone: samples also run inside the compile fuzzer's programs and on CUDA, so which GEMM
// ran is checked by tests/unit/test_gemm_epilogue.cpp (oneDNN and kiln's GEMM paths both).
OpFn epilogue_fn(const std::string& act, bool transpose_b = false) {
  return [act, transpose_b](const TensorList& in) {
    return TensorList{call_op1(OpId::_addmm_epilogue, {in[0], in[1], transpose_b ? in[2].t() : in[2], in[3]}, {act})};
  };
}
OpFn epilogue_ref(const std::string& act, bool transpose_b = false) {
  return [act, transpose_b](const TensorList& in) {
    Ref out = ref_matmul(Ref::of(in[1]), Ref::of(transpose_b ? in[2].t() : in[2])), b = Ref::of(in[0]);
    const int64_t n = std::max<int64_t>(1, b.numel());
    Ref res = in[3].defined() ? Ref::of(in[3]) : Ref();
    for (int64_t i = 0; i < out.numel(); ++i) {
      out.v[i] = ref_activation(act, out.v[i] + b.v[i % n]);
      if (in[3].defined()) out.v[i] += res.v[i];
    }
    return TensorList{out.to(in[1].dtype())};
  };
}

std::vector<OpSample> addmm_epilogue_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 20;
  for (const std::string act : {"none", "relu", "gelu", "gelu_tanh", "silu"})
    for (DType t : {kFloat32, kFloat64})
      for (bool residual : {false, true}) {
        const std::string name = act + (residual ? " + residual " : " ") + tname(t);
        v.push_back(sample(name, {input({5}, t, seed), input({3, 4}, t, seed + 1), input({4, 5}, t, seed + 2),
                                  residual ? input({3, 5}, t, seed + 3) : Tensor()},
                           epilogue_fn(act), epilogue_ref(act)));
        // linear's layout (the weight [n, k] transposed), a strided residual, blocks of rows.
        v.push_back(sample(name + " weight transposed, strided residual",
                           {input({300}, t, seed + 4), input({1200, 70}, t, seed + 5), input({300, 70}, t, seed + 6),
                            residual ? input({1200, 300}, t, seed + 7, true) : Tensor()},
                           epilogue_fn(act, true), epilogue_ref(act, true), 1e-4));
        v.back().check_grad = false;  // large; the small samples check the gradient
        seed += 8;
      }
  for (DType t : {kFloat16, kBFloat16})
    v.push_back(sample("gelu + residual " + tname(t),
                       {input({5}, t, 1), input({3, 4}, t, 2), input({4, 5}, t, 3), input({3, 5}, t, 4)},
                       epilogue_fn("gelu"), epilogue_ref("gelu"), t == kFloat16 || t == kBFloat16 ? 3e-2 : 0));
  v.push_back(sample("strided operands float64", {input({3}, kFloat64, 5, true), input({4, 2}, kFloat64, 6, true),
                                                  input({2, 3}, kFloat64, 7, true), Tensor()},
                     epilogue_fn("relu"), epilogue_ref("relu")));
  auto empty = [&](const char* name, Shape a, Shape b) {
    OpSample s = sample(name, {input({b[1]}, kFloat32, 13), input(a, kFloat32, 14), input(b, kFloat32, 15), Tensor()},
                        epilogue_fn("gelu"), epilogue_ref("gelu"));
    s.check_grad = false;
    v.push_back(s);
  };
  empty("K = 0 gives act(bias)", {3, 0}, {0, 4});
  empty("M = 0", {0, 3}, {3, 4});
  empty("N = 0", {2, 3}, {3, 0});
  return v;
}
std::vector<ErrorSample> addmm_epilogue_errors() {
  auto call = [](const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& res, const std::string& act) {
    call_op1(OpId::_addmm_epilogue, {bias, a, b, res}, {act});
  };
  const Tensor bias = input({5}, kFloat32, 1), a = input({2, 3}, kFloat32, 2), b = input({3, 5}, kFloat32, 3);
  return {{"bias length", [=] { call(input({4}, kFloat32, 1), a, b, Tensor(), "relu"); },
           "_addmm_epilogue: expected a [m, k], b [k, n] and bias [n], got shapes [2, 3], [3, 5] and [4]"},
          {"inner dims", [=] { call(bias, input({2, 4}, kFloat32, 2), b, Tensor(), "relu"); }, "expected a [m, k]"},
          {"residual shape", [=] { call(bias, a, b, input({5}, kFloat32, 4), "relu"); },
           "_addmm_epilogue: expected residual of the output's shape [2, 5], got [5]"},
          {"residual dtype", [=] { call(bias, a, b, input({2, 5}, kFloat64, 4), "relu"); }, "same dtype"},
          {"dtype mismatch", [=] { call(input({5}, kFloat64, 1), a, b, Tensor(), "relu"); }, "same dtype"},
          {"integer", [=] { call(input({5}, kInt64, 1), input({2, 3}, kInt64, 2), input({3, 5}, kInt64, 3), Tensor(), "relu"); },
           "_addmm_epilogue: expected floating operands, got int64"},
          {"activation", [=] { call(bias, a, b, Tensor(), "tanh"); },
           "_addmm_epilogue: expected activation \"none\", \"relu\", \"gelu\", \"gelu_tanh\" or \"silu\", got \"tanh\""}};
}
KILN_OP_SAMPLES(_addmm_epilogue, addmm_epilogue_samples, addmm_epilogue_errors);

// ---- einsum ----
// Naive einsum over letter subscripts: every assignment of every label.
Ref ref_einsum(const std::vector<std::string>& terms, const std::string& out, const std::vector<Ref>& ops) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = std::max(size[terms[i][d]], ops[i].shape[d]);
  std::vector<char> labels;
  Shape sizes;
  for (auto& [c, s] : size) labels.push_back(c), sizes.push_back(s);
  Shape oshape;
  for (char c : out) oshape.push_back(size[c]);
  Ref r(oshape);
  for (int64_t f = 0; f < ref_numel(sizes); ++f) {
    Shape idx = unravel(f, sizes);
    auto val = [&](char c) { return idx[std::find(labels.begin(), labels.end(), c) - labels.begin()]; };
    double p = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      Shape oi;
      for (size_t d = 0; d < terms[i].size(); ++d) oi.push_back(ops[i].shape[d] == 1 ? 0 : val(terms[i][d]));
      p *= ops[i].at(oi);
    }
    Shape o;
    for (char c : out) o.push_back(val(c));
    r.at(o) += p;
  }
  return r;
}

OpSample einsum_sample(const std::string& eq, std::vector<std::string> terms, std::string out, TensorList in,
                       const std::string& note = "") {
  OpSample s;
  s.name = "'" + eq + "' " + note + tname(in[0].dtype());
  s.inputs = std::move(in);
  s.fn = [eq](const TensorList& x) { return TensorList{einsum(eq, x)}; };
  s.reference = [terms, out](const TensorList& x) {
    std::vector<Ref> r;
    for (auto& t : x) r.push_back(Ref::of(t));
    return TensorList{ref_einsum(terms, out, r).to(x[0].dtype())};
  };
  return s;
}

std::vector<OpSample> einsum_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64})
    v.push_back(einsum_sample("ij,jk->ik", {"ij", "jk"}, "ik", {input({2, 3}, t, 1), input({3, 4}, t, 2)}));
  auto d = [](Shape s, uint64_t seed) { return input(s, kFloat64, seed); };
  v.push_back(einsum_sample("ij,jk", {"ij", "jk"}, "ik", {d({2, 3}, 3), d({3, 4}, 4)}));
  v.push_back(einsum_sample("ba", {"ba"}, "ab", {d({2, 3}, 5)}));
  v.push_back(einsum_sample("ii->i", {"ii"}, "i", {d({3, 3}, 6)}));
  v.push_back(einsum_sample("ii", {"ii"}, "", {d({3, 3}, 7)}));
  v.push_back(einsum_sample("iji->j", {"iji"}, "j", {d({3, 2, 3}, 8)}));
  v.push_back(einsum_sample("bij,bjk->bik", {"bij", "bjk"}, "bik", {d({2, 3, 4}, 9), d({2, 4, 2}, 10)}));
  v.push_back(einsum_sample("i,j->ij", {"i", "j"}, "ij", {d({3}, 11), d({4}, 12)}));
  v.push_back(einsum_sample("i,i->", {"i", "i"}, "", {d({5}, 13), d({5}, 14)}));
  v.push_back(einsum_sample("ijk->", {"ijk"}, "", {d({2, 3, 2}, 15)}));
  v.push_back(einsum_sample("ijk->kji", {"ijk"}, "kji", {d({2, 3, 4}, 16)}));
  v.push_back(einsum_sample("abc,cd,de->abe", {"abc", "cd", "de"}, "abe", {d({2, 2, 3}, 17), d({3, 4}, 18), d({4, 2}, 19)}));
  v.push_back(einsum_sample("Ab,bc", {"Ab", "bc"}, "Ac", {d({2, 3}, 20), d({3, 2}, 21)}));
  v.push_back(einsum_sample("ij,ij->ij", {"ij", "ij"}, "ij", {d({2, 3}, 22), d({2, 3}, 23)}));
  v.push_back(einsum_sample("ij,kj->ikj", {"ij", "kj"}, "ikj", {d({2, 3}, 24), d({4, 3}, 25)}));
  v.push_back(einsum_sample("bi, bj -> bij", {"bi", "bj"}, "bij", {d({2, 3}, 26), d({2, 2}, 27)}));
  v.push_back(einsum_sample("ij,jk->ik", {"ij", "jk"}, "ik",
                            {input({2, 3}, kFloat32, 28, true), input({3, 4}, kFloat32, 29, true)}, "strided "));
  // Ellipsis: '...ij,...jk->...ik' with broadcast batches is a batched matmul.
  OpSample e;
  e.name = "'...ij,...jk->...ik' broadcast";
  e.inputs = {d({2, 1, 3, 4}, 30), d({5, 4, 2}, 31)};
  e.fn = [](const TensorList& x) { return TensorList{einsum("...ij,...jk->...ik", x)}; };
  e.reference = [](const TensorList& x) { return TensorList{ref_matmul(Ref::of(x[0]), Ref::of(x[1])).to(kFloat64)}; };
  v.push_back(e);
  OpSample e2 = e;
  e2.name = "'...ij,...jk' implicit ellipsis";
  e2.fn = [](const TensorList& x) { return TensorList{einsum("...ij,...jk", x)}; };
  v.push_back(e2);
  OpSample e3 = einsum_sample("i...->...", {"ij"}, "j", {d({3, 4}, 32)});
  e3.fn = [](const TensorList& x) { return TensorList{einsum("i...->...", x)}; };
  v.push_back(e3);
  OpSample z = einsum_sample("ij,jk->ik", {"ij", "jk"}, "ik", {d({2, 0}, 33), d({0, 3}, 34)}, "empty K ");
  z.check_grad = false;
  v.push_back(z);
  return v;
}
std::vector<ErrorSample> einsum_errors() {
  auto d = [](Shape s) { return input(s, kFloat32, 1); };
  return {{"too few operands", [d] { einsum("ij,jk->ik", {d({2, 3})}); }, "fewer operands"},
          {"too many operands", [d] { einsum("ij->ij", {d({2, 3}), d({2, 3})}); }, "more operands"},
          {"wrong rank", [d] { einsum("ij->ij", {d({2, 3, 4})}); }, "does not match the number of dimensions"},
          {"unknown output", [d] { einsum("ij->k", {d({2, 3})}); }, "does not appear"},
          {"size mismatch", [d] { einsum("ij,jk->ik", {d({2, 3}), d({4, 5})}); }, "einsum"},
          {"diagonal size mismatch", [d] { einsum("ii->i", {d({2, 3})}); }, "repeated"},
          {"bad character", [d] { einsum("i1->i", {d({2, 3})}); }, "invalid subscript"},
          {"dtype mismatch", [d] { einsum("i,i->", {d({2}), input({2}, kFloat64, 2)}); }, "same dtype"}};
}
KILN_OP_SAMPLES(einsum, einsum_samples, einsum_errors);

// ---- addbmm, chain_matmul ----
// beta * self + alpha * sum_b batch1[b] @ batch2[b]; self ignored where beta == 0.
OpFn addbmm_ref(double beta, double alpha) {
  return [beta, alpha](const TensorList& in) {
    Ref b1 = Ref::of(in[1]), b2 = Ref::of(in[2]), self = Ref::of(in[0]);
    const int64_t B = b1.shape[0], n = b1.shape[1], k = b1.shape[2], m = b2.shape[2];
    Ref out({n, m});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t q = 0; q < k; ++q) acc += b1.at({b, i, q}) * b2.at({b, q, j});
        const double sv = beta == 0 ? 0.0 : beta * self.v[broadcast_index({i, j}, self.shape)];
        out.at({i, j}) = sv + alpha * acc;
      }
    return TensorList{out.to(in[1].dtype())};
  };
}
std::vector<OpSample> addbmm_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(sample("beta 0.5 alpha -1, self row " + tname(t), {input({5}, t, 1), input({2, 3, 4}, t, 2), input({2, 4, 5}, t, 3)},
                       [](const TensorList& in) { return TensorList{addbmm(in[0], in[1], in[2], 0.5, -1.0)}; },
                       addbmm_ref(0.5, -1.0)));
  v.push_back(sample("defaults full self, method", {input({3, 5}, kFloat64, 4), input({3, 3, 4}, kFloat64, 5), input({3, 4, 5}, kFloat64, 6)},
                     [](const TensorList& in) { return TensorList{in[0].addbmm(in[1], in[2])}; }, addbmm_ref(1, 1)));
  v.push_back(sample("int64 integer scalars", {input({3, 1}, kInt64, 7), input({2, 3, 4}, kInt64, 8), input({2, 4, 5}, kInt64, 9)},
                     [](const TensorList& in) { return TensorList{addbmm(in[0], in[1], in[2], 2, 3)}; }, addbmm_ref(2, 3)));
  v.push_back(sample("no batches", {input({3, 5}, kFloat32, 10), input({0, 3, 4}, kFloat32, 11), input({0, 4, 5}, kFloat32, 12)},
                     [](const TensorList& in) { return TensorList{addbmm(in[0], in[1], in[2], 2, 1)}; }, addbmm_ref(2, 1)));
  OpSample nan = sample("beta 0 ignores NaN self", {full(Shape{3, 5}, std::numeric_limits<double>::quiet_NaN(), kFloat32),
                                                    input({2, 3, 4}, kFloat32, 13), input({2, 4, 5}, kFloat32, 14)},
                        [](const TensorList& in) { return TensorList{addbmm(in[0], in[1], in[2], 0, 1)}; }, addbmm_ref(0, 1));
  nan.check_grad = false;
  v.push_back(nan);
  v.push_back(sample("strided", {input({3, 5}, kFloat32, 15, true), input({2, 3, 4}, kFloat32, 16, true),
                                 input({2, 4, 5}, kFloat32, 17, true)},
                     [](const TensorList& in) { return TensorList{addbmm(in[0], in[1], in[2])}; }, addbmm_ref(1, 1)));
  return v;
}
std::vector<ErrorSample> addbmm_errors() {
  auto f = [](const Shape& s, const Shape& a, const Shape& b) { addbmm(input(s, kFloat32, 1), input(a, kFloat32, 2), input(b, kFloat32, 3)); };
  return {{"2-D batch1", [f] { f({5}, {3, 4}, {2, 4, 5}); }, "addbmm: batch1 must be a 3D tensor, got shape [3, 4]"},
          {"2-D batch2", [f] { f({5}, {2, 3, 4}, {4, 5}); }, "addbmm: batch2 must be a 3D tensor"},
          {"batch mismatch", [f] { f({5}, {2, 3, 4}, {3, 4, 5}); }, "addbmm: batch1 and batch2 must have same number of batches"},
          {"inner mismatch", [f] { f({5}, {2, 3, 4}, {2, 3, 5}); }, "addbmm: Incompatible matrix sizes for bmm (3x4 and 3x5)"},
          {"self not broadcastable", [f] { f({2, 5}, {2, 3, 4}, {2, 4, 5}); }, "addbmm"},
          {"dtype mismatch", [] { addbmm(input({5}, kFloat64, 1), input({2, 3, 4}, kFloat32, 2), input({2, 4, 5}, kFloat32, 3)); },
           "addbmm: expected self and the batches to have the same dtype, but got float64, float32 and float32"},
          {"float alpha with ints", [] { addbmm(input({5}, kInt64, 1), input({2, 3, 4}, kInt64, 2), input({2, 4, 5}, kInt64, 3), 1, 0.5); },
           "addbmm: for integral input tensors, argument alpha must not be a floating point number"}};
}

OpFn chain_ref() {
  return [](const TensorList& in) {
    Ref r = Ref::of(in[0]);
    for (size_t i = 1; i < in.size(); ++i) r = ref_matmul(r, Ref::of(in[i]));
    return TensorList{r.to(in[0].dtype())};
  };
}
std::vector<OpSample> chain_matmul_samples() {
  std::vector<OpSample> v;
  auto fn = [](const TensorList& in) { return TensorList{chain_matmul(in)}; };
  v.push_back(sample("three float64", {input({2, 3}, kFloat64, 1), input({3, 4}, kFloat64, 2), input({4, 2}, kFloat64, 3)}, fn, chain_ref()));
  // The cheapest order is not left to right here: (A (B C)) D costs less than ((A B) C) D.
  v.push_back(sample("four float32, reordered", {input({10, 2}, kFloat32, 4), input({2, 10}, kFloat32, 5),
                                                 input({10, 2}, kFloat32, 6), input({2, 10}, kFloat32, 7)}, fn, chain_ref()));
  v.push_back(sample("one matrix is copied", {input({3, 4}, kFloat32, 8)}, fn, chain_ref()));
  v.push_back(sample("two int64", {input({2, 3}, kInt64, 9), input({3, 2}, kInt64, 10)}, fn, chain_ref()));
  v.push_back(sample("strided", {input({3, 4}, kFloat32, 11, true), input({4, 3}, kFloat32, 12, true)}, fn, chain_ref()));
  v.push_back(sample("empty inner dim", {input({2, 0}, kFloat32, 13), input({0, 3}, kFloat32, 14), input({3, 2}, kFloat32, 15)}, fn, chain_ref()));
  for (DType t : {kFloat16, kBFloat16})
    v.push_back(sample("three " + tname(t), {input({2, 3}, t, 16), input({3, 4}, t, 17), input({4, 2}, t, 18)}, fn, chain_ref(), 5e-2));
  return v;
}
std::vector<ErrorSample> chain_matmul_errors() {
  return {{"no matrices", [] { chain_matmul({}); }, "chain_matmul: Expected one or more matrices"},
          {"3-D", [] { chain_matmul({input({2, 3}, kFloat32, 1), input({2, 3, 4}, kFloat32, 2)}); },
           "chain_matmul: expected 2-D matrices, but matrix 1 has shape [2, 3, 4]"},
          {"shapes", [] { chain_matmul({input({2, 3}, kFloat32, 1), input({4, 2}, kFloat32, 2)}); },
           "chain_matmul: matrices 0 and 1 with shapes [2, 3] and [4, 2] cannot be multiplied"},
          {"dtypes", [] { chain_matmul({input({2, 3}, kFloat32, 1), input({3, 2}, kFloat64, 2)}); },
           "chain_matmul: all matrices must have the same dtype, but matrix 0 is float32 and matrix 1 is float64"}};
}
KILN_OP_SAMPLES(addbmm, addbmm_samples, addbmm_errors);
KILN_OP_SAMPLES(chain_matmul, chain_matmul_samples, chain_matmul_errors);

}  // namespace
}  // namespace kiln::test
