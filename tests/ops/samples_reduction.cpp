// Samples for the reductions of ops.def: several dim lists, negative dims,
// keepdim both ways, strided and transposed inputs, empty and 0-d tensors,
// every dtype; references are naive fp64 loops over slices.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {
using Ints = std::vector<int64_t>;

const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kInt16, kInt32, kInt64, kUInt8, kBool};
const std::vector<DType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Gathers the slices of `a` over `dims` (empty: all): one vector of values per
// output element, in the row-major order of the slice.
struct Slices {
  Shape out_shape;
  std::vector<std::vector<double>> vals;
};
Slices ref_slices(const Ref& a, Ints dims, bool keepdim) {
  int64_t nd = a.dim();
  std::vector<bool> red(nd, dims.empty());
  if (nd > 0)
    for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Shape kept;
  for (int64_t i = 0; i < nd; ++i) kept.push_back(red[i] ? 1 : a.shape[i]);
  Slices s;
  s.vals.resize(ref_numel(kept));
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape idx = unravel(i, a.shape);
    for (int64_t d = 0; d < nd; ++d)
      if (red[d]) idx[d] = 0;
    s.vals[ravel(idx, kept)].push_back(a.v[i]);
  }
  for (int64_t i = 0; i < nd; ++i)
    if (!red[i] || keepdim) s.out_shape.push_back(red[i] ? 1 : a.shape[i]);
  return s;
}
Ref ref_apply(const Ref& a, const Ints& dims, bool keepdim, const std::function<double(const std::vector<double>&)>& f) {
  Slices s = ref_slices(a, dims, keepdim);
  Ref r(s.out_shape);
  for (size_t i = 0; i < s.vals.size(); ++i) r.v[i] = f(s.vals[i]);
  return r;
}

double r_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double r_prod(const std::vector<double>& v) {
  double s = 1;
  for (double x : v) s *= x;
  return s;
}
template <bool IsMax>
double r_ext(const std::vector<double>& v) {
  double b = IsMax ? -kInf : kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    b = IsMax ? std::max(b, x) : std::min(b, x);
  }
  return b;
}
template <bool IsMax>
double r_arg(const std::vector<double>& v) {
  int64_t bi = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[bi])) break;
    if (std::isnan(v[i]) || (IsMax ? v[i] > v[bi] : v[i] < v[bi])) bi = static_cast<int64_t>(i);
  }
  return static_cast<double>(bi);
}
double r_var(const std::vector<double>& v, double corr) {
  double m = r_sum(v) / static_cast<double>(v.size()), ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / std::max(0.0, static_cast<double>(v.size()) - corr);
}

struct Case {
  Shape shape;
  Ints dims;
  bool keepdim;
  int layout;  // 0 contiguous, 1 strided last dim, 2 transposed (dims 0 and 1 swapped)
  std::string tag;
};
std::vector<Case> dim_cases() {
  return {
      {{3, 4, 5}, {}, false, 0, "all"},
      {{3, 4, 5}, {1}, false, 0, "dim 1"},
      {{3, 4, 5}, {-1}, true, 0, "dim -1 keepdim"},
      {{3, 4, 5}, {0, 2}, false, 0, "dims 0,2"},
      {{3, 4, 5}, {0}, true, 0, "dim 0 keepdim"},
      {{3, 4, 5}, {2, -3}, true, 1, "dims 2,-3 strided keepdim"},
      {{4, 6}, {1}, false, 1, "dim 1 strided"},
      {{5, 6}, {0}, false, 2, "dim 0 transposed"},
      {{5, 6}, {1}, false, 2, "dim 1 transposed"},
      {{}, {}, false, 0, "0-d"},
      {{}, {0}, true, 0, "0-d dim 0"},
      {{2, 0, 3}, {1}, false, 0, "empty reduced dim"},
      {{0, 3}, {1}, true, 0, "empty kept dim"},
  };
}
// Larger inputs that reach the vectorized, row-accumulating and split loops.
std::vector<Case> big_cases() {
  return {
      {{3000}, {}, false, 0, "big full"},
      {{7, 1000}, {1}, false, 0, "big inner"},
      {{1000, 67}, {0}, false, 0, "big outer"},
      {{20000, 3}, {0}, false, 0, "big outer narrow (split)"},
      {{40, 30, 20}, {0, 2}, true, 0, "big mixed"},
      {{300, 40}, {0}, false, 2, "big transposed"},
  };
}

std::string dname(DType t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

Tensor input_for(const Case& c, DType t, uint64_t seed, double lo = -2, double hi = 2) {
  if (c.layout == 2) {
    Shape s = c.shape;
    std::swap(s[0], s[1]);
    return make_input(s, t, seed, lo, hi).transpose(0, 1);
  }
  return make_input(c.shape, t, seed, lo, hi, c.layout == 1);
}

bool is_small_float(DType t) { return t == kFloat16 || t == kBFloat16; }
DType sum_type(DType t) { return is_floating_point(t) ? t : kInt64; }

// Samples of a dim-list reduction: fn(x, dims, keepdim), a slice reference and its output dtype.
using DimFn = std::function<Tensor(const Tensor&, const Ints&, bool)>;
std::vector<OpSample> dim_samples(const std::vector<DType>& dtypes, const DimFn& fn,
                                  const std::function<double(const std::vector<double>&)>& ref,
                                  const std::function<DType(DType)>& out_type, bool skip_empty, double lo = -2,
                                  double hi = 2, bool big = true) {
  std::vector<OpSample> out;
  uint64_t seed = 1;
  for (DType t : dtypes) {
    auto cases = dim_cases();
    if (big && (t == kFloat32 || t == kInt32)) {
      auto b = big_cases();
      cases.insert(cases.end(), b.begin(), b.end());
    }
    for (const Case& c : cases) {
      if (skip_empty && ref_numel(c.shape) == 0) continue;
      OpSample s;
      s.name = c.tag + " " + dname(t);
      s.inputs = {input_for(c, t, seed++, lo, hi)};
      Ints dims = c.dims;
      bool keepdim = c.keepdim;
      s.fn = [fn, dims, keepdim](const TensorList& in) { return TensorList{fn(in[0], dims, keepdim)}; };
      DType ot = out_type(t);
      s.reference = [ref, dims, keepdim, ot](const TensorList& in) {
        return TensorList{ref_apply(Ref::of(in[0]), dims, keepdim, ref).to(ot)};
      };
      if (is_small_float(t)) s.atol = 2e-2;
      if (t == kFloat32 && ref_numel(c.shape) > 200) s.atol = 1e-4;
      s.check_grad = t == kFloat32 && ref_numel(c.shape) <= 60;
      out.push_back(std::move(s));
    }
  }
  return out;
}

OpSample simple(std::string name, TensorList in, OpFn fn, OpFn ref, bool grad = true) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(in);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  s.check_grad = grad;
  return s;
}

Tensor vals(const std::vector<double>& v, Shape shape, DType t = kFloat32) {
  return kiln::tensor<double>(v, shape, kFloat64).to(t);
}

ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}
std::vector<ErrorSample> dim_errors(const std::function<void(const Tensor&, const Ints&)>& f, const char* op) {
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {err("dim out of range", [=] { f(x, {2}); }, "out of range"),
          err("negative dim out of range", [=] { f(x, {-3}); }, op),
          err("repeated dim", [=] { f(x, {1, -1}); }, "multiple times")};
}

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

// ---- median / nanmedian / kthvalue / mode ----

// A slice's values in stable sorted order with NaN last: (value, index in the slice).
std::vector<std::pair<double, int64_t>> stable_sorted(const std::vector<double>& v) {
  std::vector<std::pair<double, int64_t>> s;
  for (size_t i = 0; i < v.size(); ++i) s.push_back({v[i], static_cast<int64_t>(i)});
  std::stable_sort(s.begin(), s.end(), [](const auto& a, const auto& b) {
    return !std::isnan(a.first) && (std::isnan(b.first) || a.first < b.first);
  });
  return s;
}
using PickFn = std::function<std::pair<double, int64_t>(const std::vector<double>&)>;
PickFn r_median(bool skip_nan) {
  return [skip_nan](const std::vector<double>& v) -> std::pair<double, int64_t> {
    if (v.empty()) return {kNan, 0};  // an empty input over every element: NaN, as torch
    auto s = stable_sorted(v);
    int64_t nans = std::count_if(v.begin(), v.end(), [](double x) { return std::isnan(x); });
    int64_t n = static_cast<int64_t>(v.size()), valid = n - nans;
    if (!skip_nan && nans > 0) return s[valid];  // the first NaN
    return s[std::max<int64_t>((valid - 1) / 2, 0)];
  };
}
PickFn r_kth(int64_t k) {
  return [k](const std::vector<double>& v) { return stable_sorted(v)[k - 1]; };
}
// The most frequent value (NaNs count as one value, the largest), the smallest on
// ties, and the last index holding it: counted directly, no sort.
std::pair<double, int64_t> r_mode(const std::vector<double>& v) {
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  double best = 0;
  int64_t best_n = 0, best_i = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t n = 0, last = 0;
    for (size_t j = 0; j < v.size(); ++j)
      if (same(v[j], v[i])) ++n, last = static_cast<int64_t>(j);
    if (n > best_n || (n == best_n && less(v[i], best))) best = v[i], best_n = n, best_i = last;
  }
  return {best, best_i};
}
// Values and indices of a one-dim selection (empty dims: over every element, flat).
TensorList ref_pick(const Tensor& x, const Ints& dims, bool keepdim, const PickFn& f) {
  Ref r = Ref::of(x);
  Slices s = ref_slices(r, dims, keepdim);
  Ref val(s.out_shape), idx(s.out_shape);
  for (size_t i = 0; i < s.vals.size(); ++i) {
    auto [a, b] = f(s.vals[i]);
    val.v[i] = a;
    idx.v[i] = static_cast<double>(b);
  }
  return {val.to(x.dtype()), idx.to(kInt64)};
}

struct SelCase {
  Shape shape;
  int64_t dim;
  bool keepdim;
  int layout;
  std::string tag;
};
std::vector<SelCase> sel_cases(bool empty_kept) {
  std::vector<SelCase> c = {{{3, 4, 5}, 1, false, 0, "dim 1"},         {{3, 4, 5}, -1, true, 0, "dim -1 keepdim"},
                            {{3, 4, 6}, 0, false, 1, "dim 0 strided"}, {{5, 6}, 1, false, 2, "dim 1 transposed"},
                            {{4, 7}, -2, true, 0, "dim -2 odd"},       {{}, 0, false, 0, "0-d"},
                            {{}, -1, true, 0, "0-d keepdim"}};
  if (empty_kept) c.push_back({{0, 3}, 1, false, 0, "empty kept dim"});
  return c;
}
using SelFn = std::function<std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool)>;
// Dim-form samples of a (values, indices) reduction over float and integer dtypes
// (integers in [-3, 3] have many ties); gradients for float32 (no ties there).
std::vector<OpSample> sel_samples(const SelFn& fn, const std::function<PickFn(const SelCase&)>& ref, uint64_t seed) {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64, kFloat16, kInt32, kInt64, kUInt8}) {
    for (const SelCase& c : sel_cases(true)) {
      int64_t dim = c.dim;
      bool keepdim = c.keepdim;
      Case cc{c.shape, {}, keepdim, c.layout, c.tag};
      PickFn f = ref(c);
      OpSample s = simple(
          c.tag + " " + dname(t), {input_for(cc, t, seed++, t == kUInt8 ? 0 : -3, 3)},
          [fn, dim, keepdim](const TensorList& in) {
            auto [a, b] = fn(in[0], dim, keepdim);
            return TensorList{a, b};
          },
          [dim, keepdim, f](const TensorList& in) { return ref_pick(in[0], {dim}, keepdim, f); }, t == kFloat32);
      v.push_back(std::move(s));
    }
  }
  return v;
}
// Rows with NaNs: none, one, two, all.
Tensor nan_rows() {
  return vals({1, kNan, 3, kNan, 0.5, 2, 2, 1, 2, -1, kNan, kNan, kNan, kNan, kNan, 4, 3, kNan, 2, 1}, {4, 5},
              kFloat64);
}

template <bool SkipNan>
std::vector<OpSample> median_samples() {
  SelFn fn = [](const Tensor& x, int64_t d, bool k) {
    return SkipNan ? kiln::nanmedian(x, d, k) : kiln::median(x, d, k);
  };
  auto v = sel_samples(
      fn, [](const SelCase&) { return r_median(SkipNan); }, SkipNan ? 200 : 220);
  // Over every element: the values only.
  OpFn all = [](const TensorList& in) { return TensorList{SkipNan ? kiln::nanmedian(in[0]) : kiln::median(in[0])}; };
  OpFn rall = [](const TensorList& in) { return TensorList{ref_pick(in[0], {}, false, r_median(SkipNan))[0]}; };
  for (auto [shape, t, nc] : {std::tuple<Shape, DType, bool>{{3, 4, 5}, kFloat32, false},
                              {{7}, kFloat64, false},
                              {{6}, kFloat32, true},
                              {{4, 5}, kInt32, true},
                              {{}, kFloat64, false},
                              {{0}, kFloat32, false},
                              {{2, 0, 3}, kFloat64, false},
                              {{5, 3}, kFloat16, false}}) {
    v.push_back(simple("all elements " + shape_str(shape) + " " + dname(t) + (nc ? " strided" : ""),
                       {make_input(shape, t, 230, -3, 3, nc)}, all, rall,
                       is_floating_point(t) && ref_numel(shape) > 0));
  }
  OpFn f1 = [fn](const TensorList& in) {
    auto [a, b] = fn(in[0], 1, false);
    return TensorList{a, b};
  };
  OpFn r1 = [](const TensorList& in) { return ref_pick(in[0], {1}, false, r_median(SkipNan)); };
  v.push_back(simple("nan rows", {nan_rows()}, f1, r1, false));
  v.push_back(simple("nan rows, every element", {nan_rows()}, all, rall, false));
  // torch 1.13 gives (2, 2) here; the index among ties is the stable sort's.
  v.push_back(simple("integer ties", {vals({5, 2, 2, 1, 2, 9}, {1, 6}, kInt64)}, f1, r1, false));
  // Over every element the gradient is shared among the values equal to the median (torch: [0.5, 0.5, 0, 0]).
  OpSample tie = simple("ties share the all-elements gradient", {vals({2, 2, 1, 3}, {4}, kFloat64)}, all, rall, false);
  tie.check = [](const TensorList&) {
    Tensor x = vals({2, 2, 1, 3}, {4}, kFloat64).requires_grad_(true);
    (SkipNan ? kiln::nanmedian(x) : kiln::median(x)).backward();
    auto g = x.grad().to_vector<double>();
    std::vector<double> want{0.5, 0.5, 0, 0};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12) << "grad " << i;
  };
  v.push_back(tie);
  return v;
}
template <bool SkipNan>
std::vector<ErrorSample> median_errors() {
  const char* op = SkipNan ? "nanmedian" : "median";
  auto call = [](const Tensor& x, int64_t d) { SkipNan ? kiln::nanmedian(x, d) : kiln::median(x, d); };
  return {
      err(
          "empty dim",
          [=] {
            call(make_input({2, 0}, kFloat32, 1), 1);
          },
          std::string(op) + "(): Expected reduction dim 1 to have non-zero size"),
      err(
          "dim out of range",
          [=] {
            call(make_input({2, 3}, kFloat32, 1), -3);
          },
          op),
      err(
          "bool", [=] { call(make_input({3}, kBool, 1), 0); }, std::string(op) + "(): not implemented for dtype bool"),
      err(
          "empty integer, every element",
          [] { SkipNan ? kiln::nanmedian(make_input({0}, kInt32, 1)) : kiln::median(make_input({0}, kInt32, 1)); },
          std::string(op) + "(): the median of an empty tensor is NaN")};
}
KILN_OP_SAMPLES(median, median_samples<false>, median_errors<false>);
KILN_OP_SAMPLES(nanmedian, median_samples<true>, median_errors<true>);

std::vector<OpSample> kthvalue_samples() {
  std::vector<OpSample> v;
  for (int which : {0, 1, 2}) {  // k = 1, the middle, the size of the dim
    auto pick_k = [which](const SelCase& c) {
      int64_t n = c.shape.empty() ? 1 : c.shape[c.dim < 0 ? c.dim + c.shape.size() : c.dim];
      return which == 0 ? int64_t(1) : which == 1 ? std::max<int64_t>(1, (n + 1) / 2) : std::max<int64_t>(1, n);
    };
    std::vector<OpSample> part;
    uint64_t seed = 240 + 50 * which;
    for (DType t : {kFloat32, kFloat64, kInt32, kInt64}) {
      for (const SelCase& c : sel_cases(false)) {
        int64_t k = pick_k(c), dim = c.dim;
        bool keepdim = c.keepdim;
        Case cc{c.shape, {}, keepdim, c.layout, c.tag};
        OpSample s = simple(
            c.tag + " k=" + std::to_string(k) + " " + dname(t), {input_for(cc, t, seed++, -3, 3)},
            [k, dim, keepdim](const TensorList& in) {
              auto [a, b] = kiln::kthvalue(in[0], k, dim, keepdim);
              return TensorList{a, b};
            },
            [k, dim, keepdim](const TensorList& in) { return ref_pick(in[0], {dim}, keepdim, r_kth(k)); },
            t == kFloat32);
        v.push_back(std::move(s));
      }
    }
  }
  v.push_back(simple(
      "empty kept dim", {make_input({0, 3}, kFloat32, 1)},
      [](const TensorList& in) {
        auto [a, b] = kiln::kthvalue(in[0], 2);
        return TensorList{a, b};
      },
      [](const TensorList& in) { return ref_pick(in[0], {-1}, false, r_kth(2)); }, false));
  // NaN sorts largest: the last k of a row with a NaN is the NaN (torch: nan, index 1).
  for (int64_t k : {2, 5})
    v.push_back(simple(
        "nan rows k=" + std::to_string(k), {nan_rows()},
        [k](const TensorList& in) {
          auto [a, b] = kiln::kthvalue(in[0], k, 1);
          return TensorList{a, b};
        },
        [k](const TensorList& in) { return ref_pick(in[0], {1}, false, r_kth(k)); }, false));
  return v;
}
std::vector<ErrorSample> kthvalue_errors() {
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {
      err(
          "k = 0", [=] { kiln::kthvalue(x, 0); }, "kthvalue(): selected number k out of range for dimension 1"),
      err(
          "k too large", [=] { kiln::kthvalue(x, 4, -1); }, "kthvalue(): selected number k out of range"),
      err(
          "k too large for 0-d", [] { kiln::kthvalue(make_input({}, kFloat32, 1), 2); },
          "kthvalue(): selected number k out of range"),
      err(
          "empty dim",
          [] {
            kiln::kthvalue(make_input({2, 0}, kFloat32, 1), 1);
          },
          "kthvalue(): Expected reduction dim 1 to have non-zero size"),
      err(
          "dim out of range", [=] { kiln::kthvalue(x, 1, 2); }, "kthvalue"),
      err(
          "bool", [] { kiln::kthvalue(make_input({3}, kBool, 1), 1); }, "kthvalue(): not implemented for dtype bool")};
}
KILN_OP_SAMPLES(kthvalue, kthvalue_samples, kthvalue_errors);

std::vector<OpSample> mode_samples() {
  SelFn fn = [](const Tensor& x, int64_t d, bool k) { return kiln::mode(x, d, k); };
  auto v = sel_samples(
      fn, [](const SelCase&) { return PickFn(r_mode); }, 300);
  OpFn f0 = [](const TensorList& in) {
    auto [a, b] = kiln::mode(in[0], 0);
    return TensorList{a, b};
  };
  OpFn r0 = [](const TensorList& in) { return ref_pick(in[0], {0}, false, r_mode); };
  // torch 1.13: (1, 6) and (2., 2): the smallest of the most frequent, at its last index.
  v.push_back(simple("ties of counts", {vals({1, 2, 2, 3, 3, 1, 1, 2}, {8}, kInt64)}, f0, r0, false));
  v.push_back(simple("float repeats", {vals({3, 2, 2, 3}, {4}, kFloat32)}, f0, r0, false));
  v.push_back(simple("bool", {vals({1, 0, 1}, {3}, kBool)}, f0, r0, false));
  // Repeated float values along dim 1, in every row; NaNs count as one value.
  v.push_back(simple(
      "repeats and nans by row", {vals({0.5, -1, 0.5, 2, -1, kNan, 1, kNan, kNan, 1, 7, 7, 7, 7, 7}, {3, 5}, kFloat64)},
      [](const TensorList& in) {
        auto [a, b] = kiln::mode(in[0], -1, true);
        return TensorList{a, b};
      },
      [](const TensorList& in) { return ref_pick(in[0], {-1}, true, r_mode); }, false));
  v.push_back(simple(
      "long rows", {make_input({3, 200}, kInt32, 310, -6, 6)},
      [](const TensorList& in) {
        auto [a, b] = kiln::mode(in[0]);
        return TensorList{a, b};
      },
      [](const TensorList& in) { return ref_pick(in[0], {-1}, false, r_mode); }, false));
  return v;
}
std::vector<ErrorSample> mode_errors() {
  return {err(
              "empty dim",
              [] {
                kiln::mode(make_input({2, 0}, kFloat32, 1), 1);
              },
              "mode(): Expected reduction dim 1 to have non-zero size"),
          err(
              "dim out of range",
              [] {
                kiln::mode(make_input({2, 3}, kFloat32, 1), 2);
              },
              "mode")};
}
KILN_OP_SAMPLES(mode, mode_samples, mode_errors);

// ---- quantile / nanquantile ----

// torch's definition on one slice, in float64: rank q * (n - 1) over the sorted
// values (non-NaN ones for nanquantile; any NaN makes quantile NaN).
double r_quantile(std::vector<double> v, double q, const std::string& interp, bool skip_nan) {
  bool has_nan = std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
  if (has_nan && !skip_nan) return kNan;
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNan;
  std::sort(v.begin(), v.end());
  double rank = q * static_cast<double>(v.size() - 1);
  double lo = std::floor(rank), hi = std::ceil(rank);
  if (interp == "lower") return v[static_cast<size_t>(lo)];
  if (interp == "higher") return v[static_cast<size_t>(hi)];
  if (interp == "nearest") return v[static_cast<size_t>(std::nearbyint(rank))];  // half to even, as torch.round
  double w = interp == "midpoint" ? 0.5 : rank - lo;
  return v[static_cast<size_t>(lo)] + w * (v[static_cast<size_t>(hi)] - v[static_cast<size_t>(lo)]);
}
// The reference output: q's length first unless q is a scalar.
Tensor ref_quantile(const Tensor& x, const std::vector<double>& qs, bool q_scalar, std::optional<int64_t> dim,
                    bool keepdim, const std::string& interp, bool skip_nan) {
  Ref r = Ref::of(x);
  Slices s = ref_slices(r, dim ? Ints{*dim} : Ints{}, keepdim);
  if (!dim && keepdim) s.out_shape = Shape(r.dim(), 1);
  Shape out = s.out_shape;
  if (!q_scalar) out.insert(out.begin(), static_cast<int64_t>(qs.size()));
  Ref o(out);
  for (size_t j = 0; j < qs.size(); ++j)
    for (size_t i = 0; i < s.vals.size(); ++i)
      o.v[j * s.vals.size() + i] = r_quantile(s.vals[i], qs[j], interp, skip_nan);
  return o.to(x.dtype());
}

template <bool SkipNan>
std::vector<OpSample> quantile_samples() {
  auto qfn = [](const Tensor& x, const Tensor& q, std::optional<int64_t> d, bool k, const std::string& i) {
    return SkipNan ? kiln::nanquantile(x, q, d, k, i) : kiln::quantile(x, q, d, k, i);
  };
  auto sfn = [](const Tensor& x, double q, std::optional<int64_t> d, bool k, const std::string& i) {
    return SkipNan ? kiln::nanquantile(x, q, d, k, i) : kiln::quantile(x, q, d, k, i);
  };
  struct C {
    Shape shape;
    std::optional<int64_t> dim;
    bool keepdim;
    int layout;
    std::string tag;
  };
  std::vector<C> cases = {{{3, 4, 5}, std::nullopt, false, 0, "all"},
                          {{3, 4, 5}, std::nullopt, true, 0, "all keepdim"},
                          {{3, 4, 5}, 1, false, 0, "dim 1"},
                          {{3, 4, 6}, -1, true, 1, "dim -1 keepdim strided"},
                          {{5, 6}, 0, false, 2, "dim 0 transposed"},
                          {{}, std::nullopt, false, 0, "0-d"},
                          {{}, 0, true, 0, "0-d dim 0"},
                          {{1, 4}, 0, false, 0, "dim of size 1"}};
  std::vector<OpSample> v;
  uint64_t seed = 400;
  for (const std::string interp : {"linear", "lower", "higher", "midpoint", "nearest"}) {
    for (DType t : {kFloat32, kFloat64}) {
      for (const C& c : cases) {
        for (bool q_scalar : {true, false}) {
          if (!q_scalar && t == kFloat64 && c.layout != 0) continue;
          auto dim = c.dim;
          bool keepdim = c.keepdim;
          Case cc{c.shape, {}, keepdim, c.layout, c.tag};
          // 0.5 on an even count and 1/3 on a multiple of 3 plus 1 land on .5 ranks: 'nearest' rounds them to even.
          std::vector<double> qs = q_scalar ? std::vector<double>{0.3} : std::vector<double>{0, 0.25, 0.5, 1.0 / 3, 1};
          OpSample s = simple(
              c.tag + (q_scalar ? " q scalar " : " q tensor ") + interp + " " + dname(t),
              {input_for(cc, t, seed++, -3, 3)},
              [=](const TensorList& in) {
                if (q_scalar) return TensorList{sfn(in[0], qs[0], dim, keepdim, interp)};
                // q made here (not an input): its values are read, as torch does.
                return TensorList{qfn(in[0], kiln::tensor<double>(qs, {int64_t(qs.size())}, kFloat64).to(in[0].dtype()),
                                      dim, keepdim, interp)};
              },
              [=](const TensorList& in) {
                return TensorList{ref_quantile(in[0], qs, q_scalar, dim, keepdim, interp, SkipNan)};
              },
              t == kFloat32);
          v.push_back(std::move(s));
        }
      }
    }
  }
  OpFn f = [qfn](const TensorList& in) {
    Tensor q = kiln::tensor<double>({0.0, 0.3, 0.5, 1.0}, {4}, kFloat64);
    return TensorList{qfn(in[0], q, 1, false, "linear"), qfn(in[0], q, std::nullopt, false, "nearest")};
  };
  OpFn r = [](const TensorList& in) {
    std::vector<double> qs{0.0, 0.3, 0.5, 1.0};
    return TensorList{ref_quantile(in[0], qs, false, 1, false, "linear", SkipNan),
                      ref_quantile(in[0], qs, false, std::nullopt, false, "nearest", SkipNan)};
  };
  v.push_back(simple("nan rows", {nan_rows()}, f, r, false));
  v.push_back(simple(
      "empty q", {make_input({3, 4}, kFloat32, 5)},
      [qfn](const TensorList& in) {
        return TensorList{qfn(in[0], kiln::tensor<double>(std::vector<double>{}, {0}, kFloat32), 1, false, "linear")};
      },
      [](const TensorList& in) { return TensorList{ref_quantile(in[0], {}, false, 1, false, "linear", SkipNan)}; },
      false));
  return v;
}
template <bool SkipNan>
std::vector<ErrorSample> quantile_errors() {
  std::string op = SkipNan ? "nanquantile" : "quantile";
  auto call = [](const Tensor& x, double q, std::optional<int64_t> d = std::nullopt, const std::string& i = "linear") {
    SkipNan ? kiln::nanquantile(x, q, d, false, i) : kiln::quantile(x, q, d, false, i);
  };
  auto tcall = [](const Tensor& x, const Tensor& q) { SkipNan ? kiln::nanquantile(x, q) : kiln::quantile(x, q); };
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {err(
              "q above 1", [=] { call(x, 1.5); }, op + "() q values must be in the range [0, 1], got 1.5"),
          err(
              "q below 0", [=] { call(x, -0.1); }, op + "() q values must be in the range [0, 1]"),
          err(
              "q tensor out of range",
              [=] {
                tcall(x, kiln::tensor<double>({0.5, 2.0}, kFloat32));
              },
              op + "() q values must be in the range [0, 1]"),
          err(
              "integer input", [=] { call(make_input({3}, kInt64, 1), 0.5); },
              op + "() input tensor must be either float or double dtype"),
          err(
              "float16 input", [=] { call(make_input({3}, kFloat16, 1), 0.5); },
              op + "() input tensor must be either float or double dtype"),
          err(
              "empty input",
              [=] {
                call(make_input({0, 2}, kFloat32, 1), 0.5, 1);
              },
              op + "() input tensor must be non-empty"),
          err(
              "2-d q",
              [=] {
                tcall(x, kiln::tensor<double>({0.5}, {1, 1}, kFloat32));
              },
              op + "() q must be a scalar or 1D tensor"),
          err(
              "q dtype", [=] { tcall(x, kiln::tensor<double>({0.5}, kFloat64)); },
              op + "() q tensor must be same dtype as the input tensor"),
          err(
              "interpolation", [=] { call(x, 0.5, std::nullopt, "cubic"); },
              op + "() interpolation must be one of linear, lower, higher, midpoint or nearest, but got 'cubic'"),
          err(
              "dim out of range", [=] { call(x, 0.5, 2); }, op)};
}
KILN_OP_SAMPLES(quantile, quantile_samples<false>, quantile_errors<false>);
KILN_OP_SAMPLES(nanquantile, quantile_samples<true>, quantile_errors<true>);

}  // namespace
}  // namespace kiln::test
