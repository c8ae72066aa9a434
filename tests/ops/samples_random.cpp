// Samples for random ops: values against the Philox stream contract computed
// here from core/philox.h (Note [Philox stream]), determinism given a seed,
// statistics of 1e5 samples, ranges, and bad inputs.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/philox.h"
#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kFloats = {kFloat16, kBFloat16, kFloat32, kFloat64};
std::string dname(DType t) { return std::string(dtype_name(t)); }

ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}
OpSample sample(std::string name, OpFn fn, OpFn ref = nullptr, std::function<void(const TensorList&)> check = nullptr) {
  OpSample s;
  s.name = std::move(name);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  s.check = std::move(check);
  s.compare_values = s.reference != nullptr;
  return s;
}

// The contract's uniform/normal for element i of a fresh generator (offset 0).
double contract_uniform(DType t, uint64_t seed, uint64_t off, uint64_t i) {
  switch (t) {
    case DType::Float64: return philox_uniform<double>(seed, off, i);
    case DType::Float16: return static_cast<float>(philox_uniform<Half>(seed, off, i));
    case DType::BFloat16: return static_cast<float>(philox_uniform<BFloat16>(seed, off, i));
    default: return philox_uniform<float>(seed, off, i);
  }
}
double contract_normal(DType t, uint64_t seed, uint64_t off, uint64_t i) {
  return t == DType::Float64 ? philox_normal<double>(seed, off, i) : philox_normal<float>(seed, off, i);
}
Tensor ref_stream(const Shape& s, DType t, const std::function<double(uint64_t)>& f) {
  Ref r(s);
  for (int64_t i = 0; i < r.numel(); ++i) r.v[i] = f(static_cast<uint64_t>(i));
  return r.to(t);
}

double mean_of(const Tensor& t) {
  auto v = t.to_vector<double>();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double std_of(const Tensor& t) {
  auto v = t.to_vector<double>();
  double m = mean_of(t), acc = 0;
  for (double x : v) acc += (x - m) * (x - m);
  return std::sqrt(acc / static_cast<double>(v.size() - 1));
}
void expect_equal(const Tensor& a, const Tensor& b) { EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()); }
void expect_differ(const Tensor& a, const Tensor& b) { EXPECT_NE(a.to_vector<double>(), b.to_vector<double>()); }

// ---- uniform / normal (through uniform_ / normal_) ----
std::vector<OpSample> samples_uniform() {
  std::vector<OpSample> out;
  for (DType t : kFloats)
    for (Shape s : {Shape{3, 5}, Shape{}, Shape{0}, Shape{7}}) {
      out.push_back(sample(dname(t) + " " + shape_str(s) + " contract", [s, t](const TensorList&) {
        Generator g(1234);
        Tensor x = kiln::empty(s, t);
        uniform_(x, -2.0, 3.0, &g);
        return TensorList{x};
      }, [s, t](const TensorList&) {
        return TensorList{ref_stream(s, t, [t](uint64_t i) { return -2.0 + 5.0 * contract_uniform(t, 1234, 0, i); })};
      }));
    }
  out.push_back(sample("range and stats (1e5)", [](const TensorList&) {
    Tensor x = kiln::empty({100000}, kFloat32);
    return TensorList{x.uniform_(2.0, 4.0)};
  }, nullptr, [](const TensorList& o) {
    auto v = o[0].to_vector<double>();
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x >= 2.0 && x < 4.0; }));
    EXPECT_NEAR(mean_of(o[0]), 3.0, 0.01);
    EXPECT_NEAR(std_of(o[0]), 2.0 / std::sqrt(12.0), 0.01);
  }));
  out.push_back(sample("noncontig target, version bump", [](const TensorList&) {
    Tensor base = zeros({4, 6}, kFloat64);
    Tensor v = base.slice(1, 0, std::nullopt, 2);
    uint32_t before = v._version();
    Generator g(7);
    uniform_(v, 0.0, 1.0, &g);
    EXPECT_GT(v._version(), before);
    return TensorList{base};
  }, [](const TensorList&) {
    Ref r({4, 6});
    for (int64_t i = 0; i < 12; ++i) r.at({i / 3, 2 * (i % 3)}) = philox_uniform<double>(7, 0, i);
    return TensorList{r.to(kFloat64)};
  }));
  return out;
}
std::vector<ErrorSample> errors_uniform() {
  return {err("from > to", [] { Tensor x = kiln::empty({2}); x.uniform_(1.0, 0.0); }, "from=1 > to=0"),
          err("int tensor", [] { Tensor x = kiln::empty({2}, kInt64); x.uniform_(); }, "floating point"),
          err("leaf requiring grad", [] { Tensor x = zeros({2}).requires_grad_(); x.uniform_(); }, "leaf")};
}

std::vector<OpSample> samples_normal() {
  std::vector<OpSample> out;
  for (DType t : kFloats)
    for (Shape s : {Shape{3, 5}, Shape{}, Shape{0}, Shape{7}}) {
      OpSample smp = sample(dname(t) + " " + shape_str(s) + " contract", [s, t](const TensorList&) {
        Generator g(99);
        Tensor x = kiln::empty(s, t);
        normal_(x, 1.0, 0.5, &g);
        return TensorList{x};
      }, [s, t](const TensorList&) {
        return TensorList{ref_stream(s, t, [t](uint64_t i) { return 1.0 + 0.5 * contract_normal(t, 99, 0, i); })};
      });
      smp.atol = 1e-5;
      out.push_back(smp);
    }
  out.push_back(sample("stats (1e5)", [](const TensorList&) {
    Tensor x = kiln::empty({100000}, kFloat64);
    return TensorList{x.normal_(3.0, 2.0)};
  }, nullptr, [](const TensorList& o) {
    EXPECT_NEAR(mean_of(o[0]), 3.0, 0.03);
    EXPECT_NEAR(std_of(o[0]), 2.0, 0.03);
  }));
  return out;
}
std::vector<ErrorSample> errors_normal() {
  return {err("negative std", [] { Tensor x = kiln::empty({2}); x.normal_(0.0, -1.0); }, "std >= 0.0"),
          err("int tensor", [] { Tensor x = kiln::empty({2}, kInt32); x.normal_(); }, "floating point")};
}

// ---- rand / randn / *_like ----
template <bool Normal>
std::vector<OpSample> samples_rand() {
  std::vector<OpSample> out;
  for (DType t : kFloats) {
    OpSample s = sample(dname(t) + " contract", [t](const TensorList&) {
      Generator g(42);
      Tensor a = Normal ? randn({4, 3}, t, &g) : rand({4, 3}, t, &g);
      Tensor b = Normal ? randn({5}, t, &g) : rand({5}, t, &g);  // continues at offset ceil(12 / per_block)
      return TensorList{a, b};
    }, [t](const TensorList&) {
      uint64_t next = t == kFloat64 ? 6 : 3;
      auto f = [t](uint64_t off) {
        return [t, off](uint64_t i) { return Normal ? contract_normal(t, 42, off, i) : contract_uniform(t, 42, off, i); };
      };
      return TensorList{ref_stream({4, 3}, t, f(0)), ref_stream({5}, t, f(next))};
    });
    s.atol = 1e-5;
    out.push_back(s);
  }
  out.push_back(sample("manual_seed determinism, offsets advance", [](const TensorList&) {
    manual_seed(2024);
    Tensor a = Normal ? randn({64}) : rand({64});
    uint64_t off = default_generator().offset();
    Tensor b = Normal ? randn({64}) : rand({64});
    manual_seed(2024);
    Tensor c = Normal ? randn({64}) : rand({64});
    EXPECT_EQ(off, 16u);
    EXPECT_EQ(default_generator().offset(), 16u);
    return TensorList{a, b, c};
  }, nullptr, [](const TensorList& o) {
    expect_equal(o[0], o[2]);
    expect_differ(o[0], o[1]);
    EXPECT_EQ(o[0].dtype(), kFloat32);
  }));
  out.push_back(sample("different seeds differ", [](const TensorList&) {
    Generator g1(1), g2(2);
    return TensorList{Normal ? randn({32}, {}, &g1) : rand({32}, {}, &g1), Normal ? randn({32}, {}, &g2) : rand({32}, {}, &g2)};
  }, nullptr, [](const TensorList& o) { expect_differ(o[0], o[1]); }));
  out.push_back(sample("stats (1e5)", [](const TensorList&) {
    return TensorList{Normal ? randn({100000}) : rand({100000})};
  }, nullptr, [](const TensorList& o) {
    EXPECT_NEAR(mean_of(o[0]), Normal ? 0.0 : 0.5, Normal ? 0.02 : 0.01);
    EXPECT_NEAR(std_of(o[0]), Normal ? 1.0 : std::sqrt(1.0 / 12.0), Normal ? 0.02 : 0.01);
    if (!Normal) {
      auto v = o[0].to_vector<double>();
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x >= 0.0 && x < 1.0; }));
    }
  }));
  out.push_back(sample("shapes: 0-d, empty", [](const TensorList&) {
    return TensorList{Normal ? randn({}) : rand({}), Normal ? randn({0, 3}, kFloat64) : rand({0, 3}, kFloat64)};
  }, [](const TensorList&) { return TensorList{Ref(Shape{}).to(kFloat32), Ref(Shape{0, 3}).to(kFloat64)}; }));
  out.back().compare_values = false;
  return out;
}
template <bool Normal>
std::vector<ErrorSample> errors_rand() {
  return {err("negative size", [] { Normal ? randn({-2}) : rand({-2}); }, "negative dimension"),
          err("int dtype", [] { Normal ? randn({2}, kInt64) : rand({2}, kInt64); }, "floating point")};
}

template <bool Normal>
std::vector<OpSample> samples_rand_like() {
  std::vector<OpSample> out;
  for (bool nc : {false, true}) {
    OpSample s = sample(std::string("float64") + (nc ? " noncontig" : ""), [](const TensorList& in) {
      manual_seed(5);
      Tensor a = Normal ? randn_like(in[0]) : rand_like(in[0]);
      manual_seed(5);
      Tensor b = Normal ? randn_like(in[0]) : rand_like(in[0]);
      return TensorList{a, b};
    }, [](const TensorList& in) {
      auto f = [](uint64_t i) { return Normal ? contract_normal(kFloat64, 5, 0, i) : contract_uniform(kFloat64, 5, 0, i); };
      Tensor r = ref_stream(in[0].sizes().vec(), kFloat64, f);
      return TensorList{r, r};
    });
    s.inputs = {make_input({3, 4}, kFloat64, 1, -1, 1, nc)};
    out.push_back(s);
  }
  OpSample o = sample("dtype override from int input", [](const TensorList& in) {
    return TensorList{Normal ? randn_like(in[0], kFloat32) : rand_like(in[0], kFloat32)};
  }, [](const TensorList&) { return TensorList{Ref({2, 2}).to(kFloat32)}; });
  o.compare_values = false;
  o.inputs = {make_input({2, 2}, kInt64, 2)};
  out.push_back(o);
  return out;
}
template <bool Normal>
std::vector<ErrorSample> errors_rand_like() {
  return {err("int input without dtype", [] {
    Tensor x = zeros({2}, kInt64);
    Normal ? randn_like(x) : rand_like(x);
  }, "floating point")};
}

// ---- randint / randperm / bernoulli ----
std::vector<OpSample> samples_randint() {
  std::vector<OpSample> out;
  for (DType t : {kInt64, kInt32, kInt16, kInt8, kUInt8, kFloat32, kFloat64}) {
    out.push_back(sample(dname(t) + " contract [-3, 9)", [t](const TensorList&) {
      Generator g(11);
      return TensorList{randint(-3 + (t == kUInt8 ? 3 : 0), 9, {4, 5}, t, &g)};
    }, [t](const TensorList&) {
      int64_t lo = t == kUInt8 ? 0 : -3;
      return TensorList{ref_stream({4, 5}, t, [lo](uint64_t i) {
        return static_cast<double>(lo + static_cast<int64_t>(philox_u32(11, 0, i) % static_cast<uint64_t>(9 - lo)));
      })};
    }));
  }
  out.push_back(sample("bool [0, 2)", [](const TensorList&) { return TensorList{randint(0, 2, {50}, kBool)}; },
                       [](const TensorList&) { return TensorList{Ref({50}).to(kBool)}; }));
  out.back().compare_values = false;
  out.push_back(sample("wide range uses 64-bit draws", [](const TensorList&) {
    Generator g(3);
    int64_t hi = int64_t(1) << 40;
    return TensorList{randint(-hi, hi, {6}, {}, &g)};
  }, [](const TensorList&) {
    int64_t hi = int64_t(1) << 40;
    return TensorList{ref_stream({6}, kInt64, [hi](uint64_t i) {
      return static_cast<double>(-hi + static_cast<int64_t>(philox_u64(3, 0, i) % static_cast<uint64_t>(2 * hi)));
    })};
  }));
  out.push_back(sample("range, coverage (1e5), default int64", [](const TensorList&) {
    return TensorList{randint(10, {100000}), randint(0, 0 + 1, {3})};
  }, nullptr, [](const TensorList& o) {
    EXPECT_EQ(o[0].dtype(), kInt64);
    auto v = o[0].to_vector<int64_t>();
    std::vector<int64_t> counts(10, 0);
    for (int64_t x : v) {
      ASSERT_TRUE(x >= 0 && x < 10) << x;
      counts[x]++;
    }
    for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 10000.0, 600.0);
    EXPECT_EQ(o[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  }));
  return out;
}
std::vector<ErrorSample> errors_randint() {
  return {err("low >= high", [] { randint(5, 5, {2}); }, "to be less than 'to'"),
          err("negative size", [] { randint(0, 5, {-1}); }, "negative dimension"),
          err("range too wide for dtype", [] { randint(0, 300, {2}, kUInt8); }, "does not fit dtype")};
}

std::vector<OpSample> samples_randperm() {
  std::vector<OpSample> out;
  for (int64_t n : {0, 1, 7, 1000})
    for (DType t : {kInt64, kInt32, kFloat32}) {
      out.push_back(sample("n=" + std::to_string(n) + " " + dname(t), [n, t](const TensorList&) {
        Generator g1(77), g2(77), g3(78);
        return TensorList{randperm(n, t, &g1), randperm(n, t, &g2), randperm(n, t, &g3)};
      }, nullptr, [n, t](const TensorList& o) {
        EXPECT_EQ(o[0].dtype(), t);
        EXPECT_EQ(o[0].sizes().vec(), (Shape{n}));
        auto v = o[0].to_vector<int64_t>();
        std::vector<int64_t> sorted = v;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> iota(static_cast<size_t>(n));
        std::iota(iota.begin(), iota.end(), 0);
        EXPECT_EQ(sorted, iota) << "not a permutation";
        expect_equal(o[0], o[1]);
        if (n >= 7) expect_differ(o[0], o[2]);
        if (n == 1000) {
          std::vector<int64_t> id = iota;
          EXPECT_NE(v, id);
        }
      }));
    }
  return out;
}
std::vector<ErrorSample> errors_randperm() {
  return {err("negative n", [] { randperm(-1); }, "non-negative"),
          err("too large for dtype", [] { randperm(300, kInt8); }, "too large"),
          err("bool dtype", [] { randperm(2, kBool); }, "bool")};
}

std::vector<OpSample> samples_bernoulli() {
  std::vector<OpSample> out;
  for (DType t : kFloats)
    for (bool nc : {false, true}) {
      OpSample s = sample(dname(t) + (nc ? " noncontig" : "") + " contract", [](const TensorList& in) {
        Generator g(8);
        return TensorList{bernoulli(in[0], &g)};
      }, [t](const TensorList& in) {
        auto p = in[0].to_vector<double>();
        return TensorList{ref_stream(in[0].sizes().vec(), t, [&p, t](uint64_t i) {
          return contract_uniform(t, 8, 0, i) < p[i] ? 1.0 : 0.0;
        })};
      });
      s.inputs = {make_input({4, 6}, t, 4, 0.0, 1.0, nc)};
      out.push_back(s);
    }
  OpSample d = sample("decomposition matches the kernel", [](const TensorList& in) {
    OpCall c{OpId::bernoulli, in, Attrs{int64_t(8), int64_t(0)}};
    Tensor viadecomp = op_info(OpId::bernoulli).decomp(c)[0];
    Generator g(8);
    return TensorList{viadecomp, bernoulli(in[0], &g)};
  }, nullptr, [](const TensorList& o) { expect_equal(o[0], o[1]); });
  d.inputs = {make_input({4, 6}, kFloat32, 5, 0.0, 1.0)};
  out.push_back(d);
  OpSample z = sample("0-d and empty", [](const TensorList& in) {
    return TensorList{bernoulli(in[0]), bernoulli(in[1])};
  }, [](const TensorList&) { return TensorList{Ref(Shape{}, 1).to(kFloat32), Ref(Shape{0, 3}).to(kFloat64)}; });
  z.inputs = {full({}, 1.0), zeros({0, 3}, kFloat64)};
  out.push_back(z);
  out.push_back(sample("mean (1e5) ≈ p", [](const TensorList&) {
    return TensorList{bernoulli(full({100000}, 0.3))};
  }, nullptr, [](const TensorList& o) { EXPECT_NEAR(mean_of(o[0]), 0.3, 0.01); }));
  return out;
}
std::vector<ErrorSample> errors_bernoulli() {
  return {err("int p", [] { bernoulli(zeros({2}, kInt64)); }, "floating point"),
          err("p out of range", [] { bernoulli(full({2}, 1.5)); }, "[0, 1]")};
}

}  // namespace

KILN_OP_SAMPLES(uniform, samples_uniform, errors_uniform);
KILN_OP_SAMPLES(normal, samples_normal, errors_normal);
KILN_OP_SAMPLES(rand, samples_rand<false>, errors_rand<false>);
KILN_OP_SAMPLES(randn, samples_rand<true>, errors_rand<true>);
KILN_OP_SAMPLES(rand_like, samples_rand_like<false>, errors_rand_like<false>);
KILN_OP_SAMPLES(randn_like, samples_rand_like<true>, errors_rand_like<true>);
KILN_OP_SAMPLES(randint, samples_randint, errors_randint);
KILN_OP_SAMPLES(randperm, samples_randperm, errors_randperm);
KILN_OP_SAMPLES(bernoulli, samples_bernoulli, errors_bernoulli);

}  // namespace kiln::test
