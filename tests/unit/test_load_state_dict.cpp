// kiln::load of plain state_dicts: safetensors without kiln's metadata (as
// safetensors.torch.save_file writes), key prefixes, strict and the errors that name the key.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/temp_dir.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using kiln::testing::TempDir;

std::shared_ptr<nn::Sequential> net() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4), std::make_shared<nn::Linear>(4, 2)});
}

bool same_state(const nn::Module& a, const nn::Module& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  if (sa.keys() != sb.keys()) return false;
  for (const auto& [k, t] : sa)
    if (!t.eq(sb.at(k)).all().item<bool>()) return false;
  return true;
}

TEST(LoadStateDict, PlainSafetensors) {
  TempDir dir;
  manual_seed(1);
  auto a = net();
  safetensors::save_file(a->state_dict(), dir.file("w.safetensors"), {{"format", "pt"}});
  manual_seed(2);
  auto b = net();
  ASSERT_FALSE(same_state(*a, *b));
  Checkpoint ck = load(dir.file("w.safetensors"), *b);
  EXPECT_EQ(ck.step, 0);
  EXPECT_TRUE(ck.missing_keys.empty() && ck.unexpected_keys.empty());
  EXPECT_TRUE(same_state(*a, *b));
  optim::SGD sgd(b->parameters(), {.lr = 0.1});
  expect_error([&] { load(dir.file("w.safetensors"), *b, sgd); }, {"w.safetensors", "no optimizer state"});
}

TEST(LoadStateDict, Prefixes) {
  TempDir dir;
  auto a = net();
  StateDict wrapped;  // as torch's DataParallel names them
  for (const auto& [k, t] : a->state_dict()) wrapped.insert("module." + k, t);
  safetensors::save_file(wrapped, dir.file("dp.safetensors"));
  auto b = net();
  expect_error([&] { load(dir.file("dp.safetensors"), *b); },
               {"dp.safetensors", "missing keys: 0.weight", "unexpected keys: module.0.bias", "strip_prefix"});
  load(dir.file("dp.safetensors"), *b, {.strip_prefix = "module."});
  EXPECT_TRUE(same_state(*a, *b));

  // One Linear's weights into the first layer of a Sequential: add "0.", the rest stays missing.
  nn::Linear lin(3, 4);
  safetensors::save_file(lin.state_dict(), dir.file("lin.safetensors"));
  expect_error([&] { load(dir.file("lin.safetensors"), *b, {.add_prefix = "0."}); }, "missing keys: 1.weight");
  Checkpoint ck = load(dir.file("lin.safetensors"), *b, {.strict = false, .add_prefix = "0."});
  EXPECT_TRUE(ck.unexpected_keys.empty());
  EXPECT_EQ(ck.missing_keys.size(), 7u);  // 1.{weight,bias,running_mean,running_var,num_batches_tracked}, 2.*
  EXPECT_TRUE(b->state_dict().at("0.weight").eq(lin.weight).all().item<bool>());

  // strict = false also reports keys the model lacks; strip then add.
  ck = load(dir.file("dp.safetensors"), *b, {.strict = false, .strip_prefix = "module.", .add_prefix = "x."});
  EXPECT_EQ(ck.unexpected_keys.size(), b->state_dict().size());
  EXPECT_EQ(ck.unexpected_keys.front(), "x.0.bias");  // the file's order

  // Two file keys that map to one model key.
  StateDict both = wrapped;
  both.insert("0.weight", a->state_dict().at("0.weight"));
  safetensors::save_file(both, dir.file("both.safetensors"));
  expect_error([&] { load(dir.file("both.safetensors"), *b, {.strip_prefix = "module."}); },
               {"both become '0.weight'"});
}

TEST(LoadStateDict, ShapeAndDtypeMismatchNameTheKey) {
  TempDir dir;
  auto a = net();
  StateDict sd = a->state_dict();
  sd.insert("2.bias", zeros({3}));
  sd.insert("1.num_batches_tracked", scalar_tensor(1.0, TensorOptions(kFloat32)));
  safetensors::save_file(sd, dir.file("bad.safetensors"));
  auto b = net();
  auto before = b->state_dict().at("0.weight").clone();
  for (bool strict : {true, false})
    expect_error([&] { load(dir.file("bad.safetensors"), *b, {.strict = strict}); },
                 {"bad.safetensors", "size mismatch for 2.bias: [3] in the file, [2] in the model",
                  "dtype mismatch for 1.num_batches_tracked: float32 in the file, int64 in the model"});
  EXPECT_TRUE(b->state_dict().at("0.weight").eq(before).all().item<bool>());  // nothing changed

  // Floating point converts, as torch's copy_.
  StateDict half;
  for (const auto& [k, t] : a->state_dict()) half.insert(k, t.is_floating_point() ? t.to(kFloat16) : t);
  safetensors::save_file(half, dir.file("half.safetensors"));
  load(dir.file("half.safetensors"), *b);
  EXPECT_EQ(b->state_dict().at("0.weight").dtype(), kFloat32);
  EXPECT_LT((b->state_dict().at("0.weight") - a->state_dict().at("0.weight")).abs().max().item<float>(), 1e-2);
}

}  // namespace
}  // namespace kiln
