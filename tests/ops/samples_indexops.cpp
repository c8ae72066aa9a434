// Samples for the gamma-function family (lgamma, digamma, polygamma) and the searching /
// data-dependent index ops (unique, unique_consecutive, bincount, histc, searchsorted,
// bucketize, tril/triu_indices), plus the compositions unfold (as_strided), block_diag (cat)
// and cartesian_prod (stack). References are naive float64 loops and series.
#include <algorithm>
#include <cmath>
#include <map>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

Tensor vals(std::vector<double> v, DType t, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return kiln::tensor<double>(v, s).to(t);
}
std::string dn(DType t) { return std::string(dtype_name(t)); }
Ref ref_vec(const std::vector<double>& v, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  Ref r(s);
  r.v = v;
  return r;
}

OpSample sample(std::string name, TensorList in, OpFn fn, OpFn ref, bool grad = false) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(in);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  s.check_grad = grad;
  return s;
}

// ---- gamma family ----
// digamma: Richardson-extrapolated central difference of lgammal (independent of the
// kernel's recurrence + asymptotic series); polygamma(n >= 1): (-1)^(n+1) n! sum 1/(x+k)^(n+1)
// summed directly to k = 4000 with the Euler-Maclaurin tail.
double ref_digamma(double x) {
  auto d = [x](long double h) {
    return (std::lgamma(static_cast<long double>(x) + h) - std::lgamma(static_cast<long double>(x) - h)) / (2 * h);
  };
  long double h = 1e-3L;
  return static_cast<double>((4 * d(h / 2) - d(h)) / 3);
}
double ref_polygamma(int n, double x) {
  if (n == 0) return ref_digamma(x);
  const int kN = 4000;
  long double s = 0;
  for (int k = 0; k < kN; ++k) {
    long double t = 1 / (static_cast<long double>(x) + k), p = t;
    for (int j = 0; j < n; ++j) p *= t;
    s += p;
  }
  long double z = static_cast<long double>(x) + kN;
  s += std::pow(z, -n) / n + std::pow(z, -(n + 1)) / 2 + (n + 1) * std::pow(z, -(n + 2)) / 12;
  long double fact = 1;
  for (int k = 2; k <= n; ++k) fact *= k;
  return static_cast<double>((n % 2 ? 1 : -1) * fact * s);
}

using UnaryFn = std::function<Tensor(const Tensor&)>;
std::vector<OpSample> gamma_samples(UnaryFn f, std::function<double(double)> ref, uint64_t seed,
                                    std::vector<double> special, std::vector<double> special_want, bool large = true) {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, bool grad) {
    DType out = is_floating_point(x.dtype()) ? x.dtype() : kFloat32;
    v.push_back(sample(
        std::move(name), {x}, [f](const TensorList& in) { return TensorList{f(in[0])}; },
        [ref, out](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), ref).to(out)}; }, grad));
  };
  add("float32 [3,4] positive", make_input({3, 4}, kFloat32, ++seed, 0.3, 6), true);
  add("float64 [3,4] wide", make_input({3, 4}, kFloat64, ++seed, 0.3, 40), true);
  add("float64 negative non-integers", make_input({2, 5}, kFloat64, ++seed, -2.85, -2.15), true);
  add("float64 (-1, 0)", make_input({6}, kFloat64, ++seed, -0.8, -0.2), true);
  add("float16", make_input({3, 4}, kFloat16, ++seed, 0.3, 6), false);
  add("bfloat16", make_input({3, 4}, kBFloat16, ++seed, 0.3, 6), false);
  add("noncontig float32 [4,3]", make_input({4, 3}, kFloat32, ++seed, 0.5, 5, true), true);
  add("0-d float64", make_input({}, kFloat64, ++seed, 1, 3), true);
  add("empty [0,3]", make_input({0, 3}, kFloat32, ++seed), false);
  add("int64 gives float32", make_input({5}, kInt64, ++seed, 1, 9), false);
  if (large) add("large float32 [20000]", make_input({20000}, kFloat32, ++seed, 0.2, 30), false);
  v.push_back(sample(
      "poles, NaN and infinities (torch's values)", {vals(special, kFloat64)},
      [f](const TensorList& in) {
        return TensorList{f(in[0]), f(in[0].to(kFloat32))};
      },
      [special_want](const TensorList&) {
        return TensorList{vals(special_want, kFloat64), vals(special_want, kFloat32)};
      }));
  return v;
}

const std::vector<double> kSpecial = {kNan, kInf, -kInf, 0.0, -0.0, -1.0, -2.0, 1.0, 2.0};

std::vector<OpSample> lgamma_samples() {
  return gamma_samples([](const Tensor& x) { return kiln::lgamma(x); }, [](double x) { return std::lgamma(x); }, 100,
                       kSpecial, {kNan, kInf, kInf, kInf, kInf, kInf, kInf, 0, 0});
}
std::vector<OpSample> digamma_samples() {
  const double g = 0.57721566490153286061;
  auto v = gamma_samples([](const Tensor& x) { return kiln::digamma(x); }, ref_digamma, 200, kSpecial,
                         {kNan, kInf, kNan, -kInf, kInf, kNan, kNan, -g, 1 - g});
  return v;
}
std::vector<OpSample> polygamma_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 300;
  v.push_back(sample(
      "polygamma(0) is digamma", {make_input({5}, kFloat64, 250, 0.5, 9)},
      [](const TensorList& in) { return TensorList{kiln::polygamma(0, in[0])}; },
      [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), ref_digamma).to(kFloat64)}; }, true));
  for (int n : {1, 2, 3, 5}) {
    auto f = [n](const Tensor& x) { return kiln::polygamma(n, x); };
    auto ref = [n](double x) { return ref_polygamma(n, x); };
    std::vector<double> want =
        n == 1   ? std::vector<double>{kNan, 0, kNan, kInf, kInf, kInf, kInf, 1.6449340668482264, 0.6449340668482264}
        : n == 2 ? std::vector<double>{kNan,
                                       kNan,
                                       -kInf,
                                       -kInf,
                                       -kInf,
                                       -kInf,
                                       -kInf,
                                       -2.4041138063191885,
                                       -0.4041138063191885}
                 : std::vector<double>{};
    for (OpSample& s : gamma_samples(f, ref, seed, kSpecial, want, false)) {
      if (want.empty() && s.name.rfind("poles", 0) == 0) continue;
      s.name = "n=" + std::to_string(n) + " " + s.name;
      v.push_back(std::move(s));
    }
    seed += 20;
  }
  return v;
}
std::vector<ErrorSample> gamma_errors(UnaryFn f, const char* op) {
  return {{"undefined input", [f] { f(Tensor()); }, op}};
}
std::vector<ErrorSample> lgamma_errors() {
  return gamma_errors([](const Tensor& x) { return kiln::lgamma(x); }, "lgamma");
}
std::vector<ErrorSample> digamma_errors() {
  return gamma_errors([](const Tensor& x) { return kiln::digamma(x); }, "digamma");
}
std::vector<ErrorSample> polygamma_errors() {
  return {{"negative n", [] { kiln::polygamma(-1, make_input({3}, kFloat32, 1)); }, "does not support negative n"},
          {"undefined input", [] { kiln::polygamma(1, Tensor()); }, "polygamma"}};
}
KILN_OP_SAMPLES(lgamma, lgamma_samples, lgamma_errors);
KILN_OP_SAMPLES(digamma, digamma_samples, digamma_errors);
KILN_OP_SAMPLES(polygamma, polygamma_samples, polygamma_errors);

// ---- unique / unique_consecutive ----
bool ref_less(double a, double b) { return std::isnan(a) ? false : (std::isnan(b) || a < b); }

// Slices of x along dim (dim < 0: its elements) as rows of doubles.
std::vector<std::vector<double>> ref_slices(const Ref& x, int64_t dim) {
  if (dim < 0) {
    std::vector<std::vector<double>> r;
    for (double e : x.v) r.push_back({e});
    return r;
  }
  std::vector<std::vector<double>> r(static_cast<size_t>(x.shape[dim]));
  for (int64_t i = 0; i < x.numel(); ++i) r[unravel(i, x.shape)[dim]].push_back(x.v[i]);
  return r;
}
Ref ref_join(const std::vector<std::vector<double>>& rows, const Ref& x, int64_t dim) {
  if (dim < 0) {
    Ref r({static_cast<int64_t>(rows.size())});
    for (size_t i = 0; i < rows.size(); ++i) r.v[i] = rows[i][0];
    return r;
  }
  Shape s = x.shape;
  s[dim] = static_cast<int64_t>(rows.size());
  Ref r(s);
  std::vector<size_t> pos(rows.size(), 0);
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t k = unravel(i, s)[dim];
    r.v[i] = rows[k][pos[k]++];
  }
  return r;
}
bool rows_equal(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t j = 0; j < a.size(); ++j)
    if (!(a[j] == b[j])) return false;
  return true;
}

// (values, inverse, counts) by a quadratic scan: each slice joins the first equal group.
TensorList ref_unique(const Tensor& xt, int64_t dim, bool sorted, bool inv, bool cnt) {
  Ref x = Ref::of(xt);
  auto rows = ref_slices(x, dim);
  std::vector<std::vector<double>> groups;
  std::vector<int64_t> group_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    int64_t g = -1;
    if (sorted) {
      for (size_t k = 0; k < groups.size() && g < 0; ++k)
        if (rows_equal(rows[i], groups[k])) g = static_cast<int64_t>(k);
    } else if (!groups.empty() && rows_equal(rows[i], groups.back())) {
      g = static_cast<int64_t>(groups.size()) - 1;
    }
    if (g < 0) {
      groups.push_back(rows[i]);
      g = static_cast<int64_t>(groups.size()) - 1;
    }
    group_of.push_back(g);
  }
  std::vector<int64_t> order(groups.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int64_t>(k);
  if (sorted)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return std::lexicographical_compare(groups[a].begin(), groups[a].end(), groups[b].begin(), groups[b].end(),
                                          ref_less);
    });
  std::vector<int64_t> rank(order.size());
  std::vector<std::vector<double>> out;
  for (size_t k = 0; k < order.size(); ++k) {
    rank[order[k]] = static_cast<int64_t>(k);
    out.push_back(groups[order[k]]);
  }
  std::vector<double> inverse, counts(out.size(), 0.0);
  for (int64_t g : group_of) {
    inverse.push_back(static_cast<double>(rank[g]));
    counts[rank[g]] += 1;
  }
  Ref iref(dim >= 0 ? Shape{static_cast<int64_t>(rows.size())} : x.shape);
  iref.v = inverse;
  return {ref_join(out, x, dim).to(xt.dtype()), inv ? iref.to(kInt64) : vals({}, kInt64, {0}),
          cnt ? ref_vec(counts).to(kInt64) : vals({}, kInt64, {0})};
}

std::vector<OpSample> unique_family_samples(bool consecutive) {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, std::optional<int64_t> dim, bool inv, bool cnt) {
    int64_t d = dim ? (*dim < 0 ? *dim + x.dim() : *dim) : -1;
    v.push_back(sample(
        std::move(name), {x},
        [consecutive, dim, inv, cnt](const TensorList& in) {
          auto [a, b, c] =
              consecutive ? kiln::unique_consecutive(in[0], inv, cnt, dim) : kiln::unique(in[0], true, inv, cnt, dim);
          return TensorList{a, b, c};
        },
        [consecutive, d, inv, cnt](const TensorList& in) { return ref_unique(in[0], d, !consecutive, inv, cnt); }));
  };
  uint64_t seed = consecutive ? 450 : 400;
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt8, kUInt8, kBool})
    add("ties " + dn(t), make_input({4, 5}, t, ++seed, 0, 3.4), std::nullopt, true, true);
  add("noncontig [3,4]", make_input({3, 4}, kInt64, ++seed, 0, 2.4, true), std::nullopt, true, true);
  add("values only", make_input({9}, kFloat32, ++seed, -1.4, 1.4).round(), std::nullopt, false, false);
  add("inverse only", make_input({2, 3}, kInt16, ++seed, 0, 2.4), std::nullopt, true, false);
  add("counts only", make_input({7}, kInt32, ++seed, 0, 2.4), std::nullopt, false, true);
  add("0-d", vals({2.5}, kFloat32, {}).reshape({}), std::nullopt, true, true);
  add("empty", make_input({0}, kFloat32, ++seed), std::nullopt, true, true);
  add("dim 0 rows", vals({1, 2, 1, 2, 0, 3, 1, 2}, kInt64, {4, 2}), 0, true, true);
  add("dim 1 columns", vals({1, 1, 0, 1, 2, 2, 3, 2, 0, 0, 1, 0}, kFloat32, {3, 4}), 1, true, true);
  add("dim -1 of 3-d", make_input({2, 2, 5}, kInt64, ++seed, 0, 1.4), -1, true, true);
  add("dim 1 of 3-d noncontig", make_input({2, 4, 3}, kInt32, ++seed, 0, 1.4, true), 1, true, true);
  add("dim 0 empty rows", make_input({0, 3}, kFloat32, ++seed), 0, true, true);
  add("dim 1 of [3,0]", make_input({3, 0}, kFloat32, ++seed), 1, true, true);
  add("NaNs are all distinct", vals({kNan, 1, kNan, 1, 0}, kFloat64), std::nullopt, true, true);
  add("signed zeros are equal", vals({0.0, -0.0, 0.0}, kFloat32), std::nullopt, true, true);
  add("large", make_input({3000}, kInt64, ++seed, 0, 60), std::nullopt, true, true);
  if (!consecutive) {
    // sorted=false: kiln returns the sorted order too (torch leaves it unspecified).
    v.push_back(sample(
        "sorted=false", {vals({3, 1, 2, 1}, kInt64)},
        [](const TensorList& in) {
          auto [a, b, c] = kiln::unique(in[0], false, true, true);
          return TensorList{a, b, c};
        },
        [](const TensorList& in) { return ref_unique(in[0], -1, true, true, true); }));
  }
  return v;
}
std::vector<ErrorSample> unique_family_errors(bool consecutive) {
  auto call = [consecutive](Tensor x, int64_t dim) {
    if (consecutive)
      kiln::unique_consecutive(x, false, false, dim);
    else
      kiln::unique(x, true, false, false, dim);
  };
  return {{"dim of a 0-d tensor", [call] { call(vals({1}, kFloat32).reshape({}), 0); }, "tensor has no dimensions"},
          {"dim out of range",
           [call] {
             call(make_input({2, 3}, kFloat32, 1), 2);
           },
           "out of range"},
          {"zero-sized dim not selected",
           [call] {
             call(make_input({2, 0}, kFloat32, 1), 0);
           },
           "0 sized dimensions, and they aren't selected"}};
}
std::vector<OpSample> unique_samples() { return unique_family_samples(false); }
std::vector<OpSample> unique_consecutive_samples() { return unique_family_samples(true); }
std::vector<ErrorSample> unique_errors() { return unique_family_errors(false); }
std::vector<ErrorSample> unique_consecutive_errors() { return unique_family_errors(true); }
KILN_OP_SAMPLES(unique, unique_samples, unique_errors);
KILN_OP_SAMPLES(unique_consecutive, unique_consecutive_samples, unique_consecutive_errors);

// ---- bincount ----
std::vector<OpSample> bincount_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor w, int64_t minlength, DType out) {
    v.push_back(sample(
        std::move(name), {x, w},
        [minlength](const TensorList& in) { return TensorList{kiln::bincount(in[0], in[1], minlength)}; },
        [minlength, out](const TensorList& in) {
          Ref x = Ref::of(in[0]);
          int64_t len = minlength;
          for (double e : x.v) len = std::max<int64_t>(len, static_cast<int64_t>(e) + 1);
          Ref r({len});
          Ref w = in[1].defined() ? Ref::of(in[1]) : Ref();
          for (int64_t i = 0; i < x.numel(); ++i) r.v[static_cast<size_t>(x.v[i])] += in[1].defined() ? w.v[i] : 1.0;
          return TensorList{r.to(out)};
        }));
  };
  uint64_t seed = 500;
  auto next = [&seed] { return ++seed; };
  for (DType t : {kInt64, kInt32, kInt16, kInt8, kUInt8})
    add("counts " + dn(t), make_input({20}, t, next(), 0, 6.4), Tensor(), 0, kInt64);
  add("minlength longer", make_input({6}, kInt64, next(), 0, 3.4), Tensor(), 10, kInt64);
  add("minlength shorter", make_input({6}, kInt64, next(), 0, 5.4), Tensor(), 2, kInt64);
  add("empty", make_input({0}, kInt64, next()), Tensor(), 0, kInt64);
  add("empty with minlength", make_input({0}, kInt64, next()), Tensor(), 3, kInt64);
  add("float32 weights", make_input({12}, kInt64, next(), 0, 4.4), make_input({12}, kFloat32, next()), 0, kFloat32);
  add("float64 weights", make_input({12}, kInt32, next(), 0, 4.4), make_input({12}, kFloat64, next()), 0, kFloat64);
  add("int weights give float64", make_input({8}, kInt64, next(), 0, 4.4), make_input({8}, kInt64, next(), -3, 3), 0,
      kFloat64);
  add("noncontig input", make_input({4, 3}, kInt64, next(), 0, 4.4, true).flatten(), Tensor(), 0, kInt64);
  add("large", make_input({5000}, kInt64, next(), 0, 99.4), Tensor(), 0, kInt64);
  return v;
}
std::vector<ErrorSample> bincount_errors() {
  return {{"negative value",
           [] {
             kiln::bincount(vals({1, -1}, kInt64));
           },
           "non-negative"},
          {"2-d",
           [] {
             kiln::bincount(vals({1, 2}, kInt64, {1, 2}));
           },
           "1-d"},
          {"float input",
           [] {
             kiln::bincount(vals({1, 2}, kFloat32));
           },
           "integral input"},
          {"bool input",
           [] {
             kiln::bincount(vals({1, 0}, kBool));
           },
           "integral input"},
          {"minlength", [] { kiln::bincount(vals({1}, kInt64), {}, -1); }, "minlength should be >= 0"},
          {"weights length",
           [] {
             kiln::bincount(vals({1, 2}, kInt64), vals({1}, kFloat32));
           },
           "same length as input"}};
}
KILN_OP_SAMPLES(bincount, bincount_samples, bincount_errors);

// ---- histc ----
Ref ref_histc(const Ref& x, int64_t bins, double lo, double hi) {
  if (lo == hi && x.numel() > 0) {
    lo = *std::min_element(x.v.begin(), x.v.end());
    hi = *std::max_element(x.v.begin(), x.v.end());
  }
  if (lo == hi) lo -= 1, hi += 1;
  Ref r({bins});
  for (double e : x.v) {
    if (!(e >= lo && e <= hi)) continue;
    int64_t b = std::min<int64_t>(static_cast<int64_t>((e - lo) * static_cast<double>(bins) / (hi - lo)), bins - 1);
    r.v[b] += 1;
  }
  return r;
}
std::vector<OpSample> histc_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t bins, double lo, double hi) {
    v.push_back(sample(
        std::move(name), {x},
        [bins, lo, hi](const TensorList& in) { return TensorList{kiln::histc(in[0], bins, lo, hi)}; },
        [bins, lo, hi](const TensorList& in) {
          return TensorList{ref_histc(Ref::of(in[0]), bins, lo, hi).to(in[0].dtype())};
        }));
  };
  uint64_t seed = 600;
  // Bin centres (exact in every float type): the reduced types bin with each step rounded
  // to the type, as torch, which a float64 reference cannot follow at the edges.
  for (DType t : {kFloat32, kFloat64, kBFloat16, kFloat16})
    add("given range " + dn(t), ((make_input({40}, kFloat64, ++seed, -1.4, 2.4) * 2).floor() * 0.5 + 0.25).to(t), 6, -1,
        2);
  add("data range", make_input({3, 5}, kFloat32, ++seed, -3, 3), 6, 0, 0);
  add("default bins", make_input({200}, kFloat64, ++seed, 0, 1), 100, 0, 1);
  add("edges: last bin closed, outside left out", vals({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1, 11}, kFloat32), 5, 0, 10);
  add("NaN left out of a given range", vals({kNan, 0.5, 1.5}, kFloat32), 2, 0, 2);
  add("all equal: range widened by 1", vals({2, 2, 2}, kFloat32), 4, 0, 0);
  add("empty", make_input({0}, kFloat32, ++seed), 3, 0, 0);
  add("0-d", vals({2}, kFloat64).reshape({}), 3, 0, 0);
  add("noncontig", make_input({4, 6}, kFloat64, ++seed, -2, 2, true), 5, -1.5, 1.5);
  add("large", make_input({50000}, kFloat32, ++seed, 0, 1), 10, 0.1, 0.9);
  return v;
}
std::vector<ErrorSample> histc_errors() {
  Tensor x = vals({1, 2}, kFloat32);
  return {{"bins 0", [x] { kiln::histc(x, 0); }, "bins must be > 0"},
          {"min > max", [x] { kiln::histc(x, 4, 3, 1); }, "max must be larger than min"},
          {"infinite range", [x] { kiln::histc(x, 4, 0, kInf); }, "is not finite"},
          {"NaN in the data range",
           [] {
             kiln::histc(vals({1, kNan}, kFloat32), 4);
           },
           "is not finite"},
          {"inf in the data range",
           [] {
             kiln::histc(vals({1, kInf}, kFloat32), 4);
           },
           "is not finite"},
          {"integer input",
           [] {
             kiln::histc(vals({1, 2}, kInt64), 4);
           },
           "expected a floating-point input"}};
}
KILN_OP_SAMPLES(histc, histc_samples, histc_errors);

// ---- searchsorted / bucketize ----
// Count of boundaries below v (left) or not above it (right), per row; sorter reorders each row.
TensorList ref_searchsorted(const Tensor& seq, const Tensor& values, bool right, const Tensor& sorter, DType out) {
  Ref s = Ref::of(seq), v = Ref::of(values);
  Ref so = sorter.defined() ? Ref::of(sorter) : Ref();
  int64_t len = s.shape.back(), vrow = v.dim() == 0 ? 1 : v.shape.back();
  Ref r(v.shape);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t row = s.dim() == 1 ? 0 : i / vrow;
    int64_t k = 0;
    for (int64_t j = 0; j < len; ++j) {
      int64_t jj = sorter.defined() ? static_cast<int64_t>(so.v[row * len + j]) : j;
      double b = s.v[row * len + jj];
      if (right ? !(b > v.v[i]) : !(b >= v.v[i])) k = j + 1;
    }
    r.v[i] = static_cast<double>(k);
  }
  return {r.to(out)};
}
Tensor sorted_input(const Shape& s, DType t, uint64_t seed, double lo, double hi) {
  return std::get<0>(kiln::sort(make_input(s, t, seed, lo, hi), -1));
}

std::vector<OpSample> searchsorted_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor seq, Tensor values, bool right, bool i32, Tensor sorter = {}) {
    v.push_back(sample(
        std::move(name), {seq, values, sorter},
        [right, i32](const TensorList& in) {
          return TensorList{kiln::searchsorted(in[0], in[1], i32, right, std::nullopt, in[2])};
        },
        [right, i32](const TensorList& in) {
          return ref_searchsorted(in[0], in[1], right, in[2], i32 ? kInt32 : kInt64);
        }));
  };
  uint64_t seed = 700;
  auto next = [&seed] { return ++seed; };
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8})
    for (bool right : {false, true})
      add(dn(t) + (right ? " right" : " left") + " ties", sorted_input({8}, t, next(), 0, 5.4).round(),
          make_input({3, 4}, t, next(), 0, 6).round(), right, false);
  add("out_int32", sorted_input({6}, kFloat32, next(), -1, 1), make_input({5}, kFloat32, next(), -1.5, 1.5), false,
      true);
  add("N-d boundaries", sorted_input({2, 3, 5}, kFloat64, next(), -2, 2), make_input({2, 3, 4}, kFloat64, next()), true,
      false);
  add("N-d boundaries left", sorted_input({3, 6}, kInt64, next(), 0, 4.4), make_input({3, 2}, kInt64, next(), 0, 4.4),
      false, false);
  add("mixed dtypes promote", sorted_input({5}, kInt64, next(), 0, 9.4), make_input({6}, kFloat32, next(), 0, 9), false,
      false);
  add("0-d value", sorted_input({5}, kFloat32, next(), -1, 1), vals({0.1}, kFloat32).reshape({}), false, false);
  add("empty boundaries", make_input({0}, kFloat32, next()), make_input({3}, kFloat32, next()), false, false);
  add("empty values", sorted_input({4}, kFloat32, next(), -1, 1), make_input({0, 2}, kFloat32, next()), true, false);
  add("noncontig values", sorted_input({7}, kFloat64, next(), -2, 2), make_input({4, 3}, kFloat64, next(), -2, 2, true),
      true, false);
  add("NaN boundary and values (torch: NaN compares false)", vals({1, kNan}, kFloat32), vals({kNan, 5, 0.5}, kFloat32),
      false, false);
  add("NaN right", vals({1, kNan}, kFloat32), vals({kNan, 5, 0.5}, kFloat32), true, false);
  // Unsorted boundaries with the sorter that sorts them (argsort), 1-D and per row.
  Tensor u = make_input({7}, kFloat32, next(), -2, 2);
  add("sorter 1-D", u, make_input({6}, kFloat32, next(), -2.5, 2.5), false, false, kiln::argsort(u));
  Tensor u2 = make_input({3, 5}, kFloat64, next(), -2, 2).round();
  add("sorter per row right ties", u2, make_input({3, 4}, kFloat64, next(), -2.5, 2.5).round(), true, false,
      kiln::argsort(u2, -1, false, true));
  // side="right" is right=true; a scalar value gives a 0-d result.
  Tensor s = sorted_input({6}, kFloat32, next(), -1, 1);
  v.push_back(sample(
      "side and scalar value", {s, make_input({4}, kFloat32, next(), -1, 1)},
      [](const TensorList& in) {
        return TensorList{kiln::searchsorted(in[0], in[1], false, false, "right"),
                          kiln::searchsorted(in[0], in[1], false, true, "right"),
                          kiln::searchsorted(in[0], in[1], false, false, "left"),
                          kiln::searchsorted(in[0], Scalar(0.25)),
                          kiln::searchsorted(in[0], Scalar(int64_t(0)), true, true)};
      },
      [](const TensorList& in) {
        return TensorList{ref_searchsorted(in[0], in[1], true, {}, kInt64)[0],
                          ref_searchsorted(in[0], in[1], true, {}, kInt64)[0],
                          ref_searchsorted(in[0], in[1], false, {}, kInt64)[0],
                          ref_searchsorted(in[0], vals({0.25}, kFloat32).reshape({}), false, {}, kInt64)[0],
                          ref_searchsorted(in[0], vals({0}, kFloat32).reshape({}), true, {}, kInt32)[0]};
      }));
  return v;
}
std::vector<ErrorSample> searchsorted_errors() {
  Tensor s = vals({1, 2, 3}, kFloat32), s2 = vals({1, 2, 3, 4}, kFloat32, {2, 2});
  Tensor x = vals({1.5, 2.5}, kFloat32);
  return {
      {"0-d boundaries", [] { kiln::searchsorted(vals({1}, kFloat32).reshape({}), vals({1}, kFloat32)); },
       "positive dimension"},
      {"leading dims differ",
       [s2] {
         kiln::searchsorted(s2, vals({1, 2, 3}, kFloat32, {3, 1}));
       },
       "first N-1 dimensions"},
      {"scalar with N-d boundaries", [s2] { kiln::searchsorted(s2, Scalar(1.0)); }, "can be a scalar only"},
      {"side conflicts with right", [s, x] { kiln::searchsorted(s, x, false, true, "left"); },
       "side and right can't be set to opposites"},
      {"bad side", [s, x] { kiln::searchsorted(s, x, false, false, "middle"); }, "side can only be 'left' or 'right'"},
      {"int32 sorter",
       [s, x] {
         kiln::searchsorted(s, x, false, false, std::nullopt, vals({0, 1, 2}, kInt32));
       },
       "sorter must be a tensor of long dtype"},
      {"sorter size",
       [s, x] {
         kiln::searchsorted(s, x, false, false, std::nullopt, vals({0, 1}, kInt64));
       },
       "same size"},
      {"sorter out of range",
       [s, x] {
         kiln::searchsorted(s, x, false, false, std::nullopt, vals({0, 1, 7}, kInt64));
       },
       "out of range"},
      {"bool",
       [] {
         kiln::searchsorted(vals({0, 1}, kBool), vals({1}, kBool));
       },
       "bool"}};
}
KILN_OP_SAMPLES(searchsorted, searchsorted_samples, searchsorted_errors);

std::vector<OpSample> bucketize_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 800;
  for (bool right : {false, true})
    for (bool i32 : {false, true}) {
      Tensor b = sorted_input({6}, kFloat32, ++seed, -1, 1.4).round();
      v.push_back(sample(
          std::string(right ? "right" : "left") + (i32 ? " int32" : ""),
          {make_input({3, 4}, kFloat32, ++seed, -2, 2).round(), b},
          [right, i32](const TensorList& in) { return TensorList{kiln::bucketize(in[0], in[1], i32, right)}; },
          [right, i32](const TensorList& in) {
            return ref_searchsorted(in[1], in[0], right, {}, i32 ? kInt32 : kInt64);
          }));
    }
  v.push_back(sample(
      "int64 input, float boundaries, scalar input",
      {make_input({5}, kInt64, ++seed, 0, 5.4), vals({0.5, 2, 2, 4}, kFloat32)},
      [](const TensorList& in) {
        return TensorList{kiln::bucketize(in[0], in[1]), kiln::bucketize(Scalar(2.0), in[1], false, true)};
      },
      [](const TensorList& in) {
        return TensorList{ref_searchsorted(in[1], in[0], false, {}, kInt64)[0],
                          ref_searchsorted(in[1], vals({2}, kFloat32).reshape({}), true, {}, kInt64)[0]};
      }));
  return v;
}
std::vector<ErrorSample> bucketize_errors() {
  return {{"2-d boundaries",
           [] {
             kiln::bucketize(vals({1}, kFloat32), vals({1, 2}, kFloat32, {1, 2}));
           },
           "boundaries tensor must be 1 dimension"}};
}
KILN_OP_SAMPLES(bucketize, bucketize_samples, bucketize_errors);

// ---- tril_indices / triu_indices ----
std::vector<OpSample> tri_indices_samples(bool lower) {
  std::vector<OpSample> v;
  for (auto [r, c, off] : std::vector<std::array<int64_t, 3>>{
           {3, 4, 0}, {3, 4, 1}, {3, 4, -1}, {4, 3, -5}, {3, 4, 10}, {0, 4, 0}, {5, 0, 0}, {1, 1, 0}, {6, 6, -2}}) {
    for (DType t : {kInt64, kInt32}) {
      if (t == kInt32 && off != 0) continue;
      v.push_back(sample(
          std::to_string(r) + "x" + std::to_string(c) + " offset " + std::to_string(off) + " " + dn(t), {},
          [=](const TensorList&) {
            return TensorList{lower ? kiln::tril_indices(r, c, off, t) : kiln::triu_indices(r, c, off, t)};
          },
          [=](const TensorList&) {
            std::vector<double> rows, cols;
            for (int64_t i = 0; i < r; ++i)
              for (int64_t j = 0; j < c; ++j)
                if (lower ? j - i <= off : j - i >= off) rows.push_back(double(i)), cols.push_back(double(j));
            std::vector<double> all = rows;
            all.insert(all.end(), cols.begin(), cols.end());
            return TensorList{ref_vec(all, {2, static_cast<int64_t>(rows.size())}).to(t)};
          }));
    }
  }
  return v;
}
std::vector<ErrorSample> tri_indices_errors(bool lower) {
  auto f = [lower](int64_t r, int64_t c, DType t) {
    if (lower)
      kiln::tril_indices(r, c, 0, t);
    else
      kiln::triu_indices(r, c, 0, t);
  };
  return {{"negative row", [f] { f(-1, 3, kInt64); }, "row must be non-negative"},
          {"negative col", [f] { f(3, -1, kInt64); }, "col must be non-negative"},
          {"float dtype", [f] { f(3, 3, kFloat32); }, "expected dtype int64 or int32"},
          // Counted in closed form: a row loop would run for hours before the allocation failed.
          {"too many indices", [f] { f(int64_t(1) << 40, int64_t(1) << 40, kInt64); }, "has too many indices"}};
}
std::vector<OpSample> tril_indices_samples() { return tri_indices_samples(true); }
std::vector<OpSample> triu_indices_samples() { return tri_indices_samples(false); }
std::vector<ErrorSample> tril_indices_errors() { return tri_indices_errors(true); }
std::vector<ErrorSample> triu_indices_errors() { return tri_indices_errors(false); }
KILN_OP_SAMPLES(tril_indices, tril_indices_samples, tril_indices_errors);
KILN_OP_SAMPLES(triu_indices, triu_indices_samples, triu_indices_errors);

// ---- compositions: unfold (as_strided), block_diag (cat), cartesian_prod (stack) ----
std::vector<OpSample> unfold_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, int64_t size, int64_t step) {
    v.push_back(sample(
        std::move(name), {x}, [=](const TensorList& in) { return TensorList{in[0].unfold(dim, size, step)}; },
        [=](const TensorList& in) {
          Ref a = Ref::of(in[0]);
          int64_t d = a.dim() == 0 ? 0 : (dim < 0 ? dim + a.dim() : dim);
          Shape s = a.shape;
          if (s.empty()) {
            s = {size};
          } else {
            s[d] = (s[d] - size) / step + 1;
            s.push_back(size);
          }
          Ref r(s);
          for (int64_t i = 0; i < r.numel(); ++i) {
            Shape o = unravel(i, s);
            if (a.dim() == 0) {
              r.v[i] = a.v[0];
              continue;
            }
            Shape src(o.begin(), o.end() - 1);
            src[d] = src[d] * step + o.back();
            r.v[i] = a.v[ravel(src, a.shape)];
          }
          return TensorList{r.to(in[0].dtype())};
        },
        is_floating_point(x.dtype())));
  };
  add("unfold overlapping windows", make_input({2, 7}, kFloat32, 900), 1, 3, 1);
  add("unfold step > size", make_input({2, 9}, kFloat64, 901), -1, 2, 3);
  add("unfold dim 0 of noncontig", make_input({6, 3}, kFloat64, 902, -2, 2, true), 0, 2, 2);
  add("unfold int64 whole dim", make_input({3, 4}, kInt64, 903, 0, 9), 1, 4, 1);
  add("unfold size 0", make_input({2, 5}, kFloat32, 904), 1, 0, 1);
  add("unfold 0-d", vals({3}, kFloat64).reshape({}), 0, 1, 1);
  return v;
}

Ref ref_block_diag(const TensorList& in, DType t) {
  int64_t rows = 0, cols = 0;
  std::vector<Ref> bs;
  for (const Tensor& x : in) {
    Ref r = Ref::of(x);
    if (r.dim() == 0) r.shape = {1, 1};
    if (r.dim() == 1) r.shape = {1, r.shape[0]};
    rows += r.shape[0];
    cols += r.shape[1];
    bs.push_back(r);
  }
  Ref out({rows, cols});
  int64_t r0 = 0, c0 = 0;
  for (const Ref& b : bs) {
    for (int64_t i = 0; i < b.shape[0]; ++i)
      for (int64_t j = 0; j < b.shape[1]; ++j) out.v[(r0 + i) * cols + c0 + j] = b.v[i * b.shape[1] + j];
    r0 += b.shape[0];
    c0 += b.shape[1];
  }
  (void)t;
  return out;
}
std::vector<OpSample> block_diag_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, TensorList xs, DType out) {
    v.push_back(sample(
        std::move(name), xs, [](const TensorList& in) { return TensorList{kiln::block_diag(in)}; },
        [out](const TensorList& in) { return TensorList{ref_block_diag(in, out).to(out)}; }, is_floating_point(out)));
  };
  add("block_diag 2-d, 0-d, 1-d and empty blocks",
      {make_input({2, 3}, kFloat64, 910), make_input({}, kFloat64, 911), make_input({2}, kFloat64, 912),
       make_input({0, 2}, kFloat64, 913), make_input({2, 0}, kFloat64, 914)},
      kFloat64);
  add("block_diag promotes int64 and float32",
      {make_input({1, 2}, kInt64, 915, 0, 5), make_input({2, 2}, kFloat32, 916)}, kFloat32);
  add("block_diag noncontig", {make_input({3, 2}, kFloat32, 917, -2, 2, true), make_input({2, 2}, kFloat32, 918)},
      kFloat32);
  add("block_diag one int32 block", {make_input({2, 2}, kInt32, 919, 0, 5)}, kInt32);
  return v;
}
std::vector<ErrorSample> block_diag_errors() {
  return {{"block_diag 3-d input",
           [] {
             kiln::block_diag({make_input({2, 2, 2}, kFloat32, 1)});
           },
           "Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions"}};
}

std::vector<OpSample> cartesian_prod_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, TensorList xs) {
    v.push_back(sample(
        std::move(name), xs, [](const TensorList& in) { return TensorList{kiln::cartesian_prod(in)}; },
        [](const TensorList& in) {
          int64_t n = 1, k = static_cast<int64_t>(in.size());
          std::vector<Ref> rs;
          for (const Tensor& t : in) rs.push_back(Ref::of(t)), n *= t.numel();
          Ref out({n, k});
          for (int64_t i = 0; i < n; ++i)
            for (int64_t c = k - 1, rest = i; c >= 0; --c) {
              out.v[i * k + c] = rs[c].v[rest % rs[c].numel()];
              rest /= rs[c].numel();
            }
          return TensorList{out.to(in[0].dtype())};
        },
        is_floating_point(xs[0].dtype())));
  };
  add("cartesian_prod three float64",
      {make_input({2}, kFloat64, 920), make_input({3}, kFloat64, 921), make_input({2}, kFloat64, 922)});
  add("cartesian_prod int64 pair", {make_input({2}, kInt64, 923, 0, 9), make_input({4}, kInt64, 924, 0, 9)});
  add("cartesian_prod with an empty input", {make_input({2}, kFloat32, 925), make_input({0}, kFloat32, 926)});
  return v;
}
std::vector<ErrorSample> cartesian_prod_errors() {
  return {{"cartesian_prod 2-d input",
           [] {
             kiln::cartesian_prod({make_input({2}, kInt64, 1), make_input({1, 2}, kInt64, 2)});
           },
           "expect a 1D vector"},
          {"cartesian_prod dtypes differ",
           [] {
             kiln::cartesian_prod({make_input({2}, kInt64, 1), make_input({2}, kFloat32, 2)});
           },
           "same dtype"},
          {"cartesian_prod no inputs", [] { kiln::cartesian_prod({}); }, "non-empty"}};
}
KILN_OP_SAMPLES(as_strided, unfold_samples, nullptr);
KILN_OP_SAMPLES(cat, block_diag_samples, block_diag_errors);
KILN_OP_SAMPLES(stack, cartesian_prod_samples, cartesian_prod_errors);

}  // namespace
}  // namespace kiln::test
