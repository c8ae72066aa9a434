// One training step's loss and gradients of each zoo model on CUDA against the CPU, at
// BENCHMARKS.md's CPU sizes, by its accuracy rule (fp32: 1e-4 for forward outputs, 1e-3 for
// gradients, relative to each tensor's largest magnitude).
#include <algorithm>
#include <cmath>
#include <string>

#include "models/zoo.h"
#include "tests/cuda/cuda_test.h"
#include "tests/cuda/zoo_test.h"

namespace kiln {
namespace {

using testing::compare_in_float64;
using testing::to_float64;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.cpu().to(kFloat64) - b.cpu().to(kFloat64)).abs().max().item<double>();
}

// max |got - want| <= max(tol * max(1, max |want|), floor): the rule's tolerance on the tensor's
// scale, or the model's own noise floor when that is larger (see OneStepMatchesCpu).
void expect_close_scaled(const Tensor& got, const Tensor& want, double tol, const std::string& what,
                         double floor = 0) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  double scale = std::max(1.0, want.to(kFloat64).abs().max().item<double>());
  double err = max_abs_diff(got, want);
  EXPECT_LE(err, std::max(tol * scale, floor))
      << what << ": max abs error " << err << " (scale " << scale << ", noise floor " << floor << ")";
}

// The CPU gradients of one step after scaling the float inputs by (1 + 1e-6): two correct float32
// implementations differ by rounding (about 1e-7 of each value per op), so they cannot agree more
// closely than the model's gradients move under such a perturbation.
std::vector<Tensor> perturbed_cpu_grads(const std::string& name) {
  models::Workload w = models::make_workload(name, kCPU, /*cpu_sizes=*/true);
  {
    NoGradGuard no_grad;
    for (Tensor& x : w.inputs)
      if (is_floating_point(x.dtype())) x.mul_(1.0 + 1e-6);
  }
  manual_seed(5);
  w.step_loss().backward();
  std::vector<Tensor> g;
  for (const auto& [n, p] : w.module->named_parameters()) g.push_back(p.grad());
  return g;
}

class CudaZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaZoo, OneStepMatchesCpu) {
  KILN_REQUIRE_CUDA();
  models::Workload c = models::make_workload(GetParam(), kCPU, /*cpu_sizes=*/true);
  models::Workload g = models::make_workload(GetParam(), Device(DeviceType::CUDA), /*cpu_sizes=*/true);
  const bool f64 = compare_in_float64(GetParam());
  if (f64) {
    to_float64(c);
    to_float64(g);
  }
  manual_seed(5);
  Tensor lc = c.step_loss();
  manual_seed(5);
  Tensor lg = g.step_loss();
  expect_close_scaled(lg, lc, f64 ? 1e-9 : 1e-4, "loss");
  lc.backward();
  lg.backward();
  auto pc = c.module->named_parameters(), pg = g.module->named_parameters();
  ASSERT_EQ(pc.size(), pg.size());
  std::vector<Tensor> moved = f64 ? std::vector<Tensor>(pc.size()) : perturbed_cpu_grads(GetParam());
  ASSERT_EQ(moved.size(), pc.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    ASSERT_EQ(pc[i].first, pg[i].first);
    const Tensor &gc = pc[i].second.grad(), &gg = pg[i].second.grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << pc[i].first;
    if (!gc.defined()) continue;
    // Twice the perturbation's effect: the GPU's rounding and the CPU's both count.
    double floor = moved[i].defined() ? 2 * max_abs_diff(moved[i], gc) : 0;
    expect_close_scaled(gg, gc, f64 ? 1e-6 : 1e-3, "grad of " + pc[i].first, floor);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaZoo, ::testing::ValuesIn(models::names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace kiln
