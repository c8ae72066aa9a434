// kiln::save / kiln::load: round trip of model + optimizer + step, and clear errors.
#include <gtest/gtest.h>

#include "tests/unit/temp_dir.h"

#include <filesystem>
#include <fstream>

#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<nn::Sequential> small_net() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::BatchNorm1d>(8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(8, 2)});
}

void train_steps(nn::Module& net, optim::Optimizer& opt, int n) {
  Generator g(5);
  for (int i = 0; i < n; ++i) {
    Tensor x = randn({16, 4}, {}, &g);
    Tensor loss = net.forward(x).square().mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

using kiln::testing::TempDir;

TEST(Checkpoint, RoundTripContinuesIdentically) {
  TempDir dir;
  std::string path = (dir.path / "a.safetensors").string();
  manual_seed(1);
  auto a = small_net();
  optim::AdamW opt_a(a->parameters(), {.lr = 1e-2});
  train_steps(*a, opt_a, 3);
  save(path, *a, opt_a, 3, {{"note", "hello"}});

  manual_seed(2);  // different initial weights: everything must come from the file
  auto b = small_net();
  optim::AdamW opt_b(b->parameters(), {.lr = 1.0});
  Checkpoint ck = load(path, *b, opt_b);
  EXPECT_EQ(ck.step, 3);
  EXPECT_EQ(ck.extra.at("note"), "hello");
  EXPECT_EQ(opt_b.param_groups()[0].lr(), 1e-2);

  train_steps(*a, opt_a, 2);
  train_steps(*b, opt_b, 2);
  auto sa = a->state_dict(), sb = b->state_dict();
  ASSERT_EQ(sa.keys(), sb.keys());
  for (const auto& [k, t] : sa) EXPECT_TRUE(t.eq(sb.at(k)).all().item<bool>()) << k;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});  // no temp file left behind
}

TEST(Checkpoint, ModelOnlyAndErrors) {
  TempDir dir;
  std::string path = (dir.path / "m.safetensors").string();
  auto a = small_net();
  save(path, *a, 7);
  auto b = small_net();
  EXPECT_EQ(load(path, *b).step, 7);

  optim::SGD sgd(b->parameters(), {.lr = 0.1});
  try {
    load(path, *b, sgd);
    FAIL() << "expected an error: no optimizer state in the file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no optimizer state"), std::string::npos) << e.what();
  }

  // A plain safetensors state_dict loads too (step 0), but holds no optimizer state.
  std::string plain = (dir.path / "plain.safetensors").string();
  safetensors::save_file(a->state_dict(), plain);
  EXPECT_EQ(load(plain, *b).step, 0);
  EXPECT_THROW(load(plain, *b, sgd), Error);

  // Another architecture: the error lists the keys.
  auto other = std::make_shared<nn::Linear>(4, 8);
  try {
    load(path, *other);
    FAIL() << "expected a state_dict mismatch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected keys"), std::string::npos) << e.what();
  }

  // Truncated file.
  std::string cut = (dir.path / "cut.safetensors").string();
  fs::copy_file(path, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  EXPECT_THROW(load(cut, *b), Error);

  // Optimizer of another kind.
  optim::AdamW adamw(a->parameters(), {});
  train_steps(*a, adamw, 1);
  save(path, *a, adamw, 1);
  EXPECT_THROW(load(path, *b, sgd), Error);
}

}  // namespace
}  // namespace kiln
