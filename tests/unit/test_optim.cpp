// Optimizers against fp64 references written from torch's documented algorithms, foreach vs
// per-tensor bit-identity, parameter groups, state_dict round trips, and gradient clipping.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "dispatch/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/optim.h"

using namespace kiln;
namespace o = kiln::optim;

namespace {

using kiln::testing::expect_error;

using OptPtr = std::unique_ptr<o::Optimizer>;
using MakeOpt = std::function<OptPtr(std::vector<Tensor>, bool foreach)>;

// ---- fp64 references: one element at a time (every rule here is elementwise) ----
struct Elem {
  double a = 0, b = 0, c = 0;  // the rule's state (momentum buffer, moments, sums)
  bool started = false;
};
using Rule = std::function<double(double p, double g, Elem& s, int t)>;

Rule sgd_rule(o::SGDOptions x) {
  return [x](double p, double g, Elem& s, int) {
    if (x.maximize) g = -g;
    g += x.weight_decay * p;
    if (x.momentum != 0) {
      s.a = s.started ? x.momentum * s.a + (1 - x.dampening) * g : g;
      s.started = true;
      g = x.nesterov ? g + x.momentum * s.a : s.a;
    }
    return p - x.lr * g;
  };
}

// Adam as documented: m/(1-b1^t) over sqrt(v/(1-b2^t)) + eps; amsgrad keeps max(v).
Rule adam_rule(o::AdamOptions x) {
  return [x](double p, double g, Elem& s, int t) {
    if (x.maximize) g = -g;
    if (x.decoupled_weight_decay)
      p *= 1 - x.lr * x.weight_decay;
    else
      g += x.weight_decay * p;
    s.a = x.beta1 * s.a + (1 - x.beta1) * g;
    s.b = x.beta2 * s.b + (1 - x.beta2) * g * g;
    s.c = std::max(s.c, s.b);
    const double v = x.amsgrad ? s.c : s.b;
    const double m_hat = s.a / (1 - std::pow(x.beta1, t)), v_hat = v / (1 - std::pow(x.beta2, t));
    return p - x.lr * m_hat / (std::sqrt(v_hat) + x.eps);
  };
}
Rule adamw_rule(o::AdamWOptions x) {
  return adam_rule({.lr = x.lr,
                    .beta1 = x.beta1,
                    .beta2 = x.beta2,
                    .eps = x.eps,
                    .weight_decay = x.weight_decay,
                    .amsgrad = x.amsgrad,
                    .maximize = x.maximize,
                    .decoupled_weight_decay = true});
}

Rule rmsprop_rule(o::RMSpropOptions x) {
  return [x](double p, double g, Elem& s, int) {
    if (x.maximize) g = -g;
    g += x.weight_decay * p;
    s.a = x.alpha * s.a + (1 - x.alpha) * g * g;
    double v = s.a;
    if (x.centered) {
      s.b = x.alpha * s.b + (1 - x.alpha) * g;
      v -= s.b * s.b;
    }
    const double d = std::sqrt(v) + x.eps;
    if (x.momentum > 0) {
      s.c = x.momentum * s.c + g / d;
      return p - x.lr * s.c;
    }
    return p - x.lr * g / d;
  };
}

Rule adagrad_rule(o::AdagradOptions x) {
  return [x](double p, double g, Elem& s, int t) {
    if (!s.started) s.a = x.initial_accumulator_value;
    s.started = true;
    if (x.maximize) g = -g;
    g += x.weight_decay * p;
    const double clr = x.lr / (1 + (t - 1) * x.lr_decay);
    s.a += g * g;
    return p - clr * g / (std::sqrt(s.a) + x.eps);
  };
}

// Deterministic gradients that change sign and size from step to step.
double grad_value(size_t param, size_t i, int t) {
  return 1.7 * std::sin(1.3 * static_cast<double>(i) + 0.9 * t + 2.1 * static_cast<double>(param)) + 0.05 * t;
}

const std::vector<std::vector<int64_t>> kShapes = {{2, 3}, {4}};

std::vector<Tensor> make_params(DType dtype) {
  std::vector<Tensor> params;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    int64_t n = 1;
    for (int64_t s : kShapes[k]) n *= s;
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(0.8 * std::cos(0.7 * static_cast<double>(i) + static_cast<double>(k)));
    params.push_back(kiln::tensor<double>(v, kShapes[k], TensorOptions(dtype)).requires_grad_());
  }
  return params;
}

void set_grads(const std::vector<Tensor>& params, int t) {
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<double> g;
    for (int64_t i = 0; i < params[k].numel(); ++i) g.push_back(grad_value(k, static_cast<size_t>(i), t));
    Tensor p = params[k];
    p.set_grad(kiln::tensor<double>(g, params[k].sizes(), TensorOptions(params[k].dtype())));
  }
}

// Three float64 steps of the optimizer against the reference rule, both code paths.
void expect_reference(const MakeOpt& make, const Rule& rule, const std::string& what, int steps = 3) {
  for (bool foreach : {true, false}) {
    SCOPED_TRACE(what + (foreach ? " (foreach)" : " (per tensor)"));
    std::vector<Tensor> params = make_params(kFloat64);
    std::vector<std::vector<double>> ref;
    std::vector<std::vector<Elem>> st;
    for (const Tensor& p : params) {
      ref.push_back(p.to_vector<double>());
      st.emplace_back(p.numel());
    }
    OptPtr opt = make(params, foreach);
    for (int t = 1; t <= steps; ++t) {
      set_grads(params, t);
      opt->step();
      for (size_t k = 0; k < params.size(); ++k) {
        auto got = params[k].to_vector<double>();
        for (size_t i = 0; i < got.size(); ++i) {
          ref[k][i] = rule(ref[k][i], grad_value(k, i, t), st[k][i], t);
          EXPECT_NEAR(got[i], ref[k][i], 1e-12 * std::max(1.0, std::abs(ref[k][i])))
              << "step " << t << " param " << k << " element " << i;
        }
      }
    }
  }
}

template <class Opt, class Options>
MakeOpt maker(Options x) {
  return [x](std::vector<Tensor> params, bool foreach) mutable {
    x.foreach = foreach;
    return OptPtr(new Opt(std::move(params), x));
  };
}

}  // namespace

// ---- each optimizer against its hand-computed steps ----
TEST(Optim, SgdMatchesReference) {
  const std::vector<o::SGDOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true},
      {.lr = 0.1, .momentum = 0.5, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    expect_reference(maker<o::SGD>(cases[c]), sgd_rule(cases[c]), "SGD case " + std::to_string(c));
}

TEST(Optim, AdamMatchesReference) {
  const std::vector<o::AdamOptions> cases = {
      {.lr = 0.01},
      {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1},
      {.lr = 0.01, .amsgrad = true},
      {.lr = 0.01, .weight_decay = 0.05, .amsgrad = true, .maximize = true},
      {.lr = 0.01, .weight_decay = 0.2, .decoupled_weight_decay = true},
      // The step count as a tensor on the parameter's device, never read on the host.
      {.lr = 0.01, .capturable = true},
      {.lr = 0.02, .weight_decay = 0.1, .amsgrad = true, .maximize = true, .capturable = true},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    expect_reference(maker<o::Adam>(cases[c]), adam_rule(cases[c]), "Adam case " + std::to_string(c), 4);
}

TEST(Optim, AdamWMatchesReference) {
  const std::vector<o::AdamWOptions> cases = {
      {},  // weight_decay 1e-2 by default
      {.lr = 0.05, .beta1 = 0.5, .weight_decay = 0.3, .amsgrad = true},
      {.lr = 0.01, .weight_decay = 0.1, .maximize = true},
      {.lr = 0.01, .weight_decay = 0.1, .capturable = true},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    expect_reference(maker<o::AdamW>(cases[c]), adamw_rule(cases[c]), "AdamW case " + std::to_string(c), 4);
  EXPECT_EQ(o::AdamW(make_params(kFloat32)).defaults().at("weight_decay"), 1e-2);
}

TEST(Optim, RmspropMatchesReference) {
  const std::vector<o::RMSpropOptions> cases = {
      {},
      {.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05},
      {.lr = 0.01, .momentum = 0.9},
      {.lr = 0.01, .centered = true},
      {.lr = 0.005, .alpha = 0.95, .momentum = 0.5, .centered = true, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    expect_reference(maker<o::RMSprop>(cases[c]), rmsprop_rule(cases[c]), "RMSprop case " + std::to_string(c));
}

TEST(Optim, AdagradMatchesReference) {
  const std::vector<o::AdagradOptions> cases = {
      {},
      {.lr = 0.1, .lr_decay = 0.5},
      {.lr = 0.05, .weight_decay = 0.1, .initial_accumulator_value = 0.3, .eps = 1e-6},
      {.lr = 0.05, .lr_decay = 0.1, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    expect_reference(maker<o::Adagrad>(cases[c]), adagrad_rule(cases[c]), "Adagrad case " + std::to_string(c));
}

// ---- foreach and per-tensor give the same bits ----
namespace {
std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

// Float32, float64 and bfloat16 parameters in two groups (of sizes up to 3000),
// a strided gradient, and a parameter without a gradient; five steps.
void expect_foreach_identical(const MakeOpt& make, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<std::vector<Tensor>> runs;
  std::vector<OptPtr> opts;
  for (bool foreach : {true, false}) {
    manual_seed(7);
    std::vector<Tensor> params = {randn({3, 5}).requires_grad_(), randn({3000}).requires_grad_(),
                                  randn({7}, TensorOptions(kFloat64)).requires_grad_(),
                                  randn({6}, TensorOptions(kBFloat16)).requires_grad_(), randn({2}).requires_grad_()};
    OptPtr opt = make({params[0], params[1], params[2]}, foreach);
    o::ParamGroup g({params[3], params[4]});
    g.options["lr"] = opt->defaults().at("lr") * 0.5;
    opt->add_param_group(g);
    for (int t = 0; t < 5; ++t) {
      Generator gen(100 + static_cast<uint64_t>(t));
      for (size_t k = 0; k + 1 < params.size(); ++k) {
        Tensor grad = randn(params[k].sizes(), TensorOptions(params[k].dtype()), &gen);
        if (k == 0) grad = randn({5, 3}, {}, &gen).t();  // strided
        params[k].set_grad(grad);
      }
      opt->step();
    }
    runs.push_back(params);
    opts.push_back(std::move(opt));
  }
  for (size_t k = 0; k < runs[0].size(); ++k)
    EXPECT_TRUE(bytes(runs[0][k]) == bytes(runs[1][k])) << "parameter " << k << " differs";
  auto sd0 = opts[0]->state_dict(), sd1 = opts[1]->state_dict();
  ASSERT_EQ(sd0.state.keys(), sd1.state.keys());
  for (const auto& [key, v] : sd0.state) EXPECT_TRUE(bytes(v) == bytes(sd1.state.at(key))) << key;
  EXPECT_EQ(opts[0]->find_state(runs[0][4]), nullptr) << "a parameter without gradient got state";
}
}  // namespace

TEST(Optim, ForeachBitIdenticalToPerTensor) {
  expect_foreach_identical(maker<o::SGD>(o::SGDOptions{.lr = 0.1}), "SGD plain");
  expect_foreach_identical(maker<o::SGD>(o::SGDOptions{
                               .lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .maximize = true}),
                           "SGD momentum");
  expect_foreach_identical(
      maker<o::SGD>(o::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}), "SGD nesterov");
  expect_foreach_identical(maker<o::Adam>(o::AdamOptions{.lr = 0.01, .weight_decay = 0.1}), "Adam");
  expect_foreach_identical(maker<o::Adam>(o::AdamOptions{.lr = 0.01, .amsgrad = true, .maximize = true}),
                           "Adam amsgrad maximize");
  expect_foreach_identical(maker<o::AdamW>(o::AdamWOptions{.lr = 0.01, .amsgrad = true}), "AdamW");
  expect_foreach_identical(maker<o::RMSprop>(o::RMSpropOptions{.weight_decay = 0.1}), "RMSprop");
  expect_foreach_identical(maker<o::RMSprop>(o::RMSpropOptions{.momentum = 0.9, .centered = true, .maximize = true}),
                           "RMSprop centered");
  expect_foreach_identical(
      maker<o::Adagrad>(o::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1, .maximize = true}),
      "Adagrad");
}

// ---- fused Adam (Note [Fused Adam]) against the foreach step ----
namespace {
struct AdamRun {
  std::vector<Tensor> params;
  o::OptimizerStateDict sd;
  uint32_t fused_calls = 0;
};

// Float32 parameters of several sizes (an empty one, a 0-d one, one with a strided gradient)
// and a float64 one, five steps; counts the _fused_adam_ calls.
template <class Opt, class Options>
AdamRun adam_run(Options x) {
  manual_seed(11);
  AdamRun r;
  r.params = {randn({3, 5}).requires_grad_(), randn({40000}).requires_grad_(), randn({0}).requires_grad_(),
              randn({}).requires_grad_(), randn({7}, TensorOptions(kFloat64)).requires_grad_()};
  Opt opt(r.params, x);
  std::vector<uint32_t> counts(kNumOps, 0);
  set_op_call_counts(&counts);
  for (int t = 0; t < 5; ++t) {
    Generator gen(200 + static_cast<uint64_t>(t));
    for (size_t k = 0; k < r.params.size(); ++k) {
      Tensor grad = randn(r.params[k].sizes(), TensorOptions(r.params[k].dtype()), &gen);
      if (k == 0) grad = randn({5, 3}, {}, &gen).t();  // strided
      r.params[k].set_grad(grad);
    }
    opt.step();
  }
  set_op_call_counts(nullptr);
  r.fused_calls = counts[static_cast<size_t>(OpId::_fused_adam_)];
  r.sd = opt.state_dict();
  return r;
}

// Largest |a - b| / (|b| + 1e-6) over all elements.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    m = std::max(m, std::abs(x[i] - y[i]) / (std::abs(y[i]) + 1e-6));
  return m;
}

template <class Opt, class Options>
void expect_fused_matches_foreach(Options x, const std::string& what) {
  SCOPED_TRACE(what);
  x.fused = false;
  const AdamRun ref = adam_run<Opt>(x);
  x.fused = true;
  const AdamRun got = adam_run<Opt>(x);
  EXPECT_EQ(ref.fused_calls, 0u);
  EXPECT_EQ(got.fused_calls, 5u);
  for (size_t k = 0; k < ref.params.size(); ++k)
    EXPECT_LE(max_rel_diff(got.params[k], ref.params[k]), 1e-6) << "parameter " << k;
  ASSERT_EQ(got.sd.state.keys(), ref.sd.state.keys());
  for (const auto& [key, v] : ref.sd.state) EXPECT_LE(max_rel_diff(got.sd.state.at(key), v), 1e-6) << key;
}
}  // namespace

TEST(Optim, FusedAdamMatchesForeach) {
  expect_fused_matches_foreach<o::Adam>(o::AdamOptions{.lr = 0.01}, "Adam");
  expect_fused_matches_foreach<o::Adam>(o::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, "Adam weight_decay");
  expect_fused_matches_foreach<o::Adam>(
      o::AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true, .maximize = true}, "Adam amsgrad maximize");
  expect_fused_matches_foreach<o::AdamW>(o::AdamWOptions{.lr = 0.01}, "AdamW");
  expect_fused_matches_foreach<o::AdamW>(o::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true},
                                         "AdamW amsgrad");
  expect_fused_matches_foreach<o::AdamW>(o::AdamWOptions{.lr = 0.02, .maximize = true}, "AdamW maximize");
}

// The CPU's vectorized float loop (Note [Fused Adam on the CPU]) rounds as the foreach step, bit
// for bit, with every option and both forms of the lerp (1 - beta1 below and above 1/2); 1003
// elements leave a tail after the vectors.
namespace {
template <class Opt, class Options>
void expect_fused_bitwise(Options x, const std::string& what) {
  SCOPED_TRACE(what);
  auto run = [&](bool fused) {
    manual_seed(5);
    std::vector<Tensor> ps{randn({1003}).requires_grad_(), randn({8, 9}).requires_grad_()};
    x.fused = fused;
    Opt opt(ps, x);
    for (int t = 0; t < 4; ++t) {
      Generator gen(300 + static_cast<uint64_t>(t));
      for (Tensor& p : ps) p.set_grad(randn(p.sizes(), {}, &gen));
      opt.step();
    }
    return std::make_pair(ps, opt.state_dict());
  };
  // Float values are exact as doubles, so equal vectors are equal bits (no NaN here).
  auto same = [](const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); };
  const auto [ref, ref_sd] = run(false);
  const auto [got, got_sd] = run(true);
  for (size_t k = 0; k < ref.size(); ++k) EXPECT_TRUE(same(got[k], ref[k])) << "parameter " << k;
  for (const auto& [key, v] : ref_sd.state) EXPECT_TRUE(same(got_sd.state.at(key), v)) << key;
}
}  // namespace

TEST(Optim, FusedAdamCpuFloatIsBitwiseForeach) {
  expect_fused_bitwise<o::Adam>(o::AdamOptions{.lr = 0.01}, "Adam");
  expect_fused_bitwise<o::Adam>(o::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, "Adam coupled weight decay");
  expect_fused_bitwise<o::AdamW>(o::AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, "AdamW");
  expect_fused_bitwise<o::AdamW>(o::AdamWOptions{.lr = 0.01, .beta1 = 0.3, .amsgrad = true, .maximize = true},
                                 "AdamW beta1 0.3 amsgrad maximize");
}

// fused unset: dense floating parameters, gradients and states on one device take the fused step,
// anything else (here a strided gradient) the foreach one; the option survives a state dict, and
// one saved without it (an older kiln's) takes the loading optimizer's (here unset).
TEST(Optim, FusedAdamDefaultAndStateDict) {
  EXPECT_EQ(adam_run<o::AdamW>(o::AdamWOptions{}).fused_calls, 0u);
  {
    Tensor a = randn({300}).requires_grad_(), b = randn({4, 5}, TensorOptions(kFloat64)).requires_grad_();
    o::AdamW dense({a, b}, o::AdamWOptions{});
    std::vector<uint32_t> counts(kNumOps, 0);
    set_op_call_counts(&counts);
    for (int t = 0; t < 2; ++t) {
      a.set_grad(randn({300}));
      b.set_grad(randn({4, 5}, TensorOptions(kFloat64)));
      dense.step();
    }
    set_op_call_counts(nullptr);
    EXPECT_EQ(counts[static_cast<size_t>(OpId::_fused_adam_)], 2u);
    EXPECT_EQ(counts[static_cast<size_t>(OpId::_foreach_lerp_)], 0u);
  }
  Tensor p = randn({4}).requires_grad_();
  o::AdamW opt({p}, o::AdamWOptions{.fused = true});
  EXPECT_EQ(opt.param_groups()[0].get("fused"), 1.0);
  o::OptimizerStateDict sd = opt.state_dict();
  o::AdamW other({p}, o::AdamWOptions{});
  EXPECT_EQ(other.param_groups()[0].get("fused"), -1.0);
  other.load_state_dict(sd);
  EXPECT_EQ(other.param_groups()[0].get("fused"), 1.0);
  sd.param_groups[0].erase("fused");
  o::AdamW older({p}, o::AdamWOptions{});
  older.load_state_dict(sd);
  EXPECT_EQ(older.param_groups()[0].get("fused"), -1.0);
}

// ---- parameter groups ----
TEST(Optim, ParamGroupsHaveTheirOwnOptions) {
  std::vector<Tensor> params = make_params(kFloat64);
  o::SGD opt({o::ParamGroup({params[0]}, {{"lr", 0.5}, {"momentum", 0.9}}), o::ParamGroup({params[1]})},
             {.lr = 0.1, .weight_decay = 0.01});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.5);
  EXPECT_EQ(opt.param_groups()[0].get("momentum"), 0.9);
  EXPECT_EQ(opt.param_groups()[0].get("weight_decay"), 0.01);  // from the defaults
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].get("momentum"), 0.0);
  auto p0 = params[0].to_vector<double>(), p1 = params[1].to_vector<double>();
  set_grads(params, 1);
  opt.step();
  auto r0 = sgd_rule({.lr = 0.5, .momentum = 0.9, .weight_decay = 0.01});
  auto r1 = sgd_rule({.lr = 0.1, .weight_decay = 0.01});
  auto g0 = params[0].to_vector<double>(), g1 = params[1].to_vector<double>();
  for (size_t i = 0; i < g0.size(); ++i) {
    Elem s;
    EXPECT_NEAR(g0[i], r0(p0[i], grad_value(0, i, 1), s, 1), 1e-14);
  }
  for (size_t i = 0; i < g1.size(); ++i) {
    Elem s;
    EXPECT_NEAR(g1[i], r1(p1[i], grad_value(1, i, 1), s, 1), 1e-14);
  }
  // A group's lr changed between steps is used by the next step.
  opt.param_groups()[1].set_lr(0.0);
  set_grads(params, 2);
  opt.step();
  EXPECT_EQ(params[1].to_vector<double>(), g1);

  expect_error([&] { opt.add_param_group(o::ParamGroup({params[0]})); }, "more than one parameter group");
  expect_error([&] { o::SGD({params[0], params[0]}); }, "appears twice");
  expect_error([] { o::SGD(std::vector<Tensor>{}); }, "empty parameter list");
  Tensor leaf = ones({2}).requires_grad_();
  expect_error([&] { o::Adam({leaf * 2}); }, "non-leaf");
  expect_error([] { o::Adam({ones({2}, TensorOptions(kInt64))}); }, "floating-point");
  expect_error([&] { o::SGD({leaf}, {.lr = -1}); }, "invalid learning rate");
  expect_error([&] { o::SGD({leaf}, {.lr = 0.1, .dampening = 0.5, .nesterov = true}); }, "Nesterov momentum");
  expect_error([&] { o::Adam({leaf}, {.beta2 = 1.0}); }, "invalid beta parameter at index 1");
  expect_error([&] { o::RMSprop({leaf}, {.alpha = -0.1}); }, "invalid alpha");
  expect_error([&] { o::Adagrad({leaf}, {.lr_decay = -1}); }, "invalid lr_decay");
}

TEST(Optim, SkipsParametersWithoutGradientAndZeroGrad) {
  Tensor a = ones({3}).requires_grad_(), b = ones({2}).requires_grad_();
  o::Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(full({3}, 0.5));
  const uint32_t va = a._version(), vb = b._version();
  opt.step();
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(2, 1.0f));
  EXPECT_EQ(opt.find_state(b), nullptr);
  ASSERT_NE(opt.find_state(a), nullptr);
  EXPECT_EQ(opt.find_state(a)->keys(), (std::vector<std::string>{"step", "exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(opt.find_state(a)->at("step").dtype(), kFloat32);
  EXPECT_EQ(opt.find_state(a)->at("step").dim(), 0);
  EXPECT_GT(a._version(), va);  // updated in place
  EXPECT_EQ(b._version(), vb);
  EXPECT_FALSE(a.grad_fn()) << "the step must not record autograd";

  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(3, 0.0f));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Optim, ClosureStepAndDesignatedOptions) {
  manual_seed(3);
  Tensor w = randn({4}).requires_grad_();
  Tensor target = tensor<float>({1, -2, 3, 0.5f});
  o::AdamW opt({w}, {.lr = 0.1, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    Tensor loss = opt.step([&] {
      opt.zero_grad();
      Tensor l = ((w - target) * (w - target)).sum();
      l.backward();
      return l;
    });
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.05 * first);
}

// ---- state_dict ----
namespace {
std::vector<MakeOpt> all_optimizers() {
  return {maker<o::SGD>(o::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}),
          maker<o::Adam>(o::AdamOptions{.lr = 0.01, .amsgrad = true}), maker<o::AdamW>(o::AdamWOptions{.lr = 0.01}),
          maker<o::RMSprop>(o::RMSpropOptions{.momentum = 0.5, .centered = true}),
          maker<o::Adagrad>(o::AdagradOptions{.lr_decay = 0.1, .initial_accumulator_value = 0.1})};
}
}  // namespace

TEST(Optim, StateDictRoundTripContinuesIdentically) {
  for (const MakeOpt& make : all_optimizers()) {
    std::vector<Tensor> pa = make_params(kFloat32);
    OptPtr a = make(pa, true);
    for (int t = 1; t <= 2; ++t) {
      set_grads(pa, t);
      a->step();
    }
    SCOPED_TRACE(a->name());
    o::OptimizerStateDict sd = a->state_dict();
    EXPECT_TRUE(sd.state.contains("0.step") || a->name() == "SGD");
    ASSERT_EQ(sd.param_groups.size(), 1u);
    EXPECT_EQ(sd.group_params[0], (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(sd.param_groups[0].at("lr"), a->param_groups()[0].lr());

    // A fresh optimizer (another lr, to see the saved one restored) over copies of the parameters.
    std::vector<Tensor> pb;
    for (const Tensor& p : pa) pb.push_back(p.detach().clone().requires_grad_());
    OptPtr b = make(pb, false);
    b->param_groups()[0].set_lr(123.0);
    b->load_state_dict(sd);
    EXPECT_EQ(b->param_groups()[0].lr(), a->param_groups()[0].lr());
    for (int t = 3; t <= 5; ++t) {
      set_grads(pa, t);
      set_grads(pb, t);
      a->step();
      b->step();
    }
    for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(bytes(pa[k]) == bytes(pb[k])) << "parameter " << k;
  }
}

TEST(Optim, LoadStateDictMismatchErrors) {
  std::vector<Tensor> params = make_params(kFloat32);
  o::Adam a(params, {.lr = 0.01});
  set_grads(params, 1);
  a.step();
  const o::OptimizerStateDict sd = a.state_dict();

  o::Adam two({o::ParamGroup({params[0]}), o::ParamGroup({params[1]})});
  expect_error([&] { two.load_state_dict(sd); }, "has 1 parameter groups, but the optimizer has 2");
  o::Adam one({params[0]});
  expect_error([&] { one.load_state_dict(sd); }, "parameter group 0 has 2 parameters in the loaded state dict but 1");
  o::Adam swapped({params[1], params[0]});
  expect_error([&] { swapped.load_state_dict(sd); },
               "state '0.exp_avg' has shape [2, 3] but its parameter has shape [4]");
  auto bad = sd;
  bad.state.insert("7.exp_avg", zeros({4}));
  expect_error([&] { a.load_state_dict(bad); }, "names parameter 7, which no parameter group holds");
  bad = sd;
  bad.state.insert("exp_avg", zeros({4}));
  expect_error([&] { a.load_state_dict(bad); }, "is not of the form");
  bad = sd;
  bad.group_params.pop_back();
  expect_error([&] { a.load_state_dict(bad); }, "lists parameters for 0 groups");
  // A failed load changes nothing: the state is still the optimizer's own tensors.
  EXPECT_TRUE(a.find_state(params[0])->at("exp_avg").is_same(sd.state.at("0.exp_avg")));
  o::Adam fresh(make_params(kFloat32), {.lr = 0.01});
  EXPECT_NO_THROW(fresh.load_state_dict(sd));
}

// ---- gradient clipping ----
TEST(ClipGrad, NormTwoAndInfinity) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2, 2}).requires_grad_(), c = zeros({3}).requires_grad_();
  auto set = [&] {
    a.set_grad(tensor<float>({3, -4}));
    b.set_grad(tensor<float>({1, 2, -2, 0}, {2, 2}));
  };
  set();
  // Total 2-norm: sqrt(9 + 16 + 1 + 4 + 4) = sqrt(34); c has no gradient and is skipped.
  const double total = std::sqrt(34.0), coef = 2.0 / (total + 1e-6);
  Tensor n = nn::utils::clip_grad_norm_({a, b, c}, 2.0);
  EXPECT_NEAR(n.item<double>(), total, 1e-5);
  auto ga = a.grad().to_vector<float>(), gb = b.grad().to_vector<float>();
  EXPECT_NEAR(ga[0], 3 * coef, 1e-6);
  EXPECT_NEAR(ga[1], -4 * coef, 1e-6);
  EXPECT_NEAR(gb[2], -2 * coef, 1e-6);
  EXPECT_FALSE(c.grad().defined());

  set();
  n = nn::utils::clip_grad_norm_({a, b}, 10.0);  // under the limit: unchanged
  EXPECT_NEAR(n.item<double>(), total, 1e-5);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3, -4}));

  set();
  const double inf = std::numeric_limits<double>::infinity();
  n = nn::utils::clip_grad_norm_({a, b}, 1.0, inf);
  EXPECT_EQ(n.item<double>(), 4.0);
  EXPECT_NEAR(a.grad().to_vector<float>()[1], -4.0 / (4.0 + 1e-6), 1e-6);

  set();
  n = nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0);
  EXPECT_NEAR(n.item<double>(), 12.0, 1e-5);

  EXPECT_EQ(nn::utils::clip_grad_norm_({c}, 1.0).item<double>(), 0.0);
}

TEST(ClipGrad, NonfiniteNormAndValue) {
  Tensor a = zeros({3}).requires_grad_();
  const float inf = std::numeric_limits<float>::infinity();
  a.set_grad(tensor<float>({1, inf, 2}));
  expect_error([&] { nn::utils::clip_grad_norm_(a, 1.0, 2.0, /*error_if_nonfinite=*/true); }, "non-finite");
  EXPECT_EQ(a.grad().to_vector<float>()[0], 1.0f);  // unchanged by the failed call
  Tensor n = nn::utils::clip_grad_norm_(a, 1.0);
  EXPECT_TRUE(std::isinf(n.item<double>()));

  a.set_grad(tensor<float>({-3, 0.25f, 0.75f}));
  Tensor b = zeros({1}).requires_grad_();
  nn::utils::clip_grad_value_({a, b}, 0.5);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{-0.5f, 0.25f, 0.5f}));
  EXPECT_FALSE(b.grad().defined());
}
