// kiln train's tasks, in-process: accuracy, determinism, exact resume, option errors.
#include <gtest/gtest.h>

#include "tests/unit/temp_dir.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "kiln/checkpoint.h"
#include "kiln/cuda.h"
#include "kiln/io.h"
#include "tools/kiln/train/train.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

Options digits(int64_t steps) {
  Options o;
  o.task = "digits";
  o.steps = steps;
  o.quiet = true;
  return o;
}

using kiln::testing::TempDir;

TEST(Train, DigitsReachesTestAccuracy) {
  std::ostringstream out;
  Summary s = run(digits(0), out);  // the task's default steps, as `kiln train --task digits`
  ASSERT_TRUE(s.test_accuracy.has_value());
  EXPECT_GE(*s.test_accuracy, 0.95) << out.str();
  EXPECT_LT(s.final_loss, 0.2);
  EXPECT_EQ(s.parameters, 32 * 9 + 32 + 64 * 32 * 9 + 64 + 1024 * 128 + 128 + 128 * 10 + 10);
}

// `kiln train --compile`: the same seed reaches eager's accuracy, with losses equal by the
// accuracy rule (BENCHMARKS.md); the eager backend runs eager's kernels in eager's order.
TEST(Train, CompiledDigitsMatchesEager) {
  std::ostringstream out;
  Options o = digits(40);
  o.log_every = 10;
  Summary eager = run(o, out);
  for (const char* backend : {"aot_eager", "eager"}) {
    SCOPED_TRACE(backend);
    Options c = o;
    c.compile = true;
    c.backend = backend;
    Summary s = run(c, out);
    EXPECT_NEAR(s.final_loss, eager.final_loss, 1e-4 * (1 + std::abs(eager.final_loss)));
    ASSERT_TRUE(s.test_accuracy && eager.test_accuracy);
    EXPECT_NEAR(*s.test_accuracy, *eager.test_accuracy, 0.011);
  }
  Options bad = o;
  bad.compile = true;
  bad.backend = "nope";
  EXPECT_THROW(validate(bad), Error);
}

TEST(Train, SameSeedSameLossOtherSeedOtherLoss) {
  std::ostringstream out;
  Options o = digits(12);
  o.log_every = 4;
  double a = run(o, out).final_loss, b = run(o, out).final_loss;
  EXPECT_EQ(a, b);
  o.seed = 1;
  EXPECT_NE(run(o, out).final_loss, a);
}

// Note [Exact resume]: N steps in one run and N/2 + resumed N/2 give the same losses and weights.
TEST(Train, ResumeEqualsUninterrupted) {
  std::ostringstream out;
  TempDir full_tmp, half_tmp;
  fs::path full_dir = full_tmp.path, half_dir = half_tmp.path;
  Options o = digits(30);  // 22 batches of 64 per epoch: the run crosses an epoch boundary
  o.log_every = 7;         // the resume point (15) falls inside an interval
  o.checkpoint_dir = full_dir.string();
  Summary full = run(o, out);

  Options first = o;
  first.steps = 15;
  first.checkpoint_dir = half_dir.string();
  run(first, out);
  Options second = first;
  second.steps = 30;
  second.resume = true;
  Summary resumed = run(second, out);
  EXPECT_EQ(resumed.start_step, 15);
  EXPECT_EQ(resumed.final_loss, full.final_loss);
  EXPECT_EQ(*resumed.test_accuracy, *full.test_accuracy);

  StateDict a = safetensors::load_file((full_dir / "checkpoint.safetensors").string());
  StateDict b = safetensors::load_file((half_dir / "checkpoint.safetensors").string());
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [k, t] : a) EXPECT_TRUE(t.eq(b.at(k)).all().item<bool>()) << k;
}

TEST(Train, ResumeChecksTheConfiguration) {
  std::ostringstream out;
  TempDir tmp;
  fs::path dir = tmp.path;
  Options o = digits(3);
  o.checkpoint_dir = dir.string();
  run(o, out);
  o.resume = true;
  o.steps = 6;
  o.batch = 32;
  try {
    run(o, out);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch"), std::string::npos) << e.what();
  }
}

TEST(Train, ResumingAnotherTasksCheckpointSaysSo) {
  std::ostringstream out;
  TempDir tmp;
  Options o = digits(2);
  o.checkpoint_dir = tmp.path.string();
  run(o, out);
  o.task = "chars";
  o.resume = true;
  try {
    run(o, out);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was made by task digits, this run is task chars"), std::string::npos)
        << e.what();
  }
}

TEST(Train, SecondTrainerOnOneDirectoryFailsAtOnce) {
  std::ostringstream out;
  TempDir tmp;
  Options o = digits(2);
  o.checkpoint_dir = tmp.path.string();
  CheckpointLock other(o.checkpoint_dir);  // as another process's run would hold it
  try {
    run(o, out);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another trainer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.path / "checkpoint.safetensors"));
}

TEST(Train, CharsTrainsAndSamples) {
  std::ostringstream out;
  Options o;
  o.task = "chars";
  o.steps = 4;
  o.batch = 2;
  o.quiet = true;
  Summary s = run(o, out);
  EXPECT_TRUE(std::isfinite(s.final_loss));
  EXPECT_LT(s.final_loss, 4.5);  // ln(65) = 4.17 at initialisation
  ASSERT_TRUE(s.val_loss.has_value());
  EXPECT_EQ(s.sample.size(), 240u);
}

TEST(Train, BadOptionsNameTheOption) {
  auto expect_error = [](Options o, const std::string& what) {
    try {
      validate(o);
      FAIL() << "expected an error about " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Options o;
  o.task = "imagenet";
  expect_error(o, "--task");
  o = Options{};
  o.steps = -1;
  expect_error(o, "--steps");
  o = Options{};
  o.resume = true;
  expect_error(o, "--resume");
  o = Options{};
  o.device = "cuda";
  if (!cuda::is_available()) expect_error(o, "--device");  // "no CUDA device is available"
  o = Options{};
  o.device = "tpu";
  EXPECT_THROW(validate(o), Error);
}

TEST(Train, SummaryJsonHasTheRequiredFields) {
  Summary s;
  s.task = "digits";
  s.steps = 10;
  s.final_loss = 0.25;
  s.seconds = 1.5;
  s.test_accuracy = 0.97;
  std::string j = summary_json(s);
  for (const char* key :
       {"\"task\":\"digits\"", "\"steps\":10", "\"final_loss\":0.25", "\"seconds\":1.5", "\"test_accuracy\":0.97"})
    EXPECT_NE(j.find(key), std::string::npos) << j;
}

}  // namespace
}  // namespace kiln::train
