// The training loop behind `kiln train`: optimizer, logging, checkpoints and resume.
//
// Note [Exact resume]
// A run resumed from a checkpoint must reproduce an uninterrupted run's losses bit for bit.
// So every input of step s is a function of (seed, s) only: batches come from the task by step
// number, the learning rate from lr_at(s) (never from the total step count), the model and
// AdamW state from the checkpoint, the default generator's (seed, offset) from its metadata, and
// the partly filled logging interval (sum and count of losses) too, so final_loss agrees.
#include "tools/kiln/train/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "kiln/autograd.h"
#include "kiln/checkpoint.h"
#include "kiln/compile.h"
#include "kiln/cuda.h"
#include "kiln/generator.h"
#include "kiln/optim.h"
#include "tools/kiln/train/progress.h"

namespace kiln::train {

namespace fs = std::filesystem;

TaskDefaults task_defaults(const std::string& task) {
  if (task == "digits") return {.steps = 300, .batch = 64, .log_every = 25, .lr = 2e-3};
  if (task == "chars") return {.steps = 500, .batch = 16, .log_every = 25, .lr = 2e-3};
  KILN_FAIL("--task: unknown task '", task, "' (expected digits or chars)");
}

void validate(const Options& o) {
  task_defaults(o.task);
  KILN_CHECK(o.steps >= 0, "--steps: must be positive, got ", o.steps);
  KILN_CHECK(o.batch >= 0, "--batch: must be positive, got ", o.batch);
  KILN_CHECK(o.lr >= 0 && std::isfinite(o.lr), "--lr: must be a positive number, got ", o.lr);
  KILN_CHECK(o.log_every >= 0, "--log-every: must be positive, got ", o.log_every);
  KILN_CHECK(o.checkpoint_every >= 0, "--checkpoint-every: must be positive, got ", o.checkpoint_every);
  KILN_CHECK(!o.resume || !o.checkpoint_dir.empty(), "--resume needs --checkpoint DIR");
  KILN_CHECK(o.checkpoint_every == 0 || !o.checkpoint_dir.empty(), "--checkpoint-every needs --checkpoint DIR");
  if (o.compile) {
    auto names = list_backends();
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    KILN_CHECK(std::find(names.begin(), names.end(), o.backend) != names.end(), "--backend: unknown backend '",
               o.backend, "' (valid: ", valid, ")");
  }
  Device d(o.device);  // throws on a malformed device string
  KILN_CHECK(d.is_cpu() || d.is_cuda(), "--device ", o.device, ": expected cpu or cuda");
  if (d.is_cuda())
    KILN_CHECK(cuda::is_available(), "--device ", o.device, ": no CUDA device is available (kiln info says why)");
}

std::string find_data_dir(const std::string& requested, const std::string& file) {
  std::vector<fs::path> candidates;
  if (!requested.empty()) {
    KILN_CHECK(fs::exists(fs::path(requested) / file), "--data-dir ", requested, ": no ", file, " there");
    return requested;
  }
  if (const char* env = std::getenv("KILN_DATA_DIR")) candidates.emplace_back(env);
  candidates.emplace_back("data");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      candidates.push_back(p / "data");
#ifdef KILN_SOURCE_DIR
  candidates.emplace_back(fs::path(KILN_SOURCE_DIR) / "data");
#endif
  for (const auto& c : candidates)
    if (fs::exists(c / file, ec)) return c.string();
  KILN_FAIL("kiln train: cannot find ", file, " (looked in $KILN_DATA_DIR, ./data and beside the kiln binary); ",
            "pass --data-dir");
}

namespace {

struct Interval {
  double sum = 0;
  int64_t count = 0;
};

std::string hexfloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);  // exact round trip through the checkpoint
  return buf;
}

double parse_double(const std::string& s, const char* what) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  KILN_CHECK(end && *end == '\0' && !s.empty(), "kiln train: checkpoint field ", what, " is not a number: '", s, "'");
  return v;
}

uint64_t parse_u64(const std::string& s, const char* what) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  KILN_CHECK(end && *end == '\0' && !s.empty(), "kiln train: checkpoint field ", what, " is not an integer: '", s, "'");
  return v;
}

void set_lr(optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) g.set_lr(lr);
}

}  // namespace

Summary run(const Options& in, std::ostream& out) {
  validate(in);
  TaskDefaults def = task_defaults(in.task);
  Options o = in;
  if (o.steps == 0) o.steps = def.steps;
  if (o.batch == 0) o.batch = def.batch;
  if (o.lr == 0) o.lr = def.lr;
  if (o.log_every == 0) o.log_every = def.log_every;

  manual_seed(o.seed);  // model initialisation is a function of the seed
  std::unique_ptr<Task> task = o.task == "digits"
                                   ? make_digits_task(o, find_data_dir(o.data_dir, "digits.u8"))
                                   : make_chars_task(o, find_data_dir(o.data_dir, "tinyshakespeare.txt"));
  nn::Module& model = task->model();
  model.train();
  optim::AdamW opt(model.parameters(), {.lr = o.lr, .weight_decay = 0.01});

  Summary s;
  s.task = o.task;
  s.steps = o.steps;
  for (const auto& p : model.parameters()) s.parameters += p.numel();

  std::map<std::string, std::string> config = task->config();
  config["task"] = o.task;
  config["seed"] = std::to_string(o.seed);
  config["batch"] = std::to_string(o.batch);
  config["lr"] = hexfloat(o.lr);
  config["log_every"] = std::to_string(o.log_every);

  fs::path ckpt_path;
  int64_t step = 0;
  Interval cur;
  double last_logged = NAN;
  std::optional<CheckpointLock> lock;  // held until the run ends: one trainer per directory
  if (!o.checkpoint_dir.empty()) {
    fs::create_directories(o.checkpoint_dir);
    lock.emplace(o.checkpoint_dir);
    ckpt_path = fs::path(o.checkpoint_dir) / "checkpoint.safetensors";
  }
  if (o.resume) {
    KILN_CHECK(fs::exists(ckpt_path), "kiln train --resume: no checkpoint at ", ckpt_path.string());
    // The configuration first: another task's checkpoint should say so, not fail on its shapes.
    Checkpoint info = checkpoint_info(ckpt_path.string());
    auto made = [&](const std::string& k) {
      auto it = info.extra.find("config." + k);
      return it == info.extra.end() ? std::string("(none)") : it->second;
    };
    KILN_CHECK(made("task") == o.task, "kiln train --resume: the checkpoint in ", o.checkpoint_dir,
               " was made by task ", made("task"), ", this run is task ", o.task);
    for (const auto& [k, v] : config)
      KILN_CHECK(made(k) == v, "kiln train --resume: the checkpoint was made with ", k, " = ", made(k),
                 ", this run has ", v);
    Checkpoint ck = load(ckpt_path.string(), model, opt);
    step = ck.step;
    KILN_CHECK(step <= o.steps, "kiln train --resume: the checkpoint is at step ", step, ", beyond --steps ", o.steps);
    cur.sum = parse_double(ck.extra["interval.sum"], "interval.sum");
    cur.count = static_cast<int64_t>(parse_u64(ck.extra["interval.count"], "interval.count"));
    last_logged = parse_double(ck.extra["last_logged"], "last_logged");
    Generator& g = default_generator(kCPU);
    g.manual_seed(parse_u64(ck.extra["rng.seed"], "rng.seed"));
    g.set_offset(parse_u64(ck.extra["rng.offset"], "rng.offset"));
    if (!o.quiet) out << "resumed from " << ckpt_path.string() << " at step " << step << "\n";
  }
  s.start_step = step;

  auto save_checkpoint = [&](int64_t at) {
    std::map<std::string, std::string> extra;
    for (const auto& [k, v] : config) extra["config." + k] = v;
    extra["interval.sum"] = hexfloat(cur.sum);
    extra["interval.count"] = std::to_string(cur.count);
    extra["last_logged"] = hexfloat(last_logged);
    Generator& g = default_generator(kCPU);
    extra["rng.seed"] = std::to_string(g.initial_seed());
    extra["rng.offset"] = std::to_string(g.offset());
    save(ckpt_path.string(), model, opt, at, extra);
  };

  bool tty = isatty(fileno(stdout)) && &out == &std::cout;
  bool bar = o.progress_bar.value_or(tty) && !o.quiet;
  Progress progress(out, o.steps, step, task->samples_per_step(), bar, !bar && !o.quiet);
  // One training step; with --compile the whole step (forward, backward, AdamW) is one captured graph.
  std::function<Tensor(int64_t)> train_step = [&](int64_t at) {
    Tensor loss = task->loss_for_step(at);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  std::optional<Compiled<std::function<Tensor(int64_t)>>> compiled;
  if (o.compile) compiled.emplace(train_step, CompileOptions{.backend = o.backend});
  auto t0 = std::chrono::steady_clock::now();
  for (; step < o.steps; ++step) {
    set_lr(opt, task->lr_at(step));
    Tensor loss = compiled ? (*compiled)(step) : train_step(step);
    double l = loss.item<float>();
    KILN_CHECK(std::isfinite(l), "kiln train: the loss became ", l, " at step ", step + 1, " (try a smaller --lr)");
    cur.sum += l;
    cur.count += 1;
    progress.update(step + 1, cur.sum / static_cast<double>(cur.count));
    if ((step + 1) % o.log_every == 0) {
      last_logged = cur.sum / static_cast<double>(cur.count);
      progress.interval(step + 1, last_logged);
      cur = {};
    }
    if (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0 && step + 1 < o.steps) save_checkpoint(step + 1);
  }
  if (!ckpt_path.empty()) save_checkpoint(step);  // holds the open interval (Note [Exact resume])
  if (cur.count > 0) {                            // a last, shorter interval
    last_logged = cur.sum / static_cast<double>(cur.count);
    progress.interval(step, last_logged);
  }
  progress.finish();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.samples_per_second = progress.samples_per_second();
  s.final_loss = last_logged;

  model.eval();
  {
    NoGradGuard no_grad;
    task->finish(s, out);
  }
  return s;
}

std::string summary_json(const Summary& s) {
  nlohmann::json j = {{"task", s.task},
                      {"steps", s.steps},
                      {"start_step", s.start_step},
                      {"final_loss", s.final_loss},
                      {"seconds", s.seconds},
                      {"samples_per_second", s.samples_per_second},
                      {"parameters", s.parameters}};
  if (s.test_accuracy) j["test_accuracy"] = *s.test_accuracy;
  if (s.val_loss) j["val_loss"] = *s.val_loss;
  if (!s.sample.empty()) j["sample"] = s.sample;
  return j.dump();
}

}  // namespace kiln::train
