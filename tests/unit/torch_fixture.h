// Reading the PyTorch fixtures that tests/fixtures/fixture_writer.py writes: tensors
// "<case>.state.<key>", "<case>.in<i>", "<case>.out[<k>]", metadata "<case>.keys".
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln::testing {

using Outs = std::vector<Tensor>;

// Relative tolerance of a float output: elementwise ops and short sums round as torch's do.
inline constexpr double kTorchTol = 1e-5;
// fp32 sums over long reductions (convolutions, fold, matmuls) add their products in another order
// than torch, so the error grows with the length: BENCHMARKS.md's fp32 forward tolerance.
inline constexpr double kTorchLongSumTol = 1e-4;

// The case's state_dict keys in PyTorch's order (safetensors keeps keys sorted); none for an
// empty state_dict.
inline std::vector<std::string> torch_fixture_keys(const safetensors::SafeTensorsFile& file, const std::string& name) {
  std::vector<std::string> keys;
  std::string list = file.metadata().at(name + ".keys");
  if (list.empty()) return keys;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    keys.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return keys;
}

// The case's state_dict, its keys without the "<case>.state." prefix.
inline StateDict torch_fixture_state(const StateDict& fixture, const std::string& name) {
  StateDict out;
  std::string prefix = name + ".state.";
  for (const auto& [k, t] : fixture)
    if (k.rfind(prefix, 0) == 0) out.insert(k.substr(prefix.size()), t);
  return out;
}

// kiln's answer against PyTorch's: same shape and dtype, equal values (NaN where NaN), floats
// within tol relative (|kiln - torch| <= tol (1 + |torch|)).
inline void expect_same_as_torch(const Tensor& got, const Tensor& want, const std::string& what,
                                 double tol = kTorchTol) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " shape";
  ASSERT_EQ(got.dtype(), want.dtype()) << what << " dtype";
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  bool fl = is_floating_point(want.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              (fl && std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
    EXPECT_TRUE(ok) << what << " element " << i << ": kiln " << g[i] << ", torch " << w[i];
  }
}

// Same shape; max |kiln - torch| <= tol (1 + max |torch|): a whole module's output, whose small
// entries carry the rounding of its large ones.
inline void expect_close_overall(const Tensor& got, const Tensor& want, const std::string& what,
                                 double tol = kTorchTol) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " shape";
  double err = (got.to(kFloat64) - want.to(kFloat64)).abs().max().item<double>();
  EXPECT_LE(err, tol * (1 + want.to(kFloat64).abs().max().item<double>())) << what;
}

// Compares kiln's output k (of all of `got`) with torch's `want`.
using Compare = std::function<void(const Outs& got, size_t k, const Tensor& want)>;

inline std::string output_name(size_t k) { return "output " + std::to_string(k); }
inline Compare same_as_torch(double tol = kTorchTol) {
  return
      [tol](const Outs& got, size_t k, const Tensor& want) { expect_same_as_torch(got[k], want, output_name(k), tol); };
}
inline Compare close_overall(double tol = kTorchTol) {
  return
      [tol](const Outs& got, size_t k, const Tensor& want) { expect_close_overall(got[k], want, output_name(k), tol); };
}

// The cases of one fixture file under tests/fixtures, loaded on first use.
class TorchCases {
 public:
  explicit TorchCases(const std::string& file) : path_(std::string(KILN_TEST_FIXTURES) + "/" + file) {}

  const StateDict& tensors() const {
    std::call_once(loaded_, [&] { tensors_ = std::make_unique<StateDict>(safetensors::load_file(path_)); });
    return *tensors_;
  }
  bool contains(const std::string& key) const { return tensors().contains(key); }
  const Tensor& in(const std::string& name, int i = 0) const { return tensors().at(name + ".in" + std::to_string(i)); }
  // Every "<case>.in<i>", in order.
  Outs inputs(const std::string& name) const {
    Outs xs;
    for (int i = 0; contains(name + ".in" + std::to_string(i)); ++i) xs.push_back(in(name, i));
    return xs;
  }
  const Tensor& out(const std::string& name, size_t k = 0) const { return tensors().at(out_key(name, k)); }
  std::vector<std::string> keys(const std::string& name) const {
    std::call_once(opened_, [&] { file_ = std::make_unique<safetensors::SafeTensorsFile>(path_); });
    return torch_fixture_keys(*file_, name);
  }
  StateDict state(const std::string& name) const { return torch_fixture_state(tensors(), name); }

  // Compares every output of f with torch's, and that torch gave no more.
  void check(const std::string& name, const std::function<Outs()>& f, const Compare& compare) const {
    SCOPED_TRACE(name);
    Outs got = f();
    for (size_t k = 0; k < got.size(); ++k) compare(got, k, out(name, k));
    EXPECT_FALSE(contains(out_key(name, got.size()))) << "torch gave more outputs";
  }
  void check(const std::string& name, const std::function<Outs()>& f, double tol = kTorchTol) const {
    check(name, f, same_as_torch(tol));
  }

  // Loads the case's state_dict into m strictly (PyTorch's keys in PyTorch's order), then checks
  // forward's outputs in eval mode without grad.
  void check_module(const std::string& name, nn::Module& m, const std::function<Outs()>& forward,
                    const Compare& compare = same_as_torch()) const {
    StateDict sd = state(name);
    ASSERT_FALSE(sd.empty()) << name << ": no state_dict";
    EXPECT_EQ(m.state_dict().keys(), keys(name)) << name << ": state_dict keys in PyTorch's order";
    m.load_state_dict(sd, /*strict=*/true);
    m.eval();
    NoGradGuard no_grad;
    check(name, forward, compare);
  }

 private:
  static std::string out_key(const std::string& name, size_t k) {
    return k == 0 ? name + ".out" : name + ".out" + std::to_string(k);
  }

  std::string path_;
  mutable std::once_flag loaded_, opened_;
  mutable std::unique_ptr<StateDict> tensors_;
  mutable std::unique_ptr<safetensors::SafeTensorsFile> file_;
};

// The gradients of sum(f(xs)^2) w.r.t. each of xs, as fixture_writer.py's grad().
inline Outs grads(const std::function<Tensor(const Outs&)>& f, Outs xs) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_(true);
  f(xs).square().sum().backward();
  Outs g;
  for (auto& x : xs) g.push_back(x.grad());
  return g;
}

// a's outputs, then b's.
inline Outs operator+(Outs a, const Outs& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace kiln::testing
