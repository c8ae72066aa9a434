// CUDA graphs: kiln::cuda::CUDAGraph (Note [CUDA graphs]) and mode "reduce-overhead" of
// kiln::compile replaying compiled graphs as CUDA graphs (Note [CUDA graphs in
// reduce-overhead]): replays give eager's answers after parameter updates, with inputs at new
// addresses, with earlier outputs still held, and graphs that cannot be captured run as usual.
#include <cmath>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "models/mlp.h"
#include "tests/cuda/cuda_test.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::expect_close;

// Two MLPs with the same initial parameters on the GPU: one compiled, one eager.
std::pair<std::shared_ptr<models::MLP>, std::shared_ptr<models::MLP>> twin_mlps(int64_t in, int64_t hidden, int64_t out,
                                                                                 uint64_t seed) {
  std::shared_ptr<models::MLP> m[2];
  for (auto& p : m) {
    manual_seed(seed);
    p = std::make_shared<models::MLP>(in, hidden, 2, out);
    p->to(Device(DeviceType::CUDA));
  }
  return {m[0], m[1]};
}

TEST(CudaGraphs, ReplayReadsTheStaticInputsNewValues) {
  KILN_REQUIRE_CUDA();
  Tensor x = arange(0, 1000, 1, TensorOptions(kFloat32)).cuda();
  Tensor y;
  cuda::CUDAGraph g;
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  g.capture_begin();
  EXPECT_TRUE(cuda::is_current_stream_capturing());
  y = (x * 2 + 1).exp2().sum(0, true);  // memory allocated while capturing: the graph's pool
  g.capture_end();
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  EXPECT_TRUE(g.captured());
  for (int i = 0; i < 3; ++i) {
    Tensor host = randn({1000}) * 0.1;
    x.copy_(host.cuda());
    g.replay();
    expect_close(y, (host.to(kFloat64) * 2 + 1).exp2().sum(0, true).to(kFloat32), 1e-5, 1e-5);
  }
  // Work after the graph on the same stream sees its results.
  EXPECT_TRUE(std::isfinite((y * 1).cpu().item<float>()));
  g.reset();
  EXPECT_FALSE(g.captured());
  testing::expect_error([&] { g.replay(); }, {"nothing captured"});
}

TEST(CudaGraphs, AHostSynchronizationFailsTheCaptureCleanly) {
  KILN_REQUIRE_CUDA();
  Tensor x = ones({16}).cuda();
  cuda::CUDAGraph g;
  g.capture_begin();
  Tensor s = x.sum();
  EXPECT_THROW((void)s.item<float>(), Error);
  EXPECT_THROW(g.capture_end(), Error);
  EXPECT_FALSE(g.captured());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  // Eager work goes on as before.
  EXPECT_EQ((x * 3).sum().item<float>(), 48.0f);
}

// The mlp's whole training step (forward, backward, AdamW) in one compiled graph, replayed as a
// CUDA graph: the same parameters as eager's steps, every loss kept in a list keeps its value
// (the next replay moves a held output out of the graph's pool), and the graph did replay.
TEST(CudaGraphs, ReduceOverheadWholeStepTrainsLikeEager) {
  KILN_REQUIRE_CUDA();
  const auto twins = twin_mlps(32, 64, 10, 5);
  const auto m = twins.first, ref = twins.second;
  optim::AdamW opt(m->parameters(), {.lr = 1e-2}), opt_ref(ref->parameters(), {.lr = 1e-2});
  Tensor x = randn({64, 32}).cuda(), y = randint(0, 10, {64}).cuda();
  auto step = [&](nn::Module& model, optim::AdamW& o) {
    Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
    loss.backward();
    o.step();
    o.zero_grad();
    return loss;
  };
  auto fast = compile([&] { return step(*m, opt); }, {.mode = "reduce-overhead", .backend = "inductor", .background = false});
  std::vector<Tensor> got, want;
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    got.push_back(fast());
    want.push_back(step(*ref, opt_ref));
    auto pc = m->parameters(), pe = ref->parameters();
    for (size_t p = 0; p < pc.size(); ++p) expect_close(pc[p], pe[p].detach().cpu(), 1e-4, 1e-4);
  }
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i].detach().cpu(), 1e-4, 1e-4);
  EXPECT_GE(fast.stats().cuda_graph_replays, 4) << fast.stats().str();
}

// The forward compiled, the backward run by autograd through the compiled backward graph, and
// the optimizer eager: both graphs replay, fed with a new batch at a new address every step.
TEST(CudaGraphs, ReduceOverheadForwardAndBackwardWithNewBatches) {
  KILN_REQUIRE_CUDA();
  const auto twins = twin_mlps(16, 32, 4, 7);
  const auto m = twins.first, ref = twins.second;
  optim::SGD opt(m->parameters(), {.lr = 0.1}), opt_ref(ref->parameters(), {.lr = 0.1});
  auto loss_of = [](nn::Module& model, const Tensor& x, const Tensor& y) {
    return nn::functional::cross_entropy(model.forward(x), y);
  };
  auto fast = compile([&](const Tensor& x, const Tensor& y) { return loss_of(*m, x, y); },
                      {.mode = "reduce-overhead", .backend = "inductor", .background = false});
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    Tensor x = randn({8, 16}).cuda(), y = randint(0, 4, {8}).cuda();
    Tensor lc = fast(x, y), le = loss_of(*ref, x, y);
    expect_close(lc, le.detach().cpu(), 1e-5, 1e-6);
    lc.backward();
    le.backward();
    auto pc = m->parameters(), pe = ref->parameters();
    for (size_t p = 0; p < pc.size(); ++p) expect_close(pc[p].grad(), pe[p].grad().cpu(), 1e-5, 1e-6);
    opt.step();
    opt_ref.step();
    opt.zero_grad();
    opt_ref.zero_grad();
  }
  EXPECT_GE(fast.stats().cuda_graph_replays, 6) << fast.stats().str();
}

// Inputs the graph reads in place are read at their current values; a weight replaced by a
// tensor at another address is captured again; a graph drawing random numbers is not captured.
TEST(CudaGraphs, ReduceOverheadFollowsInputsAndSkipsRandomGraphs) {
  KILN_REQUIRE_CUDA();
  auto body = [](const Tensor& x, const Tensor& w) { return (mm(x, w).relu() * 0.5).sum(1); };
  auto f = compile(body, {.mode = "reduce-overhead", .backend = "inductor", .background = false});
  Tensor x = randn({8, 8}).cuda(), w = randn({8, 8}).cuda();
  for (int i = 0; i < 4; ++i) {
    expect_close(f(x, w), body(x, w).cpu(), 1e-5, 1e-6);
    w.add_(1);  // in place: the same address, new values
  }
  Tensor w2 = randn({8, 8}).cuda();
  for (int i = 0; i < 3; ++i) expect_close(f(x, w2), body(x, w2).cpu(), 1e-5, 1e-6);
  EXPECT_GE(f.stats().cuda_graph_replays, 3);

  auto drop = compile([](const Tensor& x) { return dropout(x, 0.5, true) + 1; },
                      {.mode = "reduce-overhead", .backend = "inductor", .background = false});
  Tensor ones8 = ones({1000}).cuda();
  Tensor a = drop(ones8), b = drop(ones8), c = drop(ones8);
  EXPECT_GT((b - c).abs().max().item<float>(), 0.0f) << "a replay drew the captured random numbers again";
  (void)a;
  EXPECT_EQ(drop.stats().cuda_graph_replays, 0);
}

}  // namespace
}  // namespace kiln
