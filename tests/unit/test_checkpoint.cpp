// kiln::save / kiln::load: round trip of model + optimizer + step, and clear errors.
#include <gtest/gtest.h>

#include "tests/unit/temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <random>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

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

using kiln::testing::expect_error;

bool same_state(const nn::Module& a, const nn::Module& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  if (sa.keys() != sb.keys()) return false;
  for (const auto& [k, t] : sa)
    if (!t.eq(sb.at(k)).all().item<bool>()) return false;
  return true;
}

// Rewrites a checkpoint as format 1 (no checksum), after `edit`: how a test makes a file whose
// parts are wrong in one way only.
template <class F>
void rewrite_v1(const std::string& path, F edit) {
  StateDict tensors;
  std::map<std::string, std::string> meta;
  {
    safetensors::SafeTensorsFile f(path);
    for (const auto& k : f.keys()) tensors.insert(k, f.get(k));
    meta = f.metadata();
  }
  meta.erase("kiln.checksum");
  meta["kiln.format"] = "kiln.checkpoint.1";
  edit(tensors, meta);
  safetensors::save_file(tensors, path, meta);
}

StateDict without(const StateDict& sd, const std::string& key) {
  StateDict out;
  for (const auto& [k, t] : sd)
    if (k != key) out.insert(k, t);
  return out;
}

TEST(Checkpoint, ChecksEveryPartBeforeChangingAnything) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  manual_seed(1);
  auto a = small_net();
  optim::AdamW opt_a(a->parameters(), {.lr = 1e-2});
  train_steps(*a, opt_a, 2);
  save(path, *a, opt_a, 2);

  manual_seed(2);
  auto b = small_net();
  const StateDict before = b->state_dict();
  auto unchanged = [&] {
    auto now = b->state_dict();
    for (const auto& [k, t] : before) EXPECT_TRUE(t.eq(now.at(k)).all().item<bool>()) << k;
  };
  // An optimizer over fewer parameters: its part does not fit, so the model is not touched either.
  auto params = b->parameters();
  optim::AdamW fewer(std::vector<Tensor>(params.begin(), params.end() - 1), {});
  expect_error([&] { load(path, *b, fewer); }, {"c.safetensors", "parameters in the loaded state dict"});
  unchanged();

  // A parameter's AdamW state without exp_avg fails at load, not at the next step().
  std::string partial = dir.file("partial.safetensors");
  fs::copy_file(path, partial);
  rewrite_v1(partial, [](StateDict& t, auto&) { t = without(t, "optimizer.1.exp_avg"); });
  optim::AdamW opt_b(b->parameters(), {});
  expect_error([&] { load(partial, *b, opt_b); },
               {"partial.safetensors", "the state of parameter 1 lacks 'exp_avg'", "exp_avg_sq, step"});
  unchanged();
  EXPECT_EQ(opt_b.find_state(b->parameters()[0]), nullptr);

  // Metadata values: a negative learning rate or step, a beta of 1.5, a step state that is NaN.
  auto expect_bad = [&](const std::string& name, auto edit, std::initializer_list<std::string> parts) {
    std::string p = dir.file(name);
    fs::copy_file(path, p);
    rewrite_v1(p, edit);
    expect_error([&] { load(p, *b, opt_b); }, parts);
    unchanged();
  };
  auto set_option = [](const std::string& key, const std::string& value) {
    return [=](StateDict&, std::map<std::string, std::string>& m) {
      std::string& j = m["kiln.optimizer"];
      size_t at = j.find("\"" + key + "\":");
      ASSERT_NE(at, std::string::npos) << j;
      size_t end = j.find_first_of(",}", at);
      j.replace(at, end - at, "\"" + key + "\":" + value);
    };
  };
  expect_bad("lr.safetensors", set_option("lr", "-0.5"), {"option 'lr' of parameter group 0 must not be negative"});
  expect_bad("beta.safetensors", set_option("beta1", "1.5"), {"option 'beta1'", "[0, 1)"});
  expect_bad("step.safetensors", [](StateDict&, auto& m) { m["kiln.step"] = "-3"; }, {"bad kiln.step '-3'"});
  expect_bad("nan.safetensors",
             [](StateDict& t, auto&) { t.insert("optimizer.0.step", scalar_tensor(NAN, TensorOptions(kFloat32))); },
             {"state '0.step' is nan"});

  // The intact file still loads, and old (format 1) checkpoints too.
  load(path, *b, opt_b);
  EXPECT_TRUE(same_state(*a, *b));
  std::string v1 = dir.file("v1.safetensors");
  fs::copy_file(path, v1);
  rewrite_v1(v1, [](StateDict&, auto&) {});
  EXPECT_EQ(load(v1, *b, opt_b).step, 2);
}

TEST(Checkpoint, ChecksumFindsEveryFlippedByte) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  auto a = small_net();
  optim::AdamW opt(a->parameters(), {});
  train_steps(*a, opt, 1);
  save(path, *a, opt, 1, {{"note", "hello"}});
  std::vector<char> bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  auto b = small_net();
  optim::AdamW opt_b(b->parameters(), {});
  std::mt19937 rng(7);
  // Flips in the tensor data: the safetensors layout is still valid, only the checksum notices.
  for (int i = 0; i < 30; ++i) {
    std::vector<char> c = bytes;
    size_t at = 8 + header + rng() % (c.size() - 8 - header);
    c[at] = static_cast<char>(c[at] ^ (1 << (rng() % 8)));
    std::string p = dir.file("flip" + std::to_string(i) + ".safetensors");
    std::ofstream(p, std::ios::binary).write(c.data(), static_cast<std::streamsize>(c.size()));
    expect_error([&] { load(p, *b, opt_b); }, {"flip", "the checkpoint is corrupt", "checksum"});
  }
  // A metadata value changed.
  std::string text(bytes.begin(), bytes.end());
  text.replace(text.find("hello"), 5, "hellp");
  std::string p = dir.file("meta.safetensors");
  std::ofstream(p, std::ios::binary) << text;
  expect_error([&] { load(p, *b, opt_b); }, "the checkpoint is corrupt");
  EXPECT_EQ(load(path, *b, opt_b).extra.at("note"), "hello");
  Checkpoint info = checkpoint_info(path);  // the header alone
  EXPECT_EQ(info.step, 1);
  EXPECT_EQ(info.extra.at("note"), "hello");
  std::string plain = dir.file("plain.safetensors");
  safetensors::save_file(a->state_dict(), plain);
  expect_error([&] { checkpoint_info(plain); }, {"plain.safetensors", "not a kiln checkpoint"});
}

TEST(Checkpoint, LockMakesASecondTrainerFailAtOnce) {
  TempDir dir;
  // Temp files of writes killed midway: a dead process's is removed; a live one's (ours) is kept.
  const std::string mine = ".kiln-" + std::to_string(::getpid()) + "-5.tmp";
  for (const std::string& name : {std::string(".kiln-999999999-0.tmp"), mine, std::string("other.tmp")})
    std::ofstream(dir.file(name)) << "x";
  {
    CheckpointLock lock(dir.path.string());
    EXPECT_EQ(lock.removed_temp_files(), 1);
    EXPECT_EQ(dir.entries(),
              (std::vector<std::string>{".kiln-" + std::to_string(::getpid()) + "-5.tmp", ".kiln.lock", "other.tmp"}));
    expect_error([&] { CheckpointLock second(dir.path.string()); },
                 {"is in use by another trainer", "process " + std::to_string(::getpid()), ".kiln.lock"});
  }
  CheckpointLock again(dir.path.string());  // released with the first
  expect_error([] { CheckpointLock none("/nonexistent/kiln"); }, "cannot create the lock file");
}
}  // namespace
}  // namespace kiln

namespace kiln {
namespace {
// A checkpoint of a later format (or of no kiln format at all) is refused before anything is
// read into the model, naming the version found and the versions this kiln reads.
TEST(Checkpoint, NewerFormatVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  manual_seed(1);
  auto a = small_net();
  save(path, *a);
  manual_seed(2);
  auto b = small_net();
  const StateDict before = b->state_dict();
  for (const char* format : {"kiln.checkpoint.3", "kiln.checkpoint.10"}) {
    const std::string newer = dir.file(std::string(format) + ".safetensors");
    fs::copy_file(path, newer);
    rewrite_v1(newer, [&](StateDict&, auto& meta) { meta["kiln.format"] = format; });
    const std::string version = std::string(format).substr(16);
    expect_error([&] { load(newer, *b); },
                 {"format version " + version, "reads versions 1 and 2 only", std::string(format)});
  }
  const std::string other = dir.file("other.safetensors");
  fs::copy_file(path, other);
  rewrite_v1(other, [](StateDict&, auto& meta) { meta["kiln.format"] = "something.else"; });
  expect_error([&] { load(other, *b); }, {"'something.else'", "not a kiln checkpoint"});
  const StateDict now = b->state_dict();
  for (const auto& [k, t] : before) EXPECT_TRUE(t.eq(now.at(k)).all().item<bool>()) << "refused, yet changed " << k;
}
}  // namespace
}  // namespace kiln
