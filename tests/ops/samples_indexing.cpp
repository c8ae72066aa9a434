// Samples of the indexing family: gather/scatter, index/index_put,
// index_select/index_add, masks, one_hot, sort/topk, embedding. References are
// naive fp64 loops over Ref (tests/ops/ref.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8,
                                 kInt16,   kInt32,   kInt64,   kUInt8,    kBool};

// Values for dtype t: in [-2, 2) (integers in [0, 4) so unsigned types hold them).
Tensor val(const Shape& s, DType t, uint64_t seed, bool noncontig = false) {
  bool uns = !is_floating_point(t);
  return make_input(s, t, seed, uns ? 0.0 : -2.0, uns ? 3.4 : 2.0, noncontig);
}
// Random integer indices in [lo, hi].
Tensor rand_idx(const Shape& s, int64_t lo, int64_t hi, uint64_t seed, bool noncontig = false, DType t = kInt64) {
  return make_input(s, kInt64, seed, lo - 0.49, hi + 0.49, noncontig).to(t);
}
Tensor idx(std::vector<int64_t> v, Shape s, DType t = kInt64) { return kiln::tensor<int64_t>(v, s).to(t); }
// A 1-d (or shaped) tensor of dtype t from doubles.
Tensor vals(std::vector<double> v, DType t, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return kiln::tensor<double>(v, s).to(t);
}
std::string dn(DType t) { return std::string(dtype_name(t)); }

// For ops that write (scatter): an index of `s` whose rows along dim are
// distinct positions in [0, n) (no duplicates, so the result is unique).
Tensor perm_idx(const Shape& s, int64_t dim, int64_t n, uint64_t seed) {
  Ref r(s);
  uint64_t st = seed;
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape c = unravel(i, s);
    if (c[dim] != 0) continue;
    std::vector<int64_t> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    for (int64_t k = n - 1; k > 0; --k) {
      st = st * 6364136223846793005ULL + 1442695040888963407ULL;
      std::swap(p[k], p[(st >> 33) % (k + 1)]);
    }
    for (int64_t j = 0; j < s[dim]; ++j) {
      c[dim] = j;
      r.at(c) = static_cast<double>(p[j]);
    }
  }
  return r.to(kInt64);
}

Shape s1(const Shape& s) { return s.empty() ? Shape{1} : s; }  // 0-d seen as 1-d

// ---- gather / scatter references ----
Ref ref_gather(const Ref& x, int64_t dim, const Ref& index) {
  Ref out(index.shape);
  Shape xs = s1(x.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape c = unravel(i, s1(index.shape));
    c[dim] = static_cast<int64_t>(index.v[i]);
    out.v[i] = x.v[ravel(c, xs)];
  }
  return out;
}

// reduce: "set", "sum", "prod", "mean", "amax", "amin".
Ref ref_scatter(const Ref& x, int64_t dim, const Ref& index, const Ref& src, const std::string& reduce,
                bool include_self = true) {
  Ref out = x;
  Shape xs = s1(x.shape), is = s1(index.shape), ss = s1(src.shape);
  std::vector<std::vector<double>> got(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < index.numel(); ++i) {
    Shape c = unravel(i, is);
    double v = src.v[ravel(c, ss)];
    c[dim] = static_cast<int64_t>(index.v[i]);
    got[ravel(c, xs)].push_back(v);
  }
  for (int64_t p = 0; p < x.numel(); ++p) {
    auto vals = got[p];
    if (vals.empty()) continue;
    if (reduce == "set") {
      out.v[p] = vals.back();
      continue;
    }
    if (include_self) vals.insert(vals.begin(), x.v[p]);
    double acc = vals[0];
    for (size_t k = 1; k < vals.size(); ++k) {
      double b = vals[k];
      if (reduce == "sum" || reduce == "mean") acc += b;
      else if (reduce == "prod") acc *= b;
      else if (reduce == "amax") acc = std::max(acc, b);
      else acc = std::min(acc, b);
    }
    if (reduce == "mean") acc /= static_cast<double>(vals.size());
    out.v[p] = acc;
  }
  return out;
}

// ---- advanced indexing reference ----
// For each element of x[indices], the flat position in x it reads.
struct RefIndex {
  Shape result;
  std::vector<int64_t> pos;
};
RefIndex ref_index_pos(const Shape& xs, const std::vector<Tensor>& indices) {
  std::vector<int64_t> dims;
  std::vector<Ref> iv;
  Shape b;
  for (size_t k = 0; k < indices.size(); ++k)
    if (indices[k].defined()) {
      dims.push_back(static_cast<int64_t>(k));
      iv.push_back(Ref::of(indices[k]));
      b = ref_broadcast(b, iv.back().shape);
    }
  bool adjacent = true;
  for (size_t k = 1; k < dims.size(); ++k) adjacent = adjacent && dims[k] == dims[k - 1] + 1;
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < static_cast<int64_t>(xs.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) rest.push_back(d);
  // Where B goes in the result: before the first indexed dim (adjacent) or first.
  size_t bpos = 0;
  if (adjacent && !dims.empty())
    while (bpos < rest.size() && rest[bpos] < dims[0]) ++bpos;
  RefIndex r;
  for (size_t k = 0; k < bpos; ++k) r.result.push_back(xs[rest[k]]);
  r.result.insert(r.result.end(), b.begin(), b.end());
  for (size_t k = bpos; k < rest.size(); ++k) r.result.push_back(xs[rest[k]]);
  for (int64_t i = 0; i < ref_numel(r.result); ++i) {
    Shape c = unravel(i, r.result), xc(xs.size());
    for (size_t k = 0; k < bpos; ++k) xc[rest[k]] = c[k];
    Shape bc(c.begin() + static_cast<int64_t>(bpos), c.begin() + static_cast<int64_t>(bpos + b.size()));
    for (size_t k = bpos; k < rest.size(); ++k) xc[rest[k]] = c[k + b.size()];
    for (size_t k = 0; k < dims.size(); ++k) {
      auto v = static_cast<int64_t>(iv[k].v[broadcast_index(bc, iv[k].shape)]);
      xc[dims[k]] = v < 0 ? v + xs[dims[k]] : v;
    }
    r.pos.push_back(ravel(xc, xs));
  }
  return r;
}

Ref ref_index(const Ref& x, const std::vector<Tensor>& indices) {
  RefIndex p = ref_index_pos(x.shape, indices);
  Ref out(p.result);
  for (size_t i = 0; i < p.pos.size(); ++i) out.v[i] = x.v[p.pos[i]];
  return out;
}

Ref ref_index_put(const Ref& x, const std::vector<Tensor>& indices, const Ref& values, bool accumulate) {
  RefIndex p = ref_index_pos(x.shape, indices);
  Ref out = x;
  for (size_t i = 0; i < p.pos.size(); ++i) {
    double v = values.v[broadcast_index(unravel(static_cast<int64_t>(i), p.result), values.shape)];
    out.v[p.pos[i]] = accumulate ? out.v[p.pos[i]] + v : v;
  }
  return out;
}

// Integer index tensors of a bool mask (what x[mask] selects), for the references.
std::vector<Tensor> ref_mask_to_indices(const Tensor& mask) {
  Ref m = Ref::of(mask);
  std::vector<std::vector<int64_t>> cols(static_cast<size_t>(m.dim()));
  for (int64_t i = 0; i < m.numel(); ++i)
    if (m.v[i] != 0) {
      Shape c = unravel(i, m.shape);
      for (size_t d = 0; d < c.size(); ++d) cols[d].push_back(c[d]);
    }
  std::vector<Tensor> r;
  for (auto& c : cols) r.push_back(idx(c, {static_cast<int64_t>(c.size())}));
  return r;
}

// ======================= gather =======================
std::vector<OpSample> gather_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, Tensor index) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, index};
    s.fn = [dim](const TensorList& in) { return TensorList{gather(in[0], dim, in[1])}; };
    s.reference = [dim](const TensorList& in) {
      int64_t d = dim < 0 ? dim + std::max<int64_t>(in[0].dim(), 1) : dim;
      return TensorList{ref_gather(Ref::of(in[0]), d, Ref::of(in[1])).to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : kAll) add("dim1 " + dn(t), val({3, 4}, t, 1), 1, rand_idx({3, 5}, 0, 3, 2));
  add("dim0 smaller index", val({4, 5}, kFloat32, 3), 0, rand_idx({2, 3}, 0, 3, 4));
  add("neg dim noncontig", val({3, 4, 2}, kFloat64, 5, true), -2, rand_idx({2, 6, 2}, 0, 3, 6, true));
  add("int32 index", val({3, 4}, kFloat32, 7), 1, rand_idx({3, 2}, 0, 3, 8, false, kInt32));
  add("empty index", val({3, 4}, kFloat32, 9), 1, idx({}, {3, 0}));
  add("0-d", val({}, kFloat64, 10), 0, idx({0}, {}));
  return v;
}
std::vector<ErrorSample> gather_errors() {
  return {
      {"index out of range", [] { gather(val({3, 4}, kFloat32, 1), 1, idx({0, 4}, {1, 2})); }, "index 4 is out of bounds"},
      {"negative index", [] { gather(val({3, 4}, kFloat32, 1), 1, idx({-1}, {1, 1})); }, "index -1 is out of bounds"},
      {"ndim mismatch", [] { gather(val({3, 4}, kFloat32, 1), 1, idx({0}, {1})); }, "same number of dimensions"},
      {"index too large", [] { gather(val({3, 4}, kFloat32, 1), 1, idx({0, 0, 0, 0}, {4, 1})); }, "no larger than"},
      {"float index", [] { gather(val({3, 4}, kFloat32, 1), 1, val({3, 4}, kFloat32, 1)); }, "int64 or int32"},
      {"dim out of range", [] { gather(val({3, 4}, kFloat32, 1), 2, idx({0}, {1, 1})); }, "dimension out of range"},
  };
}
KILN_OP_SAMPLES(gather, gather_samples, gather_errors);

// ======================= scatter / scatter_add / scatter_reduce =======================
OpSample scatter_sample(std::string name, Tensor x, int64_t dim, Tensor index, Tensor src, std::string reduce,
                        bool include_self = true) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {x, index, src};
  s.fn = [dim, reduce, include_self](const TensorList& in) {
    if (reduce == "set") return TensorList{scatter(in[0], dim, in[1], in[2])};
    if (reduce == "add") return TensorList{scatter_add(in[0], dim, in[1], in[2])};
    return TensorList{scatter_reduce(in[0], dim, in[1], in[2], reduce, include_self)};
  };
  s.reference = [dim, reduce, include_self](const TensorList& in) {
    int64_t d = dim < 0 ? dim + std::max<int64_t>(in[0].dim(), 1) : dim;
    Ref r = ref_scatter(Ref::of(in[0]), d, Ref::of(in[1]), Ref::of(in[2]), reduce == "add" ? "sum" : reduce,
                        include_self);
    if (reduce == "mean" && !is_floating_point(in[0].dtype()))  // integral mean rounds down
      for (double& e : r.v) e = std::floor(e);
    return TensorList{r.to(in[0].dtype())};
  };
  return s;
}

std::vector<OpSample> scatter_samples() {
  std::vector<OpSample> v;
  for (DType t : kAll)
    v.push_back(scatter_sample("dim1 " + dn(t), val({3, 5}, t, 1), 1, perm_idx({3, 3}, 1, 5, 2), val({3, 4}, t, 3), "set"));
  v.push_back(scatter_sample("dim0 noncontig, src larger", val({4, 3}, kFloat64, 4, true), 0, perm_idx({3, 2}, 0, 4, 5),
                             val({5, 3}, kFloat64, 6, true), "set"));
  v.push_back(scatter_sample("neg dim 3-d", val({2, 3, 4}, kFloat32, 7), -1, perm_idx({2, 2, 3}, 2, 4, 8),
                             val({2, 2, 3}, kFloat32, 9), "set"));
  v.push_back(scatter_sample("empty index", val({2, 3}, kFloat32, 10), 1, idx({}, {2, 0}), val({2, 3}, kFloat32, 11), "set"));
  v.push_back(scatter_sample("0-d", val({}, kFloat64, 12), 0, idx({0}, {}), val({}, kFloat64, 13), "set"));
  // Duplicates with accumulate=false: any value may win, so only check it is one of them.
  OpSample dup;
  dup.name = "duplicates: any value wins";
  dup.inputs = {val({4}, kFloat32, 14), idx({1, 1, 1}, {3}), vals({5, 6, 7}, kFloat32)};
  dup.fn = [](const TensorList& in) { return TensorList{scatter(in[0], 0, in[1], in[2])}; };
  dup.reference = [](const TensorList& in) { return TensorList{in[0]}; };
  dup.compare_values = false;
  dup.check_grad = false;
  dup.check = [x = dup.inputs[0]](const TensorList& out) {
    auto o = out[0].to_vector<double>(), xv = x.to_vector<double>();
    EXPECT_TRUE(o[1] == 5 || o[1] == 6 || o[1] == 7) << o[1];
    EXPECT_EQ(o[0], xv[0]);
    EXPECT_EQ(o[3], xv[3]);
  };
  v.push_back(dup);
  // The Scalar overload.
  OpSample sc;
  sc.name = "scalar value";
  sc.inputs = {val({3, 4}, kFloat32, 15), rand_idx({3, 2}, 0, 3, 16)};
  sc.fn = [](const TensorList& in) { return TensorList{in[0].scatter(1, in[1], Scalar(2.5))}; };
  sc.reference = [](const TensorList& in) {
    return TensorList{
        ref_scatter(Ref::of(in[0]), 1, Ref::of(in[1]), Ref({3, 2}, 2.5), "set").to(kFloat32)};
  };
  v.push_back(sc);
  return v;
}
std::vector<ErrorSample> scatter_errors() {
  return {
      {"index out of range", [] { scatter(val({3}, kFloat32, 1), 0, idx({3}, {1}), val({1}, kFloat32, 1)); },
       "index 3 is out of bounds for dimension 0 with size 3"},
      {"negative index", [] { scatter(val({3}, kFloat32, 1), 0, idx({-1}, {1}), val({1}, kFloat32, 1)); },
       "index -1 is out of bounds"},
      {"dtype mismatch", [] { scatter(val({3}, kFloat32, 1), 0, idx({0}, {1}), val({1}, kFloat64, 1)); }, "same dtype"},
      {"src too small", [] { scatter(val({3, 3}, kFloat32, 1), 0, idx({0, 0}, {1, 2}), val({1, 1}, kFloat32, 1)); },
       "no larger than src"},
  };
}
KILN_OP_SAMPLES(scatter, scatter_samples, scatter_errors);

std::vector<OpSample> scatter_add_samples() {
  std::vector<OpSample> v;
  for (DType t : kAll)
    v.push_back(scatter_sample("duplicates " + dn(t), val({3, 4}, t, 1), 1, rand_idx({3, 5}, 0, 3, 2),
                               val({3, 5}, t, 3), "add"));
  v.push_back(scatter_sample("dim0 noncontig, smaller index", val({4, 3}, kFloat64, 4, true), 0,
                             rand_idx({3, 2}, 0, 3, 5, true), val({5, 3}, kFloat64, 6, true), "add"));
  v.push_back(scatter_sample("0-d", val({}, kFloat64, 7), 0, idx({0}, {}), val({}, kFloat64, 8), "add"));
  v.push_back(scatter_sample("empty", val({0, 3}, kFloat32, 9), 1, idx({}, {0, 2}), val({0, 2}, kFloat32, 10), "add"));
  // Larger than one grain, so the parallel path runs.
  v.push_back(scatter_sample("large", val({64, 700}, kFloat32, 11), 1, rand_idx({64, 900}, 0, 699, 12),
                             val({64, 900}, kFloat32, 13), "add"));
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> scatter_add_errors() {
  return {{"index out of range", [] { scatter_add(val({2, 3}, kFloat32, 1), 1, idx({5}, {1, 1}), val({1, 1}, kFloat32, 1)); },
           "index 5 is out of bounds for dimension 1 with size 3"},
          {"ndim mismatch", [] { scatter_add(val({2, 3}, kFloat32, 1), 1, idx({0}, {1}), val({1, 1}, kFloat32, 1)); },
           "same number of dimensions"}};
}
KILN_OP_SAMPLES(scatter_add, scatter_add_samples, scatter_add_errors);

std::vector<OpSample> scatter_reduce_samples() {
  std::vector<OpSample> v;
  for (std::string r : {"sum", "prod", "mean", "amax", "amin"})
    for (bool incl : {true, false})
      for (DType t : {kFloat32, kFloat64, kInt64, kInt16, kBFloat16}) {
        // Distinct float values (no ties) so amax/amin are differentiable.
        Tensor x = is_floating_point(t) ? vals({0.5, -1.25, 1.5, 0.75, -0.5, 1.125, -1.75, 0.25}, t, {2, 4})
                                        : val({2, 4}, t, 1);
        Tensor src = is_floating_point(t) ? vals({1.375, -0.625, 0.875, -1.5, 0.3125, 1.875}, t, {2, 3})
                                          : val({2, 3}, t, 2);
        v.push_back(scatter_sample(r + (incl ? " include_self " : " exclude_self ") + dn(t), x, 1,
                                   idx({0, 2, 0, 3, 3, 1}, {2, 3}), src, r, incl));
      }
  v.push_back(scatter_sample("mean noncontig dim0", val({3, 2}, kFloat64, 3, true), 0, idx({2, 0, 2, 2}, {2, 2}),
                             val({2, 2}, kFloat64, 4, true), "mean", true));
  v.push_back(scatter_sample("prod with zeros", vals({0.0, 1.5, -2.0, 0.5}, kFloat64), 0,
                             idx({0, 1, 1, 2}, {4}), vals({2.0, 0.0, 3.0, 0.0}, kFloat64), "prod", true));
  return v;
}
std::vector<ErrorSample> scatter_reduce_errors() {
  return {{"bad reduce", [] { scatter_reduce(val({3}, kFloat32, 1), 0, idx({0}, {1}), val({1}, kFloat32, 1), "max"); },
           "reduce argument must be one of"},
          {"index out of range", [] { scatter_reduce(val({3}, kFloat32, 1), 0, idx({7}, {1}), val({1}, kFloat32, 1), "sum"); },
           "index 7 is out of bounds"}};
}
KILN_OP_SAMPLES(scatter_reduce, scatter_reduce_samples, scatter_reduce_errors);

// ======================= index_select / index_add =======================
std::vector<OpSample> index_select_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, Tensor index) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, index};
    s.fn = [dim](const TensorList& in) { return TensorList{in[0].index_select(dim, in[1])}; };
    s.reference = [dim](const TensorList& in) {
      if (in[0].dim() == 0) return TensorList{in[0].clone()};
      int64_t d = dim < 0 ? dim + in[0].dim() : dim;
      std::vector<Tensor> ind(static_cast<size_t>(d));
      ind.push_back(in[1].dim() == 0 ? idx({static_cast<int64_t>(Ref::of(in[1]).v[0])}, {1}) : in[1]);
      return TensorList{ref_index(Ref::of(in[0]), ind).to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : kAll) add("dim1 " + dn(t), val({3, 4}, t, 1), 1, rand_idx({5}, 0, 3, 2));
  add("dim0 duplicates noncontig", val({4, 3}, kFloat64, 3, true), 0, idx({3, 0, 3, 1}, {4}));
  add("negative dim", val({4, 3}, kFloat32, 4), -1, idx({2, 0, 1}, {3}, kInt32));
  add("0-d index", val({4, 3}, kFloat64, 5), 0, idx({2}, {}));
  add("empty index", val({4, 3}, kFloat32, 6), 1, idx({}, {0}));
  add("0-d input", val({}, kFloat64, 7), 0, idx({0}, {1}));
  add("large rows", val({300, 200}, kFloat32, 8), 0, rand_idx({500}, 0, 299, 9));
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> index_select_errors() {
  return {{"out of range",
           [] {
             index_select(val({3, 4}, kFloat32, 1), 0, idx({3}, {1}));
           },
           "index 3 is out of bounds for dimension 0 with size 3"},
          // torch raises IndexError: unlike x[idx], index_select does not wrap negative indices.
          {"negative index",
           [] {
             index_select(val({4, 3}, kFloat32, 1), 1, idx({0, -1}, {2}, kInt32));
           },
           "index_select: index -1 is out of bounds for dimension 1 with size 3"},
          {"2-d index",
           [] {
             index_select(val({3, 4}, kFloat32, 1), 0, idx({0, 1}, {1, 2}));
           },
           "supposed to be a vector"},
          {"float index",
           [] {
             index_select(val({3, 4}, kFloat32, 1), 0, val({2}, kFloat32, 1));
           },
           "int64 or int32"}};
}
KILN_OP_SAMPLES(index_select, index_select_samples, index_select_errors);

std::vector<OpSample> index_add_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, Tensor index, Tensor src, Scalar alpha) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, index, src};
    s.fn = [dim, alpha](const TensorList& in) { return TensorList{in[0].index_add(dim, in[1], in[2], alpha)}; };
    s.reference = [dim, alpha](const TensorList& in) {
      Ref x = Ref::of(in[0]), ix = Ref::of(in[1]), sr = Ref::of(in[2]);
      Shape xs = s1(x.shape), ss = s1(sr.shape);
      int64_t d = dim < 0 ? dim + static_cast<int64_t>(xs.size()) : dim;
      for (int64_t i = 0; i < sr.numel(); ++i) {
        Shape c = unravel(i, ss);
        auto k = static_cast<int64_t>(ix.v[c[d]]);
        c[d] = k < 0 ? k + xs[d] : k;
        x.v[ravel(c, xs)] += alpha.to_double() * sr.v[i];
      }
      return TensorList{x.to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : kAll)
    add("dim1 duplicates " + dn(t), val({3, 4}, t, 1), 1, rand_idx({5}, 0, 3, 2), val({3, 5}, t, 3), 1);
  add("alpha noncontig dim0", val({4, 3}, kFloat64, 4, true), 0, idx({3, 0, 3}, {3}), val({3, 3}, kFloat64, 5, true), 0.5);
  add("int alpha", val({4, 3}, kInt32, 6), 0, idx({1, 2}, {2}, kInt32), val({2, 3}, kInt32, 7), 3);
  add("0-d", val({}, kFloat64, 8), 0, idx({0}, {1}), val({}, kFloat64, 9), 1);
  add("large", val({50, 1000}, kFloat32, 10), 0, rand_idx({80}, 0, 49, 11), val({80, 1000}, kFloat32, 12), 1);
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> index_add_errors() {
  return {{"out of range",
           [] {
             index_add(val({3, 4}, kFloat32, 1), 0, idx({5}, {1}), val({1, 4}, kFloat32, 1));
           },
           "index 5 is out of bounds for dimension 0 with size 3"},
          {"negative index",
           [] {
             index_add(val({3, 4}, kFloat32, 1), 0, idx({-1}, {1}), val({1, 4}, kFloat32, 1));
           },
           "index_add: index -1 is out of bounds for dimension 0 with size 3"},
          {"count mismatch",
           [] {
             index_add(val({3, 4}, kFloat32, 1), 0, idx({0, 1}, {2}), val({1, 4}, kFloat32, 1));
           },
           "number of indices (2)"},
          {"shape mismatch",
           [] {
             index_add(val({3, 4}, kFloat32, 1), 0, idx({0}, {1}), val({1, 5}, kFloat32, 1));
           },
           "source shape must match"},
          {"dtype mismatch",
           [] {
             index_add(val({3, 4}, kFloat32, 1), 0, idx({0}, {1}), val({1, 4}, kFloat64, 1));
           },
           "must have the same dtype"}};
}
KILN_OP_SAMPLES(index_add, index_add_samples, index_add_errors);

// ======================= index / index_put =======================
OpSample index_sample(std::string name, Tensor x, std::vector<Tensor> indices) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {x};
  s.inputs.insert(s.inputs.end(), indices.begin(), indices.end());
  s.fn = [](const TensorList& in) { return TensorList{index(in[0], TensorList(in.begin() + 1, in.end()))}; };
  s.reference = [](const TensorList& in) {
    TensorList ind(in.begin() + 1, in.end());
    // Masks select the positions of their true elements (independent conversion).
    TensorList conv;
    for (const Tensor& t : ind) {
      if (t.defined() && t.dtype() == kBool) {
        for (const Tensor& c : ref_mask_to_indices(t)) conv.push_back(c);
      } else {
        conv.push_back(t);
      }
    }
    return TensorList{ref_index(Ref::of(in[0]), conv).to(in[0].dtype())};
  };
  return s;
}

std::vector<OpSample> index_samples() {
  std::vector<OpSample> v;
  for (DType t : kAll) v.push_back(index_sample("one index " + dn(t), val({4, 3}, t, 1), {rand_idx({5}, 0, 3, 2)}));
  v.push_back(index_sample("two adjacent broadcast", val({2, 4, 3, 2}, kFloat64, 3),
                           {Tensor(), rand_idx({2, 1}, 0, 3, 4), rand_idx({3}, -3, 2, 5)}));
  v.push_back(index_sample("separated by a slice", val({4, 2, 3}, kFloat64, 6, true),
                           {rand_idx({2, 2}, 0, 3, 7, true), Tensor(), rand_idx({2}, 0, 2, 8, false, kInt32)}));
  v.push_back(index_sample("trailing dims implicit, 0-d index", val({3, 4, 2}, kFloat32, 9), {idx({-1}, {})}));
  v.push_back(index_sample("bool mask", val({3, 4}, kFloat64, 10), {make_input({3, 4}, kBool, 11)}));
  v.push_back(index_sample("bool mask after slice", val({2, 3, 4}, kFloat64, 12), {Tensor(), make_input({3}, kBool, 13)}));
  v.push_back(index_sample("mask and index", val({3, 4}, kFloat64, 14), {idx({1, 0, 2}, {3}), idx({1, 0, 1, 1}, {4}).to(kBool)}));
  v.push_back(index_sample("empty index", val({3, 4}, kFloat32, 16), {idx({}, {0})}));
  v.push_back(index_sample("empty input", val({0, 4}, kFloat32, 17), {Tensor(), idx({1, 3}, {2})}));
  v.push_back(index_sample("large", val({200, 300}, kFloat32, 18), {rand_idx({400}, -200, 199, 19)}));
  v.back().check_grad = false;
  v.push_back(index_sample("large columns", val({300, 200}, kFloat32, 20), {Tensor(), rand_idx({3}, 0, 199, 21)}));
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> index_errors() {
  return {{"out of range", [] { index(val({3, 4}, kFloat32, 1), {Tensor(), idx({4}, {1})}); },
           "index 4 is out of bounds for dimension 1 with size 4"},
          {"negative out of range", [] { index(val({3, 4}, kFloat32, 1), {idx({-4}, {1})}); }, "index -4 is out of bounds"},
          {"too many indices", [] { index(val({3}, kFloat32, 1), {idx({0}, {1}), idx({0}, {1})}); }, "too many indices"},
          {"broadcast mismatch", [] { index(val({3, 4}, kFloat32, 1), {idx({0, 1}, {2}), idx({0, 1, 2}, {3})}); },
           "must match"},
          {"mask shape", [] { index(val({3, 4}, kFloat32, 1), {make_input({4}, kBool, 1)}); }, "shape of the mask"},
          {"float index", [] { index(val({3, 4}, kFloat32, 1), {val({2}, kFloat32, 1)}); }, "int64 or int32"}};
}
KILN_OP_SAMPLES(index, index_samples, index_errors);

OpSample index_put_sample(std::string name, Tensor x, Tensor values, std::vector<Tensor> indices, bool accumulate) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {x, values};
  s.inputs.insert(s.inputs.end(), indices.begin(), indices.end());
  s.fn = [accumulate](const TensorList& in) {
    return TensorList{index_put(in[0], TensorList(in.begin() + 2, in.end()), in[1], accumulate)};
  };
  s.reference = [accumulate](const TensorList& in) {
    TensorList conv;
    for (auto it = in.begin() + 2; it != in.end(); ++it) {
      if (it->defined() && it->dtype() == kBool) {
        for (const Tensor& c : ref_mask_to_indices(*it)) conv.push_back(c);
      } else {
        conv.push_back(*it);
      }
    }
    return TensorList{ref_index_put(Ref::of(in[0]), conv, Ref::of(in[1]), accumulate).to(in[0].dtype())};
  };
  return s;
}

std::vector<OpSample> index_put_samples() {
  std::vector<OpSample> v;
  for (DType t : kAll) {
    v.push_back(index_put_sample("distinct " + dn(t), val({5, 3}, t, 1), val({3, 3}, t, 2), {idx({4, 0, 2}, {3})}, false));
    v.push_back(index_put_sample("accumulate duplicates " + dn(t), val({5, 3}, t, 3), val({4, 3}, t, 4),
                                 {idx({1, 1, 3, 1}, {4})}, true));
    v.back().atol = 2e-2;  // 16-bit floats round after each accumulated value
  }
  v.push_back(index_put_sample("broadcast values, two indices", val({3, 4, 2}, kFloat64, 5), val({2}, kFloat64, 6),
                               {idx({0, 2}, {2}), idx({-1, 1}, {2})}, false));
  v.push_back(index_put_sample("separated accumulate noncontig", val({4, 2, 3}, kFloat64, 7, true),
                               val({2, 2}, kFloat64, 8, true), {idx({0, 0}, {2}), Tensor(), idx({1, 1}, {2})}, true));
  v.push_back(index_put_sample("bool mask 0-d value", val({3, 4}, kFloat64, 9), val({}, kFloat64, 10),
                               {make_input({3, 4}, kBool, 11)}, false));
  v.push_back(index_put_sample("empty", val({3, 4}, kFloat32, 12), val({}, kFloat32, 13), {idx({}, {0})}, true));
  v.push_back(index_put_sample("large accumulate", val({100, 300}, kFloat32, 14), val({500, 300}, kFloat32, 15),
                               {rand_idx({500}, 0, 99, 16)}, true));
  v.back().check_grad = false;
  // In place.
  OpSample ip;
  ip.name = "index_put_ in place";
  ip.inputs = {val({4, 2}, kFloat32, 17), val({2}, kFloat32, 18), idx({3}, {1})};
  ip.fn = [](const TensorList& in) {
    Tensor x = in[0].clone();
    index_put_(x, {in[2]}, in[1], false);
    return TensorList{x};
  };
  ip.reference = [](const TensorList& in) {
    return TensorList{ref_index_put(Ref::of(in[0]), {in[2]}, Ref::of(in[1]), false).to(kFloat32)};
  };
  v.push_back(ip);
  // Duplicates without accumulate: one of the values wins.
  OpSample dup;
  dup.name = "duplicates: any value wins";
  dup.inputs = {val({3}, kFloat32, 19), vals({5, 6}, kFloat32), idx({2, 2}, {2})};
  dup.fn = [](const TensorList& in) { return TensorList{index_put(in[0], {in[2]}, in[1])}; };
  dup.reference = [](const TensorList& in) { return TensorList{in[0]}; };
  dup.compare_values = false;
  dup.check_grad = false;
  dup.check = [](const TensorList& out) {
    double w = out[0].to_vector<double>()[2];
    EXPECT_TRUE(w == 5 || w == 6) << w;
  };
  v.push_back(dup);
  return v;
}
std::vector<ErrorSample> index_put_errors() {
  return {{"out of range", [] { index_put(val({3}, kFloat32, 1), {idx({3}, {1})}, val({1}, kFloat32, 1)); },
           "index 3 is out of bounds for dimension 0 with size 3"},
          {"dtype mismatch", [] { index_put(val({3}, kFloat32, 1), {idx({0}, {1})}, val({1}, kFloat64, 1)); },
           "dtypes to match"},
          {"values shape", [] { index_put(val({3, 2}, kFloat32, 1), {idx({0, 1}, {2})}, val({3}, kFloat32, 1)); },
           "cannot be broadcast"}};
}
KILN_OP_SAMPLES(index_put, index_put_samples, index_put_errors);

// ======================= masks =======================
std::vector<OpSample> masked_fill_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor mask, Tensor value) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, mask, value};
    s.fn = [](const TensorList& in) { return TensorList{in[0].masked_fill(in[1], in[2])}; };
    s.reference = [](const TensorList& in) {
      double fill = Ref::of(in[2].to(in[0].dtype())).v[0];
      Ref r = ref_map2(Ref::of(in[0]), Ref::of(in[1]), [fill](double a, double m) { return m != 0 ? fill : a; });
      return TensorList{r.to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : kAll) add("same shape " + dn(t), val({3, 4}, t, 1), make_input({3, 4}, kBool, 2), val({}, t, 3));
  add("broadcast mask noncontig", val({3, 4}, kFloat64, 4, true), make_input({4}, kBool, 5), val({}, kFloat64, 6));
  add("mask broadcasts x", val({4}, kFloat64, 7), make_input({2, 4}, kBool, 8), val({}, kFloat64, 9));
  add("0-d", val({}, kFloat32, 10), kiln::tensor(Scalar(true)), val({}, kFloat32, 11));
  add("empty", val({0, 3}, kFloat32, 12), make_input({0, 3}, kBool, 13), val({}, kFloat32, 14));
  add("float value into int", val({5}, kInt64, 15), make_input({5}, kBool, 16), kiln::tensor(Scalar(2.7)));
  // Scalar value and the in-place form.
  OpSample sc;
  sc.name = "scalar value, in place";
  sc.inputs = {val({3, 4}, kFloat32, 17), make_input({3, 4}, kBool, 18)};
  sc.fn = [](const TensorList& in) {
    Tensor a = in[0].masked_fill(in[1], -1.5);
    Tensor b = in[0].detach().clone();
    b.masked_fill_(in[1], 4);
    return TensorList{a, b};
  };
  sc.reference = [](const TensorList& in) {
    Ref x = Ref::of(in[0]), m = Ref::of(in[1]);
    auto f = [&](double fill) { return ref_map2(x, m, [fill](double a, double mm) { return mm != 0 ? fill : a; }).to(kFloat32); };
    return TensorList{f(-1.5), f(4)};
  };
  sc.check_grad = false;
  v.push_back(sc);
  return v;
}
std::vector<ErrorSample> masked_fill_errors() {
  return {{"non-bool mask", [] { masked_fill(val({3}, kFloat32, 1), val({3}, kInt64, 1), 1.0); }, "boolean masks"},
          {"value not 0-d", [] { masked_fill(val({3}, kFloat32, 1), make_input({3}, kBool, 1), val({1}, kFloat32, 1)); },
           "0-dimensional value"},
          {"shape mismatch", [] { masked_fill(val({3}, kFloat32, 1), make_input({4}, kBool, 1), 1.0); }, "must match"}};
}
KILN_OP_SAMPLES(masked_fill, masked_fill_samples, masked_fill_errors);

Ref ref_masked_select(const Ref& x, const Ref& m) {
  Shape b = ref_broadcast(x.shape, m.shape);
  std::vector<double> out;
  for (int64_t i = 0; i < ref_numel(b); ++i) {
    Shape c = unravel(i, b);
    if (m.v[broadcast_index(c, m.shape)] != 0) out.push_back(x.v[broadcast_index(c, x.shape)]);
  }
  Ref r({static_cast<int64_t>(out.size())});
  r.v = out;
  return r;
}

std::vector<OpSample> masked_select_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor mask) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, mask};
    s.fn = [](const TensorList& in) { return TensorList{in[0].masked_select(in[1])}; };
    s.reference = [](const TensorList& in) {
      return TensorList{ref_masked_select(Ref::of(in[0]), Ref::of(in[1])).to(in[0].dtype())};
    };
    v.push_back(s);
  };
  for (DType t : kAll) add("same shape " + dn(t), val({3, 4}, t, 1), make_input({3, 4}, kBool, 2));
  add("broadcast both noncontig", val({3, 1}, kFloat64, 3, true), make_input({2, 1, 4}, kBool, 4, 0, 1, true));
  add("0-d", val({}, kFloat64, 5), kiln::tensor(Scalar(true)));
  add("empty", val({0, 3}, kFloat32, 6), make_input({0, 3}, kBool, 7));
  add("large", val({300, 400}, kFloat32, 8), make_input({300, 400}, kBool, 9));
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> masked_select_errors() {
  return {{"non-bool mask", [] { masked_select(val({3}, kFloat32, 1), val({3}, kFloat32, 1)); }, "expected a bool mask"},
          {"shape mismatch", [] { masked_select(val({3}, kFloat32, 1), make_input({4}, kBool, 1)); }, "must match"}};
}
KILN_OP_SAMPLES(masked_select, masked_select_samples, masked_select_errors);

Ref ref_nonzero(const Ref& x) {
  std::vector<double> out;
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.v[i] != 0) {
      Shape c = unravel(i, x.shape);
      for (int64_t e : c) out.push_back(static_cast<double>(e));
      ++n;
    }
  Ref r({n, x.dim()});
  r.v = out;
  return r;
}

std::vector<OpSample> nonzero_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [](const TensorList& in) { return TensorList{in[0].nonzero()}; };
    s.reference = [](const TensorList& in) { return TensorList{ref_nonzero(Ref::of(in[0])).to(kInt64)}; };
    v.push_back(s);
  };
  for (DType t : kAll) add("2-d " + dn(t), val({3, 4}, t, 1));
  add("noncontig 3-d", make_input({2, 3, 4}, kInt32, 2, -1, 1, true));
  add("0-d true", kiln::tensor(Scalar(3.0)));
  add("0-d false", kiln::tensor(Scalar(0)));
  add("empty", val({0, 3}, kFloat32, 3));
  add("NaN and -0 count as nonzero / zero", vals({NAN, -0.0, 0.0, 1.0}, kFloat32));
  add("large", make_input({500, 300}, kBool, 4));
  // where(cond): the same positions as a tuple of 1-D index tensors.
  OpSample w;
  w.name = "where(cond)";
  w.inputs = {make_input({3, 4}, kBool, 5)};
  w.fn = [](const TensorList& in) { return where(in[0]); };
  w.reference = [](const TensorList& in) { return ref_mask_to_indices(in[0]); };
  v.push_back(w);
  return v;
}
KILN_OP_SAMPLES(nonzero, nonzero_samples, nullptr);

std::vector<OpSample> one_hot_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t n) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [n](const TensorList& in) { return TensorList{one_hot(in[0], n)}; };
    s.reference = [n](const TensorList& in) {
      Ref x = Ref::of(in[0]);
      int64_t c = n;
      if (c < 0)
        for (double e : x.v) c = std::max<int64_t>(c, static_cast<int64_t>(e) + 1);
      Shape s = x.shape;
      s.push_back(c);
      Ref r(s);
      for (int64_t i = 0; i < x.numel(); ++i) r.v[i * c + static_cast<int64_t>(x.v[i])] = 1;
      return TensorList{r.to(kInt64)};
    };
    v.push_back(s);
  };
  add("inferred classes", idx({0, 3, 1, 3}, {2, 2}), -1);
  add("explicit classes noncontig", rand_idx({3, 2}, 0, 4, 1, true), 6);
  add("0-d", idx({2}, {}), 4);
  add("empty", idx({}, {0}), 3);
  return v;
}
std::vector<ErrorSample> one_hot_errors() {
  return {{"class too large", [] { one_hot(idx({0, 5}, {2}), 3); }, "smaller than num_classes"},
          {"negative class", [] { one_hot(idx({-1}, {1}), 3); }, "non-negative"},
          {"not int64", [] { one_hot(idx({0}, {1}, kInt32), 3); }, "int64"},
          {"empty inferred", [] { one_hot(idx({}, {0})); }, "empty tensor"}};
}
KILN_OP_SAMPLES(one_hot, one_hot_samples, one_hot_errors);

// ======================= sort / argsort / topk =======================
// Row order along dim: NaN largest; ties keep their original order.
void ref_sort_rows(const Ref& x, int64_t dim, bool desc, int64_t k, Ref& values, Ref& indices) {
  Shape xs = s1(x.shape), os = xs;
  os[dim] = k;
  values = Ref(os);
  indices = Ref(os);
  int64_t n = xs[dim];
  for (int64_t i = 0; i < ref_numel(os); ++i) {
    Shape c = unravel(i, os);
    if (c[dim] != 0) continue;
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t j = 0; j < n; ++j) {
      c[dim] = j;
      row.push_back({x.v[ravel(c, xs)], j});
    }
    auto key = [](double a) { return std::isnan(a) ? INFINITY : a; };
    std::stable_sort(row.begin(), row.end(), [&](auto& a, auto& b) {
      bool an = std::isnan(a.first), bn = std::isnan(b.first);
      if (an || bn) return desc ? (an && !bn) : (!an && bn);
      return desc ? key(a.first) > key(b.first) : key(a.first) < key(b.first);
    });
    for (int64_t j = 0; j < k; ++j) {
      c[dim] = j;
      values.v[ravel(c, os)] = row[j].first;
      indices.v[ravel(c, os)] = static_cast<double>(row[j].second);
    }
  }
  if (x.shape.empty()) values.shape = indices.shape = {};
}

std::vector<OpSample> sort_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, bool desc, bool stable) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) {
      auto [a, b] = sort(in[0], dim, desc, stable);
      return TensorList{a, b};
    };
    s.reference = [=](const TensorList& in) {
      Ref vals, ids;
      int64_t d = dim < 0 ? dim + std::max<int64_t>(in[0].dim(), 1) : dim;
      ref_sort_rows(Ref::of(in[0]), d, desc, s1(in[0].sizes().vec())[d], vals, ids);
      return TensorList{vals.to(in[0].dtype()), ids.to(kInt64)};
    };
    v.push_back(s);
  };
  for (DType t : kAll) {
    add("stable asc " + dn(t), val({3, 6}, t, 1), -1, false, true);
    add("stable desc dim0 " + dn(t), val({5, 2}, t, 2), 0, true, true);
  }
  add("unstable distinct noncontig", val({3, 5}, kFloat64, 3, true), 1, false, false);
  add("NaN largest asc", vals({1, NAN, -2, 3, NAN, 0}, kFloat32), 0, false, true);
  v.back().check_grad = false;
  add("NaN largest desc", vals({1, NAN, -2, 3, 0}, kFloat64), 0, true, true);
  v.back().check_grad = false;
  add("0-d", val({}, kFloat64, 4), 0, false, false);
  add("empty", val({0, 3}, kFloat32, 5), 1, false, true);
  add("large rows", val({64, 500}, kFloat32, 6), 1, true, true);
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> sort_errors() {
  return {{"dim out of range", [] { sort(val({3}, kFloat32, 1), 1); }, "dimension out of range"}};
}
KILN_OP_SAMPLES(sort, sort_samples, sort_errors);

std::vector<OpSample> argsort_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kInt64, kBool}) {
    OpSample s;
    s.name = "stable desc " + dn(t);
    s.inputs = {val({4, 5}, t, 1)};
    s.fn = [](const TensorList& in) { return TensorList{argsort(in[0], 1, true, true)}; };
    s.reference = [](const TensorList& in) {
      Ref vals, ids;
      ref_sort_rows(Ref::of(in[0]), 1, true, 5, vals, ids);
      return TensorList{ids.to(kInt64)};
    };
    v.push_back(s);
  }
  return v;
}
KILN_OP_SAMPLES(argsort, argsort_samples, nullptr);

std::vector<OpSample> topk_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t k, int64_t dim, bool largest) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) {
      auto [a, b] = topk(in[0], k, dim, largest);
      return TensorList{a, b};
    };
    s.reference = [=](const TensorList& in) {
      Ref vals, ids;
      int64_t d = dim < 0 ? dim + std::max<int64_t>(in[0].dim(), 1) : dim;
      ref_sort_rows(Ref::of(in[0]), d, largest, k, vals, ids);
      return TensorList{vals.to(in[0].dtype()), ids.to(kInt64)};
    };
    v.push_back(s);
  };
  for (DType t : kAll)
    if (t != kBool) add("largest " + dn(t), val({3, 6}, t, 1), 3, -1, true);
  add("smallest dim0 noncontig", val({5, 3}, kFloat64, 2, true), 2, 0, false);
  add("k = size", val({4}, kFloat64, 3), 4, 0, true);
  add("k = 0", val({2, 4}, kFloat32, 4), 0, 1, true);
  add("NaN largest", vals({1, NAN, -2, 3}, kFloat64), 2, 0, true);
  v.back().check_grad = false;
  add("0-d", val({}, kFloat64, 5), 1, 0, true);
  add("large", val({32, 1000}, kFloat32, 6), 10, 1, true);
  v.back().check_grad = false;
  return v;
}
std::vector<ErrorSample> topk_errors() {
  return {{"k too large", [] { topk(val({3, 4}, kFloat32, 1), 5); }, "k (5) is out of range"},
          {"negative k", [] { topk(val({3, 4}, kFloat32, 1), -1); }, "out of range"}};
}
KILN_OP_SAMPLES(topk, topk_samples, topk_errors);

// ======================= embedding =======================
std::vector<OpSample> embedding_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor w, Tensor ind, int64_t pad) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {w, ind};
    s.fn = [pad](const TensorList& in) { return TensorList{embedding(in[0], in[1], pad)}; };
    s.reference = [](const TensorList& in) { return TensorList{ref_index(Ref::of(in[0]), {in[1]}).to(in[0].dtype())}; };
    v.push_back(s);
  };
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16})
    add("2-d indices " + dn(t), val({5, 3}, t, 1), rand_idx({2, 3}, 0, 4, 2), -1);
  add("padding_idx repeats noncontig", val({4, 3}, kFloat64, 3, true), idx({1, 2, 1, 0, 2}, {5}, kInt32), 2);
  v.back().check_grad = false;  // by definition the padding row gets no gradient (finite differences disagree)
  add("0-d index", val({4, 2}, kFloat64, 4), idx({3}, {}), -1);
  add("empty", val({4, 2}, kFloat32, 5), idx({}, {0}), -1);
  // The padding row gets exactly zero gradient.
  add("padding row has no gradient", val({3, 2}, kFloat64, 6), idx({0, 1, 1, 2}, {4}), 1);
  v.back().check_grad = false;  // finite differences see the padding row
  v.back().check = [w0 = v.back().inputs[0], ind = v.back().inputs[1]](const TensorList&) {
    Tensor w = w0.detach().clone().requires_grad_(true);
    Tensor out = embedding(w, ind, 1);
    out.backward(ones_like(out));
    auto gr = w.grad().to_vector<double>();
    std::vector<double> want = {1, 1, 0, 0, 1, 1};
    EXPECT_EQ(gr, want);
  };
  return v;
}
std::vector<ErrorSample> embedding_errors() {
  return {{"out of range",
           [] {
             embedding(val({3, 2}, kFloat32, 1), idx({3}, {1}));
           },
           "index 3 is out of bounds for dimension 0 with size 3"},
          {"negative index",
           [] {
             embedding(val({3, 2}, kFloat32, 1), idx({0, -1}, {2}));
           },
           "embedding: index -1 is out of bounds for dimension 0 with size 3"},
          {"weight not 2-d", [] { embedding(val({3}, kFloat32, 1), idx({0}, {1})); }, "2-D"},
          {"float indices",
           [] {
             embedding(val({3, 2}, kFloat32, 1), val({1}, kFloat32, 1));
           },
           "int64 or int32"}};
}
KILN_OP_SAMPLES(embedding, embedding_samples, embedding_errors);

// ---- take, masked_scatter ----
// x read row-major at each index (negative from the end), in index's shape.
TensorList take_ref(const TensorList& in) {
  Ref x = Ref::of(in[0]), i = Ref::of(in[1]);
  Ref out(i.shape);
  for (int64_t k = 0; k < out.numel(); ++k) {
    auto j = static_cast<int64_t>(i.v[k]);
    out.v[k] = x.v[j < 0 ? j + x.numel() : j];
  }
  return {out.to(in[0].dtype())};
}
std::vector<OpSample> take_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor index) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, index};
    s.fn = [](const TensorList& in) { return TensorList{kiln::take(in[0], in[1])}; };
    s.reference = take_ref;
    v.push_back(s);
  };
  for (DType t : {kFloat32, kFloat64, kInt64, kBool})
    add("[3,4] at [2,3] " + dn(t), val({3, 4}, t, 1), rand_idx({2, 3}, 0, 11, 2));
  add("negative indices, method", val({2, 3}, kFloat64, 3), idx({-1, -6, 0, 5}, {4}));
  add("noncontig input and index", val({4, 3}, kFloat32, 4, true), rand_idx({3, 2}, -12, 11, 5, true));
  add("0-d input", val({}, kFloat64, 6), idx({0, -1, 0}, {3}));
  add("0-d index", val({3, 4}, kFloat32, 7), idx({7}, {}));
  add("empty index", val({3, 4}, kFloat32, 8), idx({}, {0, 2}));
  add("empty input and index", val({0, 3}, kFloat32, 9), idx({}, {0}));
  v[4].fn = [](const TensorList& in) { return TensorList{in[0].take(in[1])}; };
  return v;
}
std::vector<ErrorSample> take_errors() {
  return {{"int32 index", [] { kiln::take(val({2, 3}, kFloat32, 1), idx({0}, {1}, kInt32)); },
           "take: Expected a long tensor for index, but got int32"},
          {"index past the end", [] { kiln::take(val({2, 3}, kFloat32, 1), idx({0, 6}, {2})); },
           "take: out of range: tried to access index 6 on a tensor of 6 elements"},
          {"index before the start", [] { kiln::take(val({2, 3}, kFloat32, 1), idx({-7}, {1})); },
           "take: out of range: tried to access index -7 on a tensor of 6 elements"},
          {"from an empty tensor", [] { kiln::take(val({0}, kFloat32, 1), idx({0}, {1})); },
           "take: tried to take from an empty tensor [0] with a non-empty index [1]"}};
}

// x broadcast with mask; the k-th true position (row-major) takes source's k-th element.
TensorList masked_scatter_ref(const TensorList& in) {
  Ref x = Ref::of(in[0]), m = Ref::of(in[1]), src = Ref::of(in[2]);
  Shape shape = ref_broadcast(x.shape, m.shape);
  Ref out(shape);
  int64_t k = 0;
  for (int64_t f = 0; f < out.numel(); ++f) {
    Shape i = unravel(f, shape);
    out.v[f] = m.v[broadcast_index(i, m.shape)] != 0 ? src.v[k++] : x.v[broadcast_index(i, x.shape)];
  }
  return {out.to(in[0].dtype())};
}
std::vector<OpSample> masked_scatter_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor mask, Tensor source) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, mask, source};
    s.fn = [](const TensorList& in) { return TensorList{kiln::masked_scatter(in[0], in[1], in[2])}; };
    s.reference = masked_scatter_ref;
    v.push_back(s);
  };
  for (DType t : {kFloat32, kFloat64, kInt64, kFloat16})
    add("[3,4] " + dn(t), val({3, 4}, t, 1), val({3, 4}, kBool, 2), val({12}, t, 3));
  add("mask broadcast [4] over [3,4], larger source", val({3, 4}, kFloat64, 4), vals({1, 0, 1, 1}, kBool, {4}),
      val({4, 5}, kFloat64, 5));
  add("self broadcast [4] by mask [2,4]", val({4}, kFloat64, 6), val({2, 4}, kBool, 7), val({8}, kFloat64, 8));
  add("noncontig", val({4, 3}, kFloat32, 9, true), val({4, 3}, kBool, 10, true), val({3, 4}, kFloat32, 11, true));
  add("all false, empty source", val({2, 3}, kFloat32, 12), vals({0, 0, 0, 0, 0, 0}, kBool, {2, 3}), val({0}, kFloat32, 13));
  add("0-d self, [1] mask", val({}, kFloat64, 14), vals({1}, kBool), val({2}, kFloat64, 15));
  add("empty", val({0, 3}, kFloat32, 16), val({0, 3}, kBool, 17), val({2}, kFloat32, 18));
  OpSample in_place;
  in_place.name = "masked_scatter_ and method";
  in_place.inputs = {val({3, 4}, kFloat32, 19), val({4}, kBool, 20), val({12}, kFloat32, 21)};
  in_place.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    y.masked_scatter_(in[1], in[2]);
    return TensorList{y, in[0].masked_scatter(in[1], in[2])};
  };
  in_place.reference = [](const TensorList& in) {
    Tensor r = masked_scatter_ref(in)[0];
    return TensorList{r, r};
  };
  in_place.check_grad = false;
  v.push_back(in_place);
  return v;
}
std::vector<ErrorSample> masked_scatter_errors() {
  return {{"uint8 mask", [] { kiln::masked_scatter(val({3}, kFloat32, 1), val({3}, kUInt8, 2), val({3}, kFloat32, 3)); },
           "masked_scatter: expected a bool mask, got uint8"},
          {"source dtype", [] { kiln::masked_scatter(val({3}, kFloat32, 1), val({3}, kBool, 2), val({3}, kFloat64, 3)); },
           "masked_scatter: expected self and source to have same dtypes but got float32 and float64"},
          {"shapes", [] { kiln::masked_scatter(val({3}, kFloat32, 1), val({4}, kBool, 2), val({4}, kFloat32, 3)); },
           "masked_scatter"},
          {"source too small", [] { kiln::masked_scatter(val({3}, kFloat32, 1), vals({1, 1, 1}, kBool, {3}), val({2}, kFloat32, 3)); },
           "masked_scatter: expected source to have at least as many elements as ones in mask, got source [2] with 2 "
           "elements and 3 ones in mask [3]"}};
}
KILN_OP_SAMPLES(take, take_samples, take_errors);
KILN_OP_SAMPLES(masked_scatter, masked_scatter_samples, masked_scatter_errors);

}  // namespace
}  // namespace kiln::test
