// One training step's loss and gradients of each zoo model on CUDA against the CPU, at
// BENCHMARKS.md's CPU sizes, by its accuracy rule (fp32: 1e-4 for forward outputs, 1e-3 for
// gradients, relative to each tensor's largest magnitude).
#include <algorithm>
#include <cmath>
#include <string>

#include "models/zoo.h"
#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

// max |got - want| <= tol * max(1, max |want|): the rule's tolerance on the tensor's scale.
void expect_close_scaled(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  auto g = got.cpu().to(kFloat64).contiguous().to_vector<double>();
  auto w = want.to(kFloat64).contiguous().to_vector<double>();
  double scale = 1, err = 0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - w[i]));
  EXPECT_LE(err, tol * scale) << what << ": max abs error " << err << " (scale " << scale << ")";
}

class CudaZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaZoo, OneStepMatchesCpu) {
  KILN_REQUIRE_CUDA();
  models::Workload c = models::make_workload(GetParam(), kCPU, /*cpu_sizes=*/true);
  models::Workload g = models::make_workload(GetParam(), Device(DeviceType::CUDA), /*cpu_sizes=*/true);
  manual_seed(5);
  Tensor lc = c.step_loss();
  manual_seed(5);
  Tensor lg = g.step_loss();
  expect_close_scaled(lg, lc, 1e-4, "loss");
  lc.backward();
  lg.backward();
  auto pc = c.module->named_parameters(), pg = g.module->named_parameters();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    ASSERT_EQ(pc[i].first, pg[i].first);
    const Tensor &gc = pc[i].second.grad(), &gg = pg[i].second.grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << pc[i].first;
    if (gc.defined()) expect_close_scaled(gg, gc, 1e-3, "grad of " + pc[i].first);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaZoo, ::testing::ValuesIn(models::names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace kiln
