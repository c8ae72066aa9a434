// Samples for the reductions of ops.def: several dim lists, negative dims,
// keepdim both ways, strided and transposed inputs, empty and 0-d tensors,
// every dtype; references are naive fp64 loops over slices (helpers in
// samples_reduction_util.h; the order statistics are in samples_reduction_select.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/ops/samples_reduction_util.h"

namespace kiln::test {
namespace {
using namespace reduction;

// ---- sum / mean / prod ----

std::vector<OpSample> sum_samples() {
  auto v = dim_samples(kAll, [](const Tensor& x, const Ints& d, bool k) { return kiln::sum(x, d, k); }, r_sum, sum_type,
                       false);
  v.push_back(simple("dtype arg int32 -> float32", {make_input({3, 4}, kInt32, 3)},
                     [](const TensorList& in) { return TensorList{kiln::sum(in[0], Ints{1}, false, kFloat32)}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {1}, false, r_sum).to(kFloat32)}; }));
  v.push_back(simple("dtype arg float16 -> float32", {make_input({3, 40}, kFloat16, 4)},
                     [](const TensorList& in) { return TensorList{in[0].sum(kFloat32)}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {}, false, r_sum).to(kFloat32)}; },
                     false));  // computes in float32 whatever the input: no float64 gradcheck
  v.push_back(simple("method keepdim", {make_input({3, 4}, kFloat64, 5)},
                     [](const TensorList& in) { return TensorList{in[0].sum(Ints{0}, true)}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {0}, true, r_sum).to(kFloat64)}; }));
  // Cascade accumulation: a million float32 values summed to float32 accuracy.
  v.push_back(simple("accuracy 1e6 float32", {make_input({1000000}, kFloat32, 6, 0.0, 1.0)},
                     [](const TensorList& in) { return TensorList{kiln::sum(in[0])}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {}, false, r_sum).to(kFloat32)}; },
                     false));
  v.back().rtol = 2e-6;
  // Outer-dim reductions (contiguous outputs, strided reduced dim): blocks of
  // columns over many rows, with the rows split over threads (1100 rows) or not
  // (300 rows), a ragged last block and a row count not a multiple of 4.
  for (auto [rows, cols, t] : {std::tuple<int64_t, int64_t, DType>{1100, 1500, kFloat32}, {300, 3000, kFloat32},
                               {1030, 70, kFloat64}, {1027, 2100, kInt32}}) {
    v.push_back(simple("outer dim " + std::to_string(rows) + "x" + std::to_string(cols) + " " + std::string(dtype_name(t)),
                       {make_input({rows, cols}, t, 8)},
                       [](const TensorList& in) { return TensorList{kiln::sum(in[0], Ints{0})}; },
                       [t](const TensorList& in) {
                         return TensorList{ref_apply(Ref::of(in[0]), {0}, false, r_sum).to(sum_type(t))};
                       },
                       false));
    v.back().rtol = 1e-5;
  }
  v.push_back(simple("outer dims 3x600x5x700 over {0, 2}", {make_input({3, 600, 5, 700}, kFloat32, 9)},
                     [](const TensorList& in) { return TensorList{kiln::sum(in[0], Ints{0, 2})}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {0, 2}, false, r_sum).to(kFloat32)}; },
                     false));
  v.back().rtol = 1e-5;
  return v;
}
std::vector<ErrorSample> sum_errors() {
  return dim_errors([](const Tensor& x, const Ints& d) { kiln::sum(x, d); }, "sum");
}
KILN_OP_SAMPLES(sum, sum_samples, sum_errors);

std::vector<OpSample> mean_samples() {
  auto v = dim_samples(
      kFloats, [](const Tensor& x, const Ints& d, bool k) { return kiln::mean(x, d, k); },
      [](const std::vector<double>& s) { return r_sum(s) / static_cast<double>(s.size()); }, [](DType t) { return t; },
      false);
  v.push_back(simple("int64 with dtype float64", {make_input({3, 4}, kInt64, 3)},
                     [](const TensorList& in) { return TensorList{kiln::mean(in[0], Ints{0}, false, kFloat64)}; },
                     [](const TensorList& in) {
                       return TensorList{ref_apply(Ref::of(in[0]), {0}, false, [](const std::vector<double>& s) {
                                           return r_sum(s) / 3.0;
                                         }).to(kFloat64)};
                     }));
  v.push_back(simple("method full", {make_input({3, 4}, kFloat32, 5)},
                     [](const TensorList& in) { return TensorList{in[0].mean()}; },
                     [](const TensorList& in) { return TensorList{Ref(Shape{}, r_sum(Ref::of(in[0]).v) / 12).to(kFloat32)}; }));
  return v;
}
std::vector<ErrorSample> mean_errors() {
  auto e = dim_errors([](const Tensor& x, const Ints& d) { kiln::mean(x, d); }, "mean");
  e.push_back(err("integer input", [] { kiln::mean(make_input({2}, kInt64, 1)); }, "floating point"));
  return e;
}
KILN_OP_SAMPLES(mean, mean_samples, mean_errors);

std::vector<OpSample> prod_samples() {
  auto fn = [](const Tensor& x, const Ints& d, bool k) {
    if (d.size() == 1) return kiln::prod(x, d[0], k);
    KILN_CHECK(d.empty() && !k, "prod sample: unsupported");
    return kiln::prod(x);
  };
  std::vector<OpSample> v;
  for (DType t : kAll) {
    bool fl = is_floating_point(t);
    for (const Case& c : dim_cases()) {
      if (c.dims.size() > 1 || (c.dims.empty() && c.keepdim)) continue;
      OpSample s;
      s.name = c.tag + " " + dname(t);
      // Floats near 1 keep products well scaled; integers in {-1, 0, 1, 2}.
      s.inputs = {fl ? input_for(c, t, 11, 0.5, 1.5) : input_for(c, t, 11, -1.4, 2.4)};
      Ints dims = c.dims;
      bool keepdim = c.keepdim;
      s.fn = [fn, dims, keepdim](const TensorList& in) { return TensorList{fn(in[0], dims, keepdim)}; };
      DType ot = sum_type(t);
      s.reference = [dims, keepdim, ot](const TensorList& in) {
        return TensorList{ref_apply(Ref::of(in[0]), dims, keepdim, r_prod).to(ot)};
      };
      if (is_small_float(t)) s.atol = 2e-2;
      s.check_grad = t == kFloat32;
      v.push_back(std::move(s));
    }
  }
  auto ref1 = [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {1}, false, r_prod).to(kFloat32)}; };
  auto f1 = [](const TensorList& in) { return TensorList{kiln::prod(in[0], 1)}; };
  // Rows with no zero, one zero and two zeros: the gradient must stay finite.
  v.push_back(simple("zeros in slices", {vals({1.5, 2, -0.5, 1.2, 0, 3, 0, 0.7, 0, 0.9, 1.1, 2}, {3, 4})}, f1, ref1));
  v.push_back(simple("dtype arg", {make_input({2, 3}, kInt32, 12, -3, 3)},
                     [](const TensorList& in) { return TensorList{kiln::prod(in[0], 0, true, kFloat64)}; },
                     [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {0}, true, r_prod).to(kFloat64)}; }));
  v.push_back(simple("method", {make_input({2, 3}, kFloat64, 13, 0.5, 1.5)},
                     [](const TensorList& in) { return TensorList{in[0].prod()}; },
                     [](const TensorList& in) { return TensorList{Ref(Shape{}, r_prod(Ref::of(in[0]).v)).to(kFloat64)}; }));
  return v;
}
std::vector<ErrorSample> prod_errors() {
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {err("dim out of range", [=] { kiln::prod(x, 2); }, "out of range")};
}
KILN_OP_SAMPLES(prod, prod_samples, prod_errors);

// ---- amax / amin / max / min / argmax / argmin ----

template <bool IsMax>
std::vector<OpSample> amax_samples() {
  auto fn = [](const Tensor& x, const Ints& d, bool k) { return IsMax ? kiln::amax(x, d, k) : kiln::amin(x, d, k); };
  auto v = dim_samples(kAll, fn, r_ext<IsMax>, [](DType t) { return t; }, true);
  OpFn f1 = [fn](const TensorList& in) { return TensorList{fn(in[0], {1}, false)}; };
  OpFn r1 = [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {1}, false, r_ext<IsMax>).to(in[0].dtype())}; };
  v.push_back(simple("nan propagates", {vals({1, kNan, 3, 4, 5, 6, kNan, -1}, {2, 4})}, f1, r1, false));
  v.push_back(simple("infinities", {vals({-kInf, -kInf, kInf, 1}, {2, 2})}, f1, r1, false));
  // Long contiguous runs (the vectorized path), with and without NaNs (at the
  // head, the middle and the tail of a run).
  OpFn fall = [fn](const TensorList& in) { return TensorList{fn(in[0], {}, false), fn(in[0], {1}, false)}; };
  OpFn rall = [](const TensorList& in) {
    return TensorList{ref_apply(Ref::of(in[0]), {}, false, r_ext<IsMax>).to(in[0].dtype()),
                      ref_apply(Ref::of(in[0]), {1}, false, r_ext<IsMax>).to(in[0].dtype())};
  };
  for (DType t : {kFloat32, kFloat64, kInt32}) {
    v.push_back(simple("long rows " + std::string(dtype_name(t)), {make_input({4, 1037}, t, 10, -100, 100)}, fall, rall, false));
    if (!is_floating_point(t)) continue;
    std::vector<double> x(4 * 1037);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i)) * 50;
    x[0] = kNan;                // row 0: first element
    x[1037 + 517] = kNan;       // row 1: middle of the vectorized part
    x[2 * 1037 + 1036] = kNan;  // row 2: scalar tail
    x[3 * 1037 + 3] = kInf;
    v.push_back(simple("long rows nan " + std::string(dtype_name(t)), {vals(x, {4, 1037}, t)}, fall, rall, false));
  }
  // Ties share the gradient evenly (checked against the analytic split below).
  OpSample tie = simple("ties split the gradient", {vals({2, 2, 1, 2, -1, -1}, {2, 3}, kFloat64)}, f1, r1, false);
  tie.check = [](const TensorList&) {
    Tensor x = vals({2, 2, 1, 2, -1, -1}, {2, 3}, kFloat64).requires_grad_(true);
    Tensor y = IsMax ? kiln::amax(x, Ints{1}) : kiln::amin(x, Ints{1});
    y.sum().backward();
    auto g = x.grad().to_vector<double>();
    std::vector<double> want = IsMax ? std::vector<double>{0.5, 0.5, 0, 1, 0, 0} : std::vector<double>{0, 0, 1, 0, 0.5, 0.5};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12) << "grad " << i;
  };
  v.push_back(tie);
  if (IsMax) {
    v.push_back(simple("max() full", {make_input({3, 4}, kFloat32, 7)},
                       [](const TensorList& in) { return TensorList{kiln::max(in[0]), in[0].max()}; },
                       [](const TensorList& in) {
                         Tensor r = Ref(Shape{}, r_ext<true>(Ref::of(in[0]).v)).to(kFloat32);
                         return TensorList{r, r};
                       }));
  } else {
    v.push_back(simple("min() full", {make_input({3, 4}, kInt32, 7, -9, 9)},
                       [](const TensorList& in) { return TensorList{kiln::min(in[0]), in[0].min()}; },
                       [](const TensorList& in) {
                         Tensor r = Ref(Shape{}, r_ext<false>(Ref::of(in[0]).v)).to(kInt32);
                         return TensorList{r, r};
                       }));
  }
  return v;
}
template <bool IsMax>
std::vector<ErrorSample> amax_errors() {
  const char* op = IsMax ? "amax" : "amin";
  auto e = dim_errors([](const Tensor& x, const Ints& d) { IsMax ? kiln::amax(x, d) : kiln::amin(x, d); }, op);
  e.push_back(err("empty reduced dim", [] { IsMax ? kiln::amax(make_input({0, 3}, kFloat32, 1), Ints{0}) : kiln::amin(make_input({0, 3}, kFloat32, 1), Ints{0}); },
                  std::string(op) + "(): Expected reduction dim 0 to have non-zero size"));
  e.push_back(err("full reduction of empty", [] { IsMax ? kiln::max(make_input({0}, kFloat32, 1)) : kiln::min(make_input({0}, kFloat32, 1)); },
                  IsMax ? "max(): Expected reduction dim" : "min(): Expected reduction dim"));
  return e;
}
KILN_OP_SAMPLES(amax, amax_samples<true>, amax_errors<true>);
KILN_OP_SAMPLES(amin, amax_samples<false>, amax_errors<false>);

template <bool IsMax>
std::vector<OpSample> max_dim_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 40;
  struct C {
    Shape shape;
    int64_t dim;
    bool keepdim;
    int layout;
    std::string tag;
  };
  std::vector<C> cases = {{{3, 4, 5}, 1, false, 0, "dim 1"},     {{3, 4, 5}, -1, true, 0, "dim -1 keepdim"},
                          {{3, 4, 5}, 0, false, 1, "dim 0 strided"}, {{5, 6}, 1, false, 2, "dim 1 transposed"},
                          {{}, 0, false, 0, "0-d"},               {{0, 3}, 1, false, 0, "empty kept dim"},
                          {{200, 70}, 0, false, 0, "big outer"},   {{3, 50000}, 1, true, 0, "big inner"}};
  for (DType t : kAll) {
    for (const C& c : cases) {
      if (ref_numel(c.shape) > 1000 && t != kFloat32) continue;
      OpSample s;
      s.name = c.tag + " " + dname(t);
      Case cc{c.shape, {c.dim}, c.keepdim, c.layout, c.tag};
      s.inputs = {input_for(cc, t, seed++, -3, 3)};
      int64_t dim = c.dim;
      bool keepdim = c.keepdim;
      s.fn = [dim, keepdim](const TensorList& in) {
        auto [a, b] = IsMax ? kiln::max(in[0], dim, keepdim) : kiln::min(in[0], dim, keepdim);
        return TensorList{a, b};
      };
      s.reference = [dim, keepdim](const TensorList& in) {
        Ref r = Ref::of(in[0]);
        return TensorList{ref_apply(r, {dim}, keepdim, r_ext<IsMax>).to(in[0].dtype()),
                          ref_apply(r, {dim}, keepdim, r_arg<IsMax>).to(kInt64)};
      };
      s.check_grad = t == kFloat32 && ref_numel(c.shape) <= 60;
      v.push_back(std::move(s));
    }
  }
  // Integer ties: the first index wins; NaN: the first NaN wins.
  OpFn f = [](const TensorList& in) {
    auto [a, b] = IsMax ? kiln::max(in[0], 1) : kiln::min(in[0], 1);
    return TensorList{a, b};
  };
  OpFn r = [](const TensorList& in) {
    Ref x = Ref::of(in[0]);
    return TensorList{ref_apply(x, {1}, false, r_ext<IsMax>).to(in[0].dtype()), ref_apply(x, {1}, false, r_arg<IsMax>).to(kInt64)};
  };
  v.push_back(simple("ties first index", {vals({1, 3, 3, 1, 0, 0, 0, 0}, {2, 4}, kInt32)}, f, r, false));
  v.push_back(simple("nan first", {vals({1, kNan, 3, kNan, 5, 6, 7, 8}, {2, 4})}, f, r, false));
  // Long rows (the vectorized scan): many ties of the extreme, signed zeros and
  // NaNs; one row long enough to be split over threads.
  for (DType t : {kFloat32, kFloat64}) {
    for (int64_t n : {int64_t(1037), int64_t(140003)}) {
      int64_t rows = n > 100000 ? 1 : 4;
      std::vector<double> x(static_cast<size_t>(rows * n));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7919) % 101) - 50.0;
      if (rows == 4) {
        x[0] = kNan;                     // row 0: first element
        x[n + 517] = kNan;               // row 1: two NaNs, the first wins
        x[n + 900] = kNan;
        for (int64_t k = 0; k < n; ++k)  // row 2: zeros of both signs, the first wins
          x[static_cast<size_t>(2 * n + k)] = k % 3 == 0 ? -0.0 : (k % 3 == 1 ? 0.0 : -1.0 + 2.0 * !IsMax);
      } else {
        x[static_cast<size_t>(n - 5)] = kNan;  // in the second thread's half
      }
      v.push_back(simple("long rows " + std::to_string(n) + " " + std::string(dtype_name(t)), {vals(x, {rows, n}, t)}, f,
                         r, false));
    }
  }
  return v;
}
template <bool IsMax>
std::vector<ErrorSample> max_dim_errors() {
  auto call = [](const Tensor& x, int64_t d) { IsMax ? kiln::max(x, d) : kiln::min(x, d); };
  return {err("dim out of range", [=] { call(make_input({2, 3}, kFloat32, 1), 2); }, "out of range"),
          err("empty dim", [=] { call(make_input({2, 0}, kFloat32, 1), 1); }, "Expected reduction dim 1 to have non-zero size")};
}
KILN_OP_SAMPLES(max, max_dim_samples<true>, max_dim_errors<true>);
KILN_OP_SAMPLES(min, max_dim_samples<false>, max_dim_errors<false>);

template <bool IsMax>
std::vector<OpSample> argmax_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 60;
  struct C {
    Shape shape;
    std::optional<int64_t> dim;
    bool keepdim;
    int layout;
    std::string tag;
  };
  std::vector<C> cases = {{{3, 4, 5}, std::nullopt, false, 0, "flat"}, {{3, 4, 5}, std::nullopt, true, 1, "flat keepdim strided"},
                          {{3, 4, 5}, 1, false, 0, "dim 1"},         {{5, 6}, -2, true, 2, "dim -2 transposed"},
                          {{}, std::nullopt, false, 0, "0-d"},        {{}, 0, true, 0, "0-d dim"},
                          {{100000}, std::nullopt, false, 0, "big flat (split)"}};
  for (DType t : kAll) {
    for (const C& c : cases) {
      if (ref_numel(c.shape) > 1000 && t != kFloat32) continue;
      Case cc{c.shape, {}, c.keepdim, c.layout, c.tag};
      auto dim = c.dim;
      bool keepdim = c.keepdim;
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, seed++, -3, 3)},
          [dim, keepdim](const TensorList& in) {
            return TensorList{IsMax ? kiln::argmax(in[0], dim, keepdim) : kiln::argmin(in[0], dim, keepdim)};
          },
          [dim, keepdim](const TensorList& in) {
            Ref r = Ref::of(in[0]);
            if (dim) return TensorList{ref_apply(r, {*dim}, keepdim, r_arg<IsMax>).to(kInt64)};
            Ref flat = r;
            flat.shape = {r.numel()};
            Ref o = ref_apply(flat, {}, false, r_arg<IsMax>);
            if (keepdim) o.shape = Shape(r.dim(), 1);
            return TensorList{o.to(kInt64)};
          },
          false);
      v.push_back(std::move(s));
    }
  }
  v.push_back(simple("nan and ties", {vals({2, 2, kNan, 1, kNan}, {5})},
                     [](const TensorList& in) { return TensorList{IsMax ? in[0].argmax() : in[0].argmin()}; },
                     [](const TensorList&) { return TensorList{vals({2}, {}, kInt64)}; }, false));
  return v;
}
template <bool IsMax>
std::vector<ErrorSample> argmax_errors() {
  return {err("empty without dim", [] { IsMax ? kiln::argmax(make_input({0}, kFloat32, 1)) : kiln::argmin(make_input({0}, kFloat32, 1)); },
              "Expected reduction dim to be specified for input.numel() == 0"),
          err("dim out of range", [] { IsMax ? kiln::argmax(make_input({2}, kFloat32, 1), 1) : kiln::argmin(make_input({2}, kFloat32, 1), 1); },
              "out of range")};
}
KILN_OP_SAMPLES(argmax, argmax_samples<true>, argmax_errors<true>);
KILN_OP_SAMPLES(argmin, argmax_samples<false>, argmax_errors<false>);

// ---- var / std / var_mean ----

enum class VarKind { Var, Std, VarMean, StdMean };
template <VarKind K>
std::vector<OpSample> var_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 80;
  for (DType t : kFloats) {
    for (const Case& c : dim_cases()) {
      if (ref_numel(c.shape) == 0 && K == VarKind::Std) continue;
      for (double corr : {1.0, 0.0, 2.0}) {
        if (corr != 1.0 && t != kFloat64) continue;
        Ints dims = c.dims;
        bool keepdim = c.keepdim;
        OpSample s = simple(
            c.tag + " corr " + std::to_string(int(corr)) + " " + dname(t), {input_for(c, t, seed++)},
            [dims, keepdim, corr](const TensorList& in) {
              std::optional<Scalar> cr = corr == 1.0 ? std::nullopt : std::optional<Scalar>(corr);
              if (K == VarKind::Var) return TensorList{kiln::var(in[0], dims, cr, keepdim)};
              if (K == VarKind::Std) return TensorList{kiln::std(in[0], dims, cr, keepdim)};
              auto [a, b] = K == VarKind::VarMean ? kiln::var_mean(in[0], dims, cr, keepdim)
                                                  : kiln::std_mean(in[0], dims, cr, keepdim);
              return TensorList{a, b};
            },
            [dims, keepdim, corr](const TensorList& in) {
              Ref r = Ref::of(in[0]);
              DType ot = in[0].dtype();
              Tensor var = ref_apply(r, dims, keepdim, [corr](const std::vector<double>& s) {
                             double x = r_var(s, corr);
                             return K == VarKind::Var || K == VarKind::VarMean ? x : std::sqrt(x);
                           }).to(ot);
              if (K == VarKind::Var || K == VarKind::Std) return TensorList{var};
              return TensorList{var, ref_apply(r, dims, keepdim, [](const std::vector<double>& s) {
                                       return r_sum(s) / static_cast<double>(s.size());
                                     }).to(ot)};
            });
        if (is_small_float(t)) s.atol = 2e-2;
        // Slices of one element with correction 1 give nan/inf: no gradient there.
        int64_t n = 1;
        for (size_t d = 0; d < c.shape.size(); ++d)
          if (c.dims.empty() || std::find(c.dims.begin(), c.dims.end(), int64_t(d)) != c.dims.end() ||
              std::find(c.dims.begin(), c.dims.end(), int64_t(d) - int64_t(c.shape.size())) != c.dims.end())
            n *= c.shape[d];
        s.check_grad = t == kFloat64 && n > 2 && ref_numel(c.shape) <= 60;
        v.push_back(std::move(s));
      }
    }
  }
  return v;
}
template <VarKind K>
std::vector<ErrorSample> var_errors() {
  return {err("integer input", [] { kiln::var(make_input({3}, kInt32, 1)); }, "floating point"),
          err("dim out of range", [] { kiln::var(make_input({3}, kFloat32, 1), Ints{1}); }, "out of range")};
}
KILN_OP_SAMPLES(var, var_samples<VarKind::Var>, var_errors<VarKind::Var>);
KILN_OP_SAMPLES(std, var_samples<VarKind::Std>, var_errors<VarKind::Std>);
// std_mean has no op of its own (var_mean + sqrt): its samples ride on var_mean's test.
std::vector<OpSample> var_mean_samples() {
  auto v = var_samples<VarKind::VarMean>();
  for (auto& s : var_samples<VarKind::StdMean>()) {
    s.name = "std_mean " + s.name;
    v.push_back(std::move(s));
  }
  return v;
}
KILN_OP_SAMPLES(var_mean, var_mean_samples, var_errors<VarKind::VarMean>);

// ---- logsumexp ----

double r_lse(const std::vector<double>& s) {
  double m = -kInf;
  for (double x : s) m = std::max(m, x);
  if (std::isinf(m)) m = 0;
  double acc = 0;
  for (double x : s) acc += std::exp(x - m);
  return std::log(acc) + m;
}
std::vector<OpSample> logsumexp_samples() {
  auto v = dim_samples(
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kBool},
      [](const Tensor& x, const Ints& d, bool k) { return kiln::logsumexp(x, d, k); }, r_lse,
      [](DType t) { return is_floating_point(t) ? t : kFloat32; }, false, -3, 3, false);
  OpFn f = [](const TensorList& in) { return TensorList{kiln::logsumexp(in[0], Ints{1})}; };
  OpFn r = [](const TensorList& in) { return TensorList{ref_apply(Ref::of(in[0]), {1}, false, r_lse).to(in[0].dtype())}; };
  v.push_back(simple("-inf and +inf rows", {vals({-kInf, -kInf, -kInf, 1, kInf, 2, 1000, 1000, -1000}, {3, 3})}, f, r, false));
  v.push_back(simple("large values stable", {vals({1000, 1001, 999, -500, -501, -502}, {2, 3})}, f, r));
  return v;
}
std::vector<ErrorSample> logsumexp_errors() {
  return dim_errors([](const Tensor& x, const Ints& d) { kiln::logsumexp(x, d); }, "logsumexp");
}
KILN_OP_SAMPLES(logsumexp, logsumexp_samples, logsumexp_errors);

// ---- norm ----

std::function<double(const std::vector<double>&)> r_norm(double p) {
  return [p](const std::vector<double>& s) {
    if (std::isinf(p)) {
      double b = p > 0 ? 0 : kInf;
      for (double x : s) b = p > 0 ? std::max(b, std::abs(x)) : std::min(b, std::abs(x));
      return b;
    }
    double acc = 0;
    for (double x : s) acc += p == 0 ? (x != 0) : std::pow(std::abs(x), p);
    return p == 0 ? acc : std::pow(acc, 1.0 / p);
  };
}
std::vector<OpSample> norm_samples() {
  std::vector<OpSample> v;
  for (double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5}) {
    auto pv = dim_samples(
        {kFloat32, kFloat64, kBFloat16},
        [p](const Tensor& x, const Ints& d, bool k) { return kiln::norm(x, p, d, k); }, r_norm(p),
        [](DType t) { return t; }, std::isinf(p) || p < 0, 0.2, 2, false);
    for (auto& s : pv) {
      s.name = "p=" + std::to_string(p) + " " + s.name;
      if (p == 0) s.check_grad = false;
      v.push_back(std::move(s));
    }
  }
  // A zero vector: the 2-norm's gradient is 0, not nan.
  OpSample z = simple("zero row", {vals({0, 0, 0, 1, -2, 2}, {2, 3}, kFloat64)},
                      [](const TensorList& in) { return TensorList{kiln::norm(in[0], 2, Ints{1})}; },
                      [](const TensorList&) { return TensorList{vals({0, 3}, {2}, kFloat64)}; }, false);
  z.check = [](const TensorList&) {
    Tensor x = vals({0, 0, 0, 1, -2, 2}, {2, 3}, kFloat64).requires_grad_(true);
    kiln::norm(x, 2, Ints{1}).sum().backward();
    auto g = x.grad().to_vector<double>();
    std::vector<double> want{0, 0, 0, 1.0 / 3, -2.0 / 3, 2.0 / 3};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12) << "grad " << i;
  };
  v.push_back(z);
  v.push_back(simple("method default", {make_input({3, 4}, kFloat64, 9)},
                     [](const TensorList& in) { return TensorList{in[0].norm()}; },
                     [](const TensorList& in) { return TensorList{Ref(Shape{}, r_norm(2)(Ref::of(in[0]).v)).to(kFloat64)}; }));
  return v;
}
std::vector<ErrorSample> norm_errors() {
  auto e = dim_errors([](const Tensor& x, const Ints& d) { kiln::norm(x, 2, d); }, "norm");
  e.push_back(err("integer input", [] { kiln::norm(make_input({3}, kInt64, 1)); }, "floating point"));
  e.push_back(err("inf norm of empty", [] { kiln::norm(make_input({0}, kFloat32, 1), kInf); }, "non-zero size"));
  return e;
}
KILN_OP_SAMPLES(norm, norm_samples, norm_errors);

// ---- all / any ----

template <bool IsAll>
std::vector<OpSample> logical_samples() {
  auto ref = [](const std::vector<double>& s) {
    bool r = IsAll;
    for (double x : s) r = IsAll ? (r && x != 0) : (r || x != 0);
    return r ? 1.0 : 0.0;
  };
  std::vector<OpSample> v;
  for (DType t : kAll) {
    for (const Case& c : dim_cases()) {
      if (c.dims.size() > 1) continue;
      Ints dims = c.dims;
      bool keepdim = c.keepdim;
      // Mostly non-zero values, some zeros, so both answers occur.
      double lo = t == kBool ? -2 : -0.8, hi = t == kBool ? 2 : 6;
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(c, t, 90, lo, hi)},
          [dims, keepdim](const TensorList& in) {
            if (dims.empty()) return TensorList{IsAll ? kiln::all(in[0]) : kiln::any(in[0])};
            return TensorList{IsAll ? kiln::all(in[0], dims[0], keepdim) : kiln::any(in[0], dims[0], keepdim)};
          },
          [dims, keepdim, ref](const TensorList& in) {
            bool full = dims.empty();
            DType ot = in[0].dtype() == kUInt8 ? kUInt8 : kBool;
            return TensorList{ref_apply(Ref::of(in[0]), dims, full ? false : keepdim, ref).to(ot)};
          },
          false);
      v.push_back(std::move(s));
    }
  }
  v.push_back(simple("nan is true, method", {vals({kNan, 1, 0, 0}, {2, 2})},
                     [](const TensorList& in) { return TensorList{IsAll ? in[0].all() : in[0].any()}; },
                     [](const TensorList&) { return TensorList{vals({IsAll ? 0.0 : 1.0}, {}, kBool)}; }, false));
  return v;
}
template <bool IsAll>
std::vector<ErrorSample> logical_errors() {
  return {err("dim out of range", [] { IsAll ? kiln::all(make_input({2}, kFloat32, 1), 1) : kiln::any(make_input({2}, kFloat32, 1), 1); },
              "out of range")};
}
KILN_OP_SAMPLES(all, logical_samples<true>, logical_errors<true>);
KILN_OP_SAMPLES(any, logical_samples<false>, logical_errors<false>);

// ---- cumsum / cumprod ----

template <bool IsSum>
Ref ref_scan(const Ref& a, int64_t dim) {
  Ref r(a.shape);
  int64_t nd = a.dim();
  if (nd == 0) {
    r.v = a.v;
    return r;
  }
  int64_t d = dim < 0 ? dim + nd : dim;
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape idx = unravel(i, a.shape);
    double acc = IsSum ? 0 : 1;
    Shape j = idx;
    for (int64_t k = 0; k <= idx[d]; ++k) {
      j[d] = k;
      acc = IsSum ? acc + a.at(j) : acc * a.at(j);
    }
    r.v[i] = acc;
  }
  return r;
}

template <bool IsSum>
std::vector<OpSample> scan_samples() {
  std::vector<OpSample> v;
  struct C {
    Shape shape;
    int64_t dim;
    int layout;
    std::string tag;
  };
  std::vector<C> cases = {{{3, 4, 5}, 1, 0, "dim 1"},         {{3, 4, 5}, -1, 0, "dim -1"},
                          {{3, 4, 5}, 0, 1, "dim 0 strided"}, {{5, 6}, 1, 2, "dim 1 transposed"},
                          {{}, 0, 0, "0-d"},                  {{0, 3}, 1, 0, "empty"},
                          {{2, 0}, 1, 0, "empty scanned dim"}};
  for (DType t : kAll) {
    for (const C& c : cases) {
      Case cc{c.shape, {}, false, c.layout, c.tag};
      int64_t dim = c.dim;
      bool fl = is_floating_point(t);
      double lo = IsSum ? -2 : (fl ? 0.5 : -1.4), hi = IsSum ? 2 : (fl ? 1.5 : 2.4);
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, 100, lo, hi)},
          [dim](const TensorList& in) { return TensorList{IsSum ? kiln::cumsum(in[0], dim) : kiln::cumprod(in[0], dim)}; },
          [dim](const TensorList& in) { return TensorList{ref_scan<IsSum>(Ref::of(in[0]), dim).to(sum_type(in[0].dtype()))}; },
          t == kFloat32);
      if (is_small_float(t)) s.atol = 2e-2;
      v.push_back(std::move(s));
    }
  }
  OpFn f = [](const TensorList& in) { return TensorList{IsSum ? kiln::cumsum(in[0], 1) : kiln::cumprod(in[0], 1)}; };
  OpFn r = [](const TensorList& in) { return TensorList{ref_scan<IsSum>(Ref::of(in[0]), 1).to(in[0].dtype())}; };
  // Rows with no zero, one zero, two zeros (the cumprod gradient must handle them).
  v.push_back(simple("zeros", {vals({1.5, 2, -0.5, 1.2, 0.5, 0, 3, 0.7, 0, 0.9, 0, 2}, {3, 4})}, f, r));
  v.push_back(simple("dtype arg", {make_input({3, 4}, kFloat32, 7, 0.5, 1.5)},
                     [](const TensorList& in) {
                       return TensorList{IsSum ? kiln::cumsum(in[0], 0, kFloat64) : kiln::cumprod(in[0], 0, kFloat64)};
                     },
                     [](const TensorList& in) { return TensorList{ref_scan<IsSum>(Ref::of(in[0]), 0).to(kFloat64)}; }));
  v.push_back(simple("big", {make_input({100, 300}, kFloat32, 8, 0.99, 1.01)},
                     [](const TensorList& in) { return TensorList{IsSum ? kiln::cumsum(in[0], 0) : kiln::cumprod(in[0], 1)}; },
                     [](const TensorList& in) { return TensorList{ref_scan<IsSum>(Ref::of(in[0]), IsSum ? 0 : 1).to(kFloat32)}; },
                     false));
  v.back().rtol = 1e-5;
  return v;
}
template <bool IsSum>
std::vector<ErrorSample> scan_errors() {
  return {err("dim out of range", [] { IsSum ? kiln::cumsum(make_input({2}, kFloat32, 1), 1) : kiln::cumprod(make_input({2}, kFloat32, 1), 1); },
              "out of range")};
}
KILN_OP_SAMPLES(cumsum, scan_samples<true>, scan_errors<true>);
KILN_OP_SAMPLES(cumprod, scan_samples<false>, scan_errors<false>);

// ---- nansum / nanmean / count_nonzero / aminmax ----

double r_nansum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    if (!std::isnan(x)) s += x;
  return s;
}
double r_nanmean(const std::vector<double>& v) {
  double s = 0, n = 0;
  for (double x : v)
    if (!std::isnan(x)) s += x, n += 1;
  return s / n;  // 0/0: NaN where every value is NaN, as torch
}
// A [3, 4, 5] float input with NaNs at scattered places, and its row (dim 2) [1, 2] all NaN.
Tensor nan_input(DType t, uint64_t seed) {
  Ref r = Ref::of(make_input({3, 4, 5}, kFloat64, seed));
  for (int64_t i = 0; i < r.numel(); i += 7) r.v[i] = kNan;
  for (int64_t k = 0; k < 5; ++k) r.at({1, 2, k}) = kNan;
  return r.to(t);
}

template <bool IsMean>
std::vector<OpSample> nansum_samples() {
  auto fn = [](const Tensor& x, const Ints& d, bool k) {
    return IsMean ? kiln::nanmean(x, d, k) : kiln::nansum(x, d, k);
  };
  auto v = dim_samples(IsMean ? kFloats : kAll, fn, IsMean ? r_nanmean : r_nansum,
                       IsMean ? std::function<DType(DType)>([](DType t) { return t; }) : sum_type, false, -2, 2, false);
  for (const Ints& dims : {Ints{}, Ints{2}, Ints{0, -1}, Ints{1}}) {
    for (DType t : {kFloat32, kFloat64, kFloat16}) {
      OpSample s = simple(
          "nan inputs dims " + shape_str(dims) + " " + dname(t), {nan_input(t, 21)},
          [dims](const TensorList& in) {
            return TensorList{IsMean ? kiln::nanmean(in[0], dims, true) : kiln::nansum(in[0], dims, true)};
          },
          [dims](const TensorList& in) {
            return TensorList{ref_apply(Ref::of(in[0]), dims, true, IsMean ? r_nanmean : r_nansum).to(in[0].dtype())};
          },
          // nanmean's all-NaN row gives NaN, whose finite differences are NaN.
          t == kFloat32 && (!IsMean || dims.size() != 1 || dims[0] != 2));
      if (t == kFloat16) s.atol = 2e-2;
      v.push_back(std::move(s));
    }
  }
  v.push_back(simple(
      "dtype arg and method form", {nan_input(kFloat16, 22)},
      [](const TensorList& in) {
        return TensorList{IsMean ? kiln::nanmean(in[0], kFloat64) : kiln::nansum(in[0], kFloat64)};
      },
      [](const TensorList& in) {
        return TensorList{ref_apply(Ref::of(in[0]), {}, false, IsMean ? r_nanmean : r_nansum).to(kFloat64)};
      },
      false));
  return v;
}
template <bool IsMean>
std::vector<ErrorSample> nansum_errors() {
  const char* op = IsMean ? "nanmean" : "nansum";
  auto e = dim_errors([](const Tensor& x, const Ints& d) { IsMean ? kiln::nanmean(x, d) : kiln::nansum(x, d); }, op);
  if (IsMean)
    e.push_back(err(
        "integer input even with a dtype", [] { kiln::nanmean(make_input({3}, kInt64, 1), kFloat64); },
        "nanmean(): expected input to have floating point dtype but got"));
  return e;
}
KILN_OP_SAMPLES(nansum, nansum_samples<false>, nansum_errors<false>);
KILN_OP_SAMPLES(nanmean, nansum_samples<true>, nansum_errors<true>);

std::vector<OpSample> count_nonzero_samples() {
  auto ref = [](const std::vector<double>& v) {
    double n = 0;
    for (double x : v) n += x != 0;  // NaN != 0
    return n;
  };
  std::vector<OpSample> v;
  uint64_t seed = 120;
  for (DType t : kAll) {
    for (const Case& c : dim_cases()) {
      if (c.keepdim) continue;
      Ints dims = c.dims;
      v.push_back(simple(
          c.tag + " " + dname(t), {input_for(c, t, seed++, -1.2, 1.2)},
          [dims](const TensorList& in) { return TensorList{kiln::count_nonzero(in[0], dims)}; },
          [dims, ref](const TensorList& in) {
            return TensorList{ref_apply(Ref::of(in[0]), dims, false, ref).to(kInt64)};
          },
          false));
    }
  }
  v.push_back(simple(
      "int dim -1, nan counts", {nan_input(kFloat32, 23)},
      [](const TensorList& in) {
        return TensorList{kiln::count_nonzero(in[0], int64_t(-1)), kiln::count_nonzero(in[0])};
      },
      [ref](const TensorList& in) {
        Ref r = Ref::of(in[0]);
        return TensorList{ref_apply(r, {-1}, false, ref).to(kInt64), ref_apply(r, {}, false, ref).to(kInt64)};
      },
      false));
  return v;
}
std::vector<ErrorSample> count_nonzero_errors() {
  return dim_errors([](const Tensor& x, const Ints& d) { kiln::count_nonzero(x, d); }, "count_nonzero");
}
KILN_OP_SAMPLES(count_nonzero, count_nonzero_samples, count_nonzero_errors);

std::vector<OpSample> aminmax_samples() {
  struct C {
    Shape shape;
    std::optional<int64_t> dim;
    bool keepdim;
    int layout;
    std::string tag;
  };
  std::vector<C> cases = {{{3, 4, 5}, std::nullopt, false, 0, "all"},
                          {{3, 4, 5}, std::nullopt, true, 1, "all keepdim strided"},
                          {{3, 4, 5}, 1, false, 0, "dim 1"},
                          {{3, 4, 5}, -1, true, 0, "dim -1 keepdim"},
                          {{5, 6}, 0, false, 2, "dim 0 transposed"},
                          {{}, std::nullopt, false, 0, "0-d"},
                          {{}, 0, true, 0, "0-d dim 0"},
                          {{0, 3}, 1, false, 0, "empty kept dim"}};
  std::vector<OpSample> v;
  uint64_t seed = 140;
  for (DType t : kAll) {
    for (const C& c : cases) {
      auto dim = c.dim;
      bool keepdim = c.keepdim;
      Case cc{c.shape, {}, keepdim, c.layout, c.tag};
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, seed++, -3, 3)},
          [dim, keepdim](const TensorList& in) {
            auto [a, b] = kiln::aminmax(in[0], dim, keepdim);
            return TensorList{a, b};
          },
          [dim, keepdim](const TensorList& in) {
            Ref r = Ref::of(in[0]);
            Ints dims = dim ? Ints{*dim} : Ints{};
            return TensorList{ref_apply(r, dims, keepdim, r_ext<false>).to(in[0].dtype()),
                              ref_apply(r, dims, keepdim, r_ext<true>).to(in[0].dtype())};
          },
          t == kFloat32);
      v.push_back(std::move(s));
    }
  }
  v.push_back(simple(
      "nan propagates", {nan_input(kFloat64, 24)},
      [](const TensorList& in) {
        auto [a, b] = kiln::aminmax(in[0], 2);
        auto [c, d] = kiln::aminmax(in[0]);
        return TensorList{a, b, c, d};
      },
      [](const TensorList& in) {
        Ref r = Ref::of(in[0]);
        return TensorList{
            ref_apply(r, {2}, false, r_ext<false>).to(kFloat64), ref_apply(r, {2}, false, r_ext<true>).to(kFloat64),
            ref_apply(r, {}, false, r_ext<false>).to(kFloat64), ref_apply(r, {}, false, r_ext<true>).to(kFloat64)};
      },
      false));
  return v;
}
std::vector<ErrorSample> aminmax_errors() {
  return {err(
              "empty over every element",
              [] {
                kiln::aminmax(make_input({0, 2}, kFloat32, 1));
              },
              "aminmax(): cannot compute aminmax over an empty dimension"),
          err(
              "empty dim",
              [] {
                kiln::aminmax(make_input({0, 2}, kFloat32, 1), 0);
              },
              "aminmax(): Expected reduction dim 0 to have non-zero size"),
          err(
              "dim out of range",
              [] {
                kiln::aminmax(make_input({2, 3}, kFloat32, 1), -3);
              },
              "aminmax")};
}
KILN_OP_SAMPLES(aminmax, aminmax_samples, aminmax_errors);

// ---- cummax / cummin / logcumsumexp ----

// torch's rule, one element at a time: a NaN always takes over; otherwise x
// takes over when it is >= (cummax) or <= (cummin) the running value.
template <bool IsMax>
std::pair<Ref, Ref> ref_cumext(const Ref& a, int64_t dim) {
  Ref val(a.shape), idx(a.shape);
  if (a.dim() == 0) {
    val.v = a.v;
    return {val, idx};
  }
  int64_t d = dim < 0 ? dim + a.dim() : dim;
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape j = unravel(i, a.shape);
    int64_t end = j[d];
    j[d] = 0;
    double best = a.at(j);
    int64_t bi = 0;
    for (int64_t k = 1; k <= end; ++k) {
      j[d] = k;
      double x = a.at(j);
      if (std::isnan(x) || (!std::isnan(best) && (IsMax ? x >= best : x <= best))) best = x, bi = k;
    }
    val.v[i] = best;
    idx.v[i] = static_cast<double>(bi);
  }
  return {val, idx};
}
Ref ref_lcse(const Ref& a, int64_t dim) {
  Ref r(a.shape);
  if (a.dim() == 0) {
    r.v = a.v;
    return r;
  }
  int64_t d = dim < 0 ? dim + a.dim() : dim;
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape j = unravel(i, a.shape);
    int64_t end = j[d];
    std::vector<double> pre;
    for (int64_t k = 0; k <= end; ++k) {
      j[d] = k;
      pre.push_back(a.at(j));
    }
    r.v[i] = r_lse(pre);
  }
  return r;
}

struct ScanCase {
  Shape shape;
  int64_t dim;
  int layout;
  std::string tag;
};
std::vector<ScanCase> scan_cases() {
  return {{{3, 4, 5}, 1, 0, "dim 1"},
          {{3, 4, 5}, -1, 0, "dim -1"},
          {{3, 4, 5}, 0, 1, "dim 0 strided"},
          {{5, 6}, 1, 2, "dim 1 transposed"},
          {{}, 0, 0, "0-d"},
          {{}, -1, 0, "0-d dim -1"},
          {{0, 3}, 1, 0, "empty"},
          {{2, 0}, 1, 0, "empty scanned dim"},
          {{3, 37}, -1, 0, "37 long (6 steps)"}};
}

template <bool IsMax>
std::vector<OpSample> cumext_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 160;
  auto run = [](const Tensor& x, int64_t dim) { return IsMax ? kiln::cummax(x, dim) : kiln::cummin(x, dim); };
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}) {
    for (const ScanCase& c : scan_cases()) {
      int64_t dim = c.dim;
      Case cc{c.shape, {}, false, c.layout, c.tag};
      // Integers in [-3, 3]: many ties, which take the later index.
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, seed++, t == kUInt8 ? 0 : -3, 3)},
          [run, dim](const TensorList& in) {
            auto [a, b] = run(in[0], dim);
            return TensorList{a, b};
          },
          [dim](const TensorList& in) {
            auto [a, b] = ref_cumext<IsMax>(Ref::of(in[0]), dim);
            return TensorList{a.to(in[0].dtype()), b.to(kInt64)};
          },
          t == kFloat32 && ref_numel(c.shape) <= 60);
      v.push_back(std::move(s));
    }
  }
  // NaN first, in the middle, twice (the later NaN takes the index), and last.
  v.push_back(simple(
      "nan positions",
      {vals({kNan, 1, 2, 0, 3, kNan, 5, kNan, 0, -1, 2, kNan, 1, 2, 3, 4, -kInf, kInf, 0, kNan}, {4, 5}, kFloat64)},
      [run](const TensorList& in) {
        auto [a, b] = run(in[0], 1);
        return TensorList{a, b};
      },
      [](const TensorList& in) {
        auto [a, b] = ref_cumext<IsMax>(Ref::of(in[0]), 1);
        return TensorList{a.to(kFloat64), b.to(kInt64)};
      },
      false));
  // Ties take the later index, so the gradient goes there (torch: [0, 1, 2, 2, 4]).
  OpSample tie = simple(
      "ties take the later index", {vals({1, 3, 3, 2, 3}, {5}, kFloat64)},
      [run](const TensorList& in) {
        auto [a, b] = run(IsMax ? in[0] : kiln::neg(in[0]), 0);
        return TensorList{a, b};
      },
      [](const TensorList& in) {
        Ref x = Ref::of(in[0]);
        if (!IsMax) x = ref_map(x, [](double a) { return -a; });
        auto [a, b] = ref_cumext<IsMax>(x, 0);
        return TensorList{a.to(kFloat64), b.to(kInt64)};
      },
      false);
  tie.check = [run](const TensorList& out) {
    EXPECT_EQ(out[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, 4}));
    Tensor x = vals({1, 3, 3, 2, 3}, {5}, kFloat64).requires_grad_(true);
    std::get<0>(run(IsMax ? x : kiln::neg(x), 0)).sum().backward();
    auto g = x.grad().to_vector<double>();
    std::vector<double> want{1, 1, 2, 0, 1};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], IsMax ? want[i] : -want[i], 1e-12) << "grad " << i;
  };
  v.push_back(tie);
  return v;
}
template <bool IsMax>
std::vector<ErrorSample> cumext_errors() {
  return {
      err(
          "dim out of range",
          [] {
            IsMax ? kiln::cummax(make_input({2, 3}, kFloat32, 1), 2) : kiln::cummin(make_input({2, 3}, kFloat32, 1), 2);
          },
          IsMax ? "cummax" : "cummin"),
      err(
          "negative dim out of range",
          [] {
            IsMax ? kiln::cummax(make_input({2}, kFloat32, 1), -2) : kiln::cummin(make_input({2}, kFloat32, 1), -2);
          },
          "out of range")};
}
KILN_OP_SAMPLES(cummax, cumext_samples<true>, cumext_errors<true>);
KILN_OP_SAMPLES(cummin, cumext_samples<false>, cumext_errors<false>);

std::vector<OpSample> logcumsumexp_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 180;
  for (DType t : kFloats) {
    for (const ScanCase& c : scan_cases()) {
      int64_t dim = c.dim;
      Case cc{c.shape, {}, false, c.layout, c.tag};
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, seed++, -3, 3)},
          [dim](const TensorList& in) { return TensorList{kiln::logcumsumexp(in[0], dim)}; },
          [dim](const TensorList& in) { return TensorList{ref_lcse(Ref::of(in[0]), dim).to(in[0].dtype())}; },
          t == kFloat32 && ref_numel(c.shape) <= 60);
      if (is_small_float(t)) s.atol = 2e-2;
      v.push_back(std::move(s));
    }
  }
  OpFn f = [](const TensorList& in) { return TensorList{kiln::logcumsumexp(in[0], 1)}; };
  OpFn r = [](const TensorList& in) { return TensorList{ref_lcse(Ref::of(in[0]), 1).to(in[0].dtype())}; };
  // A small prefix under a much larger later value stays exact (no single global shift).
  v.push_back(
      simple("wide range", {vals({-1000, 0, -1000, 5, 800, 1000, 999, -5, 3, -30, 60, 2}, {3, 4}, kFloat64)}, f, r));
  v.push_back(simple("infinities and nan", {vals({-kInf, -kInf, 1, kInf, 2, kNan, 0, 1, -kInf, 3, -kInf, 4}, {3, 4})},
                     f, r, false));
  return v;
}
std::vector<ErrorSample> logcumsumexp_errors() {
  return {err(
              "integer input", [] { kiln::logcumsumexp(make_input({3}, kInt64, 1), 0); },
              "logcumsumexp: expected a floating point input"),
          err(
              "dim out of range",
              [] {
                kiln::logcumsumexp(make_input({2, 3}, kFloat32, 1), -3);
              },
              "logcumsumexp")};
}
KILN_OP_SAMPLES(logcumsumexp, logcumsumexp_samples, logcumsumexp_errors);

}  // namespace
}  // namespace kiln::test
