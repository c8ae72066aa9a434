// LR schedulers: curves against torch's closed forms, construction-time lrs, OneCycleLR phases
// and momentum, SequentialLR, ReduceLROnPlateau, and exact resumption from state_dict.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <cmath>
#include <numbers>

#include "kiln/kiln.h"
#include "kiln/optim.h"

using namespace kiln;
namespace o = kiln::optim;

namespace {

using kiln::testing::expect_error;

constexpr double kPi = std::numbers::pi;

// An SGD optimizer with two groups: lr 0.1 and 0.03.
struct TwoGroups {
  Tensor a = ones({2}).requires_grad_(), b = ones({3}).requires_grad_();
  o::SGD opt{{o::ParamGroup({a}), o::ParamGroup({b}, {{"lr", 0.03}})}, {.lr = 0.1, .momentum = 0.9}};
  std::vector<double> base() const { return {0.1, 0.03}; }
  std::vector<double> lrs() const { return {opt.param_groups()[0].lr(), opt.param_groups()[1].lr()}; }
};

// The lr of every group after construction (epoch 0) and after each of `steps` steps equals
// closed(base_lr, epoch), within a relative 1e-12 (the recursive forms round a little).
void expect_curve(TwoGroups& s, o::LRScheduler& sched, const std::function<double(double, int64_t)>& closed,
                  int64_t steps = 30) {
  for (int64_t e = 0; e <= steps; ++e) {
    if (e > 0) sched.step();
    ASSERT_EQ(sched.last_epoch(), e);
    for (size_t g = 0; g < 2; ++g) {
      const double want = closed(s.base()[g], e);
      EXPECT_NEAR(s.lrs()[g], want, 1e-12 * std::abs(want)) << "epoch " << e << " group " << g;
      EXPECT_EQ(sched.get_last_lr()[g], s.lrs()[g]);
    }
  }
}

}  // namespace

TEST(LRScheduler, StepMultiStepExponential) {
  {
    TwoGroups s;
    o::StepLR sched(s.opt, 3, 0.5);
    expect_curve(s, sched, [](double b, int64_t e) { return b * std::pow(0.5, static_cast<double>(e / 3)); });
    EXPECT_EQ(s.opt.param_groups()[1].get("initial_lr"), 0.03);
  }
  {
    TwoGroups s;
    o::MultiStepLR sched(s.opt, {20, 5, 12, 12}, 0.3);  // unsorted; 12 counts twice
    expect_curve(s, sched, [](double b, int64_t e) {
      const int n = (e >= 5) + 2 * (e >= 12) + (e >= 20);
      return b * std::pow(0.3, n);
    });
  }
  {
    TwoGroups s;
    o::ExponentialLR sched(s.opt, 0.9);
    expect_curve(s, sched, [](double b, int64_t e) { return b * std::pow(0.9, static_cast<double>(e)); });
  }
}

TEST(LRScheduler, CosineAnnealingRecursiveEqualsClosedForm) {
  TwoGroups s;
  const double eta = 0.001;
  o::CosineAnnealingLR sched(s.opt, 10, eta);
  // 30 steps: past T_max the lr rises again (period 2 * T_max), as torch's recursion does.
  expect_curve(s, sched, [eta](double b, int64_t e) {
    return eta + (b - eta) * (1 + std::cos(kPi * static_cast<double>(e) / 10)) / 2;
  });
  expect_error([&] { o::CosineAnnealingLR(s.opt, 0); }, "T_max must be positive");
}

TEST(LRScheduler, LinearWarmupAppliesStartFactorAtConstruction) {
  TwoGroups s;
  o::LinearLR sched(s.opt, 0.25, 1.0, 8);
  EXPECT_NEAR(s.lrs()[0], 0.025, 1e-15);  // start_factor applied when made
  EXPECT_EQ(s.opt.param_groups()[0].get("initial_lr"), 0.1);
  expect_curve(s, sched, [](double b, int64_t e) {
    return b * (0.25 + 0.75 * static_cast<double>(std::min<int64_t>(e, 8)) / 8);
  });
  expect_error([&] { o::LinearLR(s.opt, 0.0); }, "greater than 0");
  expect_error([&] { o::LinearLR(s.opt, 0.5, 1.5); }, "between 0 and 1");
}

TEST(LRScheduler, LambdaPerGroup) {
  TwoGroups s;
  o::LambdaLR sched(s.opt,
                    std::vector<o::LambdaLR::Lambda>{[](int64_t e) { return std::pow(0.95, static_cast<double>(e)); },
                                                     [](int64_t e) { return e < 10 ? 1.0 : 0.5; }});
  for (int64_t e = 0; e <= 30; ++e) {
    if (e > 0) sched.step();
    EXPECT_NEAR(s.lrs()[0], 0.1 * std::pow(0.95, static_cast<double>(e)), 1e-15);
    EXPECT_EQ(s.lrs()[1], e < 10 ? 0.03 : 0.015);
  }
  expect_error([&] { o::LambdaLR(s.opt, std::vector<o::LambdaLR::Lambda>{[](int64_t) { return 1.0; }}); },
               "expected 2 lr_lambdas");
}

namespace {
double cos_anneal(double start, double end, double pct) { return end + (start - end) / 2 * (std::cos(kPi * pct) + 1); }
double lin_anneal(double start, double end, double pct) { return start + (end - start) * pct; }
}  // namespace

TEST(LRScheduler, OneCycleTwoPhaseCosWithSgdMomentum) {
  TwoGroups s;
  const int64_t total = 30;
  o::OneCycleLR sched(s.opt, std::vector<double>{1.0, 0.5}, {.total_steps = total});
  const double up_end = 0.3 * total - 1;  // 8
  for (int64_t e = 0; e <= total; ++e) {
    if (e > 0) sched.step();
    for (size_t g = 0; g < 2; ++g) {
      const double max_lr = g == 0 ? 1.0 : 0.5, initial = max_lr / 25, min_lr = initial / 1e4;
      const double x = static_cast<double>(e);
      double lr, mom;
      if (x <= up_end) {
        lr = cos_anneal(initial, max_lr, x / up_end);
        mom = cos_anneal(0.95, 0.85, x / up_end);
      } else {
        const double pct = (x - up_end) / (total - 1 - up_end);
        lr = cos_anneal(max_lr, min_lr, pct);
        mom = cos_anneal(0.85, 0.95, pct);
      }
      EXPECT_NEAR(s.lrs()[g], lr, 1e-14) << "step " << e;
      EXPECT_NEAR(s.opt.param_groups()[g].get("momentum"), mom, 1e-14) << "step " << e;
    }
  }
  // Step 30 (= total_steps) ran the last phase with pct > 1, as torch; one more is an error.
  expect_error([&] { sched.step(); }, "tried to step 31 times");
}

TEST(LRScheduler, OneCycleThreePhaseLinearWithAdamBeta1) {
  Tensor w = ones({2}).requires_grad_();
  o::Adam opt({w}, {.lr = 1e-3});
  const int64_t total = 20;
  o::OneCycleLR sched(
      opt, 0.2,
      {.epochs = 4, .steps_per_epoch = 5, .pct_start = 0.25, .anneal_strategy = "linear", .three_phase = true});
  const double initial = 0.2 / 25, min_lr = initial / 1e4;
  const double e1 = 0.25 * total - 1, e2 = 2 * 0.25 * total - 2, e3 = total - 1;  // 4, 8, 19
  for (int64_t e = 0; e <= total; ++e) {
    if (e > 0) sched.step();
    const double x = static_cast<double>(e);
    double lr, b1;
    if (x <= e1) {
      lr = lin_anneal(initial, 0.2, x / e1);
      b1 = lin_anneal(0.95, 0.85, x / e1);
    } else if (x <= e2) {
      lr = lin_anneal(0.2, initial, (x - e1) / (e2 - e1));
      b1 = lin_anneal(0.85, 0.95, (x - e1) / (e2 - e1));
    } else {
      lr = lin_anneal(initial, min_lr, (x - e2) / (e3 - e2));
      b1 = 0.95;
    }
    EXPECT_NEAR(opt.param_groups()[0].lr(), lr, 1e-14) << "step " << e;
    EXPECT_NEAR(opt.param_groups()[0].get("beta1"), b1, 1e-14) << "step " << e;
  }
  EXPECT_EQ(opt.param_groups()[0].get("max_lr"), 0.2);
  EXPECT_EQ(opt.param_groups()[0].get("min_lr"), min_lr);

  Tensor v = ones({2}).requires_grad_();
  o::Adagrad ada({v});
  expect_error([&] { o::OneCycleLR(ada, 0.1, {.total_steps = 10}); }, "must support momentum or beta1");
  expect_error([&] { o::OneCycleLR(opt, 0.1, {}); }, "either total_steps OR (epochs AND steps_per_epoch)");
  expect_error([&] { o::OneCycleLR(opt, 0.1, {.total_steps = 10, .anneal_strategy = "exp"}); }, "'cos' or 'linear'");
}

TEST(LRScheduler, SequentialWarmupThenDecay) {
  {
    TwoGroups s;
    auto warm = std::make_shared<o::LinearLR>(s.opt, 0.1, 1.0, 5);
    auto decay = std::make_shared<o::ExponentialLR>(s.opt, 0.9);
    o::SequentialLR sched(s.opt, {warm, decay}, {5});
    expect_curve(s, sched, [](double b, int64_t e) {
      return e < 5 ? b * (0.1 + 0.9 * static_cast<double>(e) / 5) : b * std::pow(0.9, static_cast<double>(e - 5));
    });
  }
  {
    TwoGroups s;
    auto warm = std::make_shared<o::LinearLR>(s.opt, 0.5, 1.0, 4);
    auto cosine = std::make_shared<o::CosineAnnealingLR>(s.opt, 20, 0.0);
    o::SequentialLR sched(s.opt, {warm, cosine}, {6});
    expect_curve(s, sched, [](double b, int64_t e) {
      if (e < 6) return b * (0.5 + 0.5 * static_cast<double>(std::min<int64_t>(e, 4)) / 4);
      return b * (1 + std::cos(kPi * static_cast<double>(e - 6) / 20)) / 2;
    });
  }
  TwoGroups s;
  auto a = std::make_shared<o::StepLR>(s.opt, 2);
  expect_error([&] { o::SequentialLR(s.opt, {a}, {3}); }, "one more than the number of milestones");
  TwoGroups other;
  auto b = std::make_shared<o::StepLR>(other.opt, 2);
  expect_error([&] { o::SequentialLR(s.opt, {a, b}, {3}); }, "same optimizer");
}

TEST(LRScheduler, ReduceLROnPlateauMinRel) {
  TwoGroups s;
  o::ReduceLROnPlateau sched(s.opt,
                             {.factor = 0.5, .patience = 2, .threshold = 0.1, .cooldown = 1, .min_lr = {0.02, 0.001}});
  // Better means below best * 0.9. Hand-traced: 9.5, 9.2, 9.1 are not better than 10 -> after the
  // third bad epoch (more than patience 2) the lr halves and one cooldown epoch follows, and so on
  // down to min_lr 0.02, where a reduction smaller than eps is skipped.
  const std::vector<double> metrics = {10, 9.5, 9.2, 9.1, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
  const std::vector<double> want0 = {.1, .1, .1, .05, .05, .05, .05, .025, .025, .025, .025, .02, .02, .02, .02, .02};
  for (size_t i = 0; i < metrics.size(); ++i) {
    sched.step(metrics[i]);
    EXPECT_NEAR(s.lrs()[0], want0[i], 1e-15) << "epoch " << i + 1;
    EXPECT_EQ(sched.get_last_lr()[0], s.lrs()[0]);
  }
  EXPECT_NEAR(s.lrs()[1], 0.03 / 16, 1e-15);  // the other group has min_lr 0.001: four halvings
  EXPECT_EQ(sched.best(), 8.0);
  EXPECT_EQ(sched.last_epoch(), 16);
  expect_error([&] { o::ReduceLROnPlateau(s.opt, {.factor = 1.0}); }, "factor should be < 1.0");
  expect_error([&] { o::ReduceLROnPlateau(s.opt, {.mode = "mean"}); }, "unknown");
  expect_error([&] { o::ReduceLROnPlateau(s.opt, {.min_lr = {1, 2, 3}}); }, "expected 2 min_lrs");
}

TEST(LRScheduler, ReduceLROnPlateauMaxAbs) {
  TwoGroups s;
  o::ReduceLROnPlateau sched(s.opt,
                             {.mode = "max", .factor = 0.1, .patience = 0, .threshold = 0.5, .threshold_mode = "abs"});
  sched.step(1.0);  // better than -inf
  sched.step(1.4);  // not above 1.0 + 0.5: bad epoch 1 > patience 0 -> reduce
  EXPECT_NEAR(s.lrs()[0], 0.01, 1e-15);
  sched.step(1.6);  // better than 1.0 + 0.5
  EXPECT_NEAR(s.lrs()[0], 0.01, 1e-15);
  EXPECT_EQ(sched.best(), 1.6);
  EXPECT_EQ(sched.num_bad_epochs(), 0);
}

// ---- exact resumption ----
namespace {
using MakeSched = std::function<std::shared_ptr<o::LRScheduler>(o::Optimizer&)>;

void expect_resumes(const MakeSched& make, const std::string& what) {
  SCOPED_TRACE(what);
  TwoGroups a;
  auto sa = make(a.opt);
  for (int i = 0; i < 7; ++i) sa->step();
  const o::OptimizerStateDict osd = a.opt.state_dict();
  const o::SchedulerState ssd = sa->state_dict();
  TwoGroups b;
  auto sb = make(b.opt);  // a fresh run, then restored (optimizer first, as a checkpoint does)
  b.opt.load_state_dict(osd);
  sb->load_state_dict(ssd);
  EXPECT_EQ(sb->last_epoch(), sa->last_epoch());
  EXPECT_EQ(sb->get_last_lr(), sa->get_last_lr());
  for (int i = 0; i < 12; ++i) {
    sa->step();
    sb->step();
    EXPECT_EQ(a.lrs(), b.lrs()) << "step " << i;
    EXPECT_EQ(a.opt.param_groups()[0].get("momentum"), b.opt.param_groups()[0].get("momentum"));
  }
}
}  // namespace

TEST(LRScheduler, StateDictResumesExactly) {
  expect_resumes([](o::Optimizer& opt) { return std::make_shared<o::StepLR>(opt, 3, 0.5); }, "StepLR");
  expect_resumes(
      [](o::Optimizer& opt) {
        return std::make_shared<o::MultiStepLR>(opt, std::vector<int64_t>{4, 9, 9});
      },
      "MultiStepLR");
  expect_resumes([](o::Optimizer& opt) { return std::make_shared<o::ExponentialLR>(opt, 0.8); }, "ExponentialLR");
  expect_resumes([](o::Optimizer& opt) { return std::make_shared<o::CosineAnnealingLR>(opt, 6, 0.01); },
                 "CosineAnnealingLR");
  expect_resumes([](o::Optimizer& opt) { return std::make_shared<o::LinearLR>(opt, 0.2, 0.9, 10); }, "LinearLR");
  expect_resumes(
      [](o::Optimizer& opt) { return std::make_shared<o::LambdaLR>(opt, [](int64_t e) { return 1.0 / (1 + e); }); },
      "LambdaLR");
  expect_resumes(
      [](o::Optimizer& opt) {
        return std::make_shared<o::OneCycleLR>(opt, 0.5, o::OneCycleLROptions{.total_steps = 25});
      },
      "OneCycleLR");
  expect_resumes(
      [](o::Optimizer& opt) {
        auto w = std::make_shared<o::LinearLR>(opt, 0.3, 1.0, 3);
        auto c = std::make_shared<o::CosineAnnealingLR>(opt, 8);
        return std::make_shared<o::SequentialLR>(opt, std::vector<std::shared_ptr<o::LRScheduler>>{w, c},
                                                 std::vector<int64_t>{4});
      },
      "SequentialLR");

  // ReduceLROnPlateau: same metrics after a restore give the same lrs.
  TwoGroups a, b;
  o::ReduceLROnPlateau ra(a.opt, {.patience = 1, .cooldown = 2}), rb(b.opt);
  for (double m : {5.0, 5.0, 5.0}) ra.step(m);
  b.opt.load_state_dict(a.opt.state_dict());
  rb.load_state_dict(ra.state_dict());
  for (double m : {5.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0}) {
    ra.step(m);
    rb.step(m);
    EXPECT_EQ(a.lrs(), b.lrs());
    EXPECT_EQ(ra.cooldown_counter(), rb.cooldown_counter());
  }
}

TEST(LRScheduler, StateErrorsAndResuming) {
  TwoGroups s;
  o::StepLR sched(s.opt, 2);
  o::SchedulerState sd = sched.state_dict();
  sd.erase("gamma");
  expect_error([&] { sched.load_state_dict(sd); }, "the state has no 'gamma'");
  sd = sched.state_dict();
  sd.erase("base_lrs.1");
  expect_error([&] { sched.load_state_dict(sd); }, "1 base_lrs and 2 last lrs, but the optimizer has 2");

  // Resuming (last_epoch given) needs "initial_lr" in every group.
  TwoGroups fresh;
  expect_error([&] { o::StepLR(fresh.opt, 2, 0.1, 5); }, "'initial_lr' is not specified in param_groups[0]");
  // With it, the cosine schedule continues from its closed form at last_epoch + 1.
  fresh.opt.param_groups()[0].options["initial_lr"] = 0.1;
  fresh.opt.param_groups()[1].options["initial_lr"] = 0.03;
  o::CosineAnnealingLR resumed(fresh.opt, 10, 0.0, 3);
  EXPECT_EQ(resumed.last_epoch(), 4);
  EXPECT_NEAR(fresh.lrs()[0], 0.1 * (1 + std::cos(kPi * 4 / 10)) / 2, 1e-15);
}
