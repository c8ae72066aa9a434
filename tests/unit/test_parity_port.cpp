// Issue #30's "a port of a model that uses the APIs above compiles unchanged": a small
// segmentation-style network written as its PyTorch original would be (ShuffleNet's channel
// shuffle, SegNet's max_unpool2d of max_pool2d's indices, a bicubic upsample, negative padding,
// torch.max(a, b), index_add_, layers[-1], hstack, the shrink activations, softmin), trained eagerly
// and under kiln::compile. It asserts what a user porting it relies on: the shapes, finite
// gradients reaching every parameter, and compiled steps that follow eager's.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kiln/compile.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace F = nn::functional;

class PortedSegNet : public nn::Module {
 public:
  PortedSegNet() : nn::Module("PortedSegNet") {
    conv_in = register_module("conv_in", std::make_shared<nn::Conv2d>(3, 8, IntArrayRef{3}, 1, 1));
    shuffle = register_module("shuffle", std::make_shared<nn::ChannelShuffle>(2));
    act = register_module("act", std::make_shared<nn::Softshrink>(0.05));
    unpool = register_module("unpool", std::make_shared<nn::MaxUnpool2d>(IntArrayRef{2}));
    heads = register_module("heads", std::make_shared<nn::ModuleList>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                         std::make_shared<nn::Conv2d>(8, 8, IntArrayRef{1}),
                                         std::make_shared<nn::Conv2d>(8, 4, IntArrayRef{1})}));
    tanhshrink = register_module("tanhshrink", std::make_shared<nn::Tanhshrink>());
  }

  // x [N, 3, H, W] -> per-pixel class scores [N, 4, H, W] and per-class mass [N, 4].
  std::vector<Tensor> run(const Tensor& x) {
    Tensor h = act->forward(shuffle->forward(conv_in->forward(x)));
    auto [pooled, indices] = F::max_pool2d_with_indices(h, {2});
    Tensor up = unpool->forward(pooled, indices, h.sizes().vec());
    Tensor merged = kiln::max(up, h * 0.5);  // torch.max(a, b)
    // A bicubic round trip and a negative (cropping) reflect pad, as a port's decoder does.
    Tensor smooth = F::interpolate(merged, std::nullopt, std::vector<double>{2.0}, "bicubic", false);
    smooth = F::interpolate(smooth, std::vector<int64_t>{h.sizes()[2], h.sizes()[3]}, std::nullopt, "area");
    Tensor cropped = F::pad(smooth, {-1, 1, 1, -1}, "reflect");
    Tensor features = (*heads)[0]->forward(cropped) + cropped;
    Tensor scores = tanhshrink->forward((*heads)[-1]->forward(features));  // layers[-1]
    // Per-class mass, accumulated the way message-passing code does it (index_add_).
    Tensor flat = scores.swapaxes(0, 1).reshape({4, -1});  // [4, N*H*W]
    Tensor mass = zeros({4}, TensorOptions(flat.dtype()));
    mass.index_add_(0, arange(4, TensorOptions(kInt64)), flat.sum(1));
    Tensor weights = F::softmin(mass, 0);
    return {scores, hstack({mass.unsqueeze(0), weights.unsqueeze(0)})};
  }
  Tensor forward(const Tensor& x) override { return run(x)[0]; }

  std::shared_ptr<nn::Conv2d> conv_in;
  std::shared_ptr<nn::ChannelShuffle> shuffle;
  std::shared_ptr<nn::Softshrink> act;
  std::shared_ptr<nn::MaxUnpool2d> unpool;
  std::shared_ptr<nn::ModuleList> heads;
  std::shared_ptr<nn::Tanhshrink> tanhshrink;
};

Tensor loss_of(const std::vector<Tensor>& out, const Tensor& target) {
  return F::cross_entropy(out[0], target) + out[1].pow(2).mean() * 1e-3;
}

TEST(ParityPort, SegmentationNetTrainsEagerAndCompiled) {
  manual_seed(3);
  auto eager = std::make_shared<PortedSegNet>();
  auto twin = std::make_shared<PortedSegNet>();
  twin->load_state_dict(eager->state_dict());
  Tensor x = randn({2, 3, 8, 8});
  Tensor target = randint(0, 4, {2, 8, 8}, TensorOptions(kInt64));

  std::vector<Tensor> out = eager->run(x);
  ASSERT_EQ(out[0].sizes().vec(), (std::vector<int64_t>{2, 4, 8, 8}));
  ASSERT_EQ(out[1].sizes().vec(), (std::vector<int64_t>{1, 8}));

  optim::SGD opt_eager(eager->parameters(), {.lr = 0.1});
  optim::SGD opt_twin(twin->parameters(), {.lr = 0.1});
  CompileOptions options;
  options.background = false;
  auto step = compile(
      [&](const Tensor& xb, const Tensor& tb) {
        Tensor loss = loss_of(twin->run(xb), tb);
        loss.backward();
        return loss;
      },
      options);
  for (int it = 0; it < 3; ++it) {
    opt_eager.zero_grad();
    Tensor le = loss_of(eager->run(x), target);
    le.backward();
    for (const auto& [name, p] : eager->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_TRUE(isfinite(p.grad()).all().item<bool>()) << name;
    }
    opt_eager.step();

    opt_twin.zero_grad();
    Tensor lc = step(x, target);
    opt_twin.step();
    EXPECT_NEAR(lc.item<double>(), le.item<double>(), 1e-4 * (1 + std::abs(le.item<double>()))) << "step " << it;
  }
  // One graph (forward, loss and backward), no breaks, no fallback: the port compiles as written.
  EXPECT_GE(step.stats().graphs_compiled, 1);
  EXPECT_TRUE(step.stats().breaks.empty());
  EXPECT_FALSE(step.stats().fell_back_to_eager);
  auto pe = eager->named_parameters(), pc = twin->named_parameters();
  ASSERT_EQ(pe.size(), pc.size());
  for (size_t i = 0; i < pe.size(); ++i) EXPECT_TRUE(allclose(pe[i].second, pc[i].second, 1e-4, 1e-5)) << pe[i].first;
}

}  // namespace
}  // namespace kiln
