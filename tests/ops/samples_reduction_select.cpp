// Samples for the order-statistic reductions of ops.def (median, nanmedian,
// kthvalue, mode, quantile, nanquantile): ties in integer inputs, NaN rows,
// 0-d, empty and strided inputs, negative dims; references sort or count each
// slice in fp64 (std::stable_sort, NaN last), sharing no code with kiln.
#include <algorithm>
#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "tests/ops/samples_reduction_util.h"

namespace kiln::test {
namespace {
using namespace reduction;

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
