// kiln bench zoo --compiled: each BENCHMARKS.md workload eager and through kiln::compile, in
// one run (steps alternate, so both see the same machine), for the training step and for
// inference (a forward under no_grad).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kiln/compile.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/memory.h"
#include "kiln/optim.h"
#include "kiln/parallel.h"
#include "models/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/gpu_peaks.h"
#include "tools/kiln/model_table.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double round_to(double x, int digits) {
  const double s = std::pow(10.0, digits);
  return std::nearbyint(x * s) / s;
}

// Phases: "train" compiles the forward and loss (the backward is compiled ahead of time with
// them; the optimizer step runs eagerly, as torch.compile of a model does); "step" compiles the
// whole training step, forward, backward and AdamW, into one graph (Note [Writes are ops]);
// "infer" compiles a forward under no_grad.
nlohmann::json run_phase(const std::string& name, const std::string& phase, int iters, const std::string& backend,
                         Device dev, bool profile) {
  const bool train = phase != "infer", whole = phase == "step";
  // Two copies with the same initial parameters: eager and compiled each train their own, at
  // BENCHMARKS.md's sizes for the device.
  models::Workload we = models::make_workload(name, dev, /*cpu_sizes=*/dev.is_cpu(), 0);
  models::Workload wc = models::make_workload(name, dev, /*cpu_sizes=*/dev.is_cpu(), 0);
  // On a GPU a step's time is until its kernels finish.
  auto sync = [dev] {
    if (dev.is_cuda()) cuda::synchronize();
  };
  optim::AdamW oe(we.module->parameters(), {.lr = 1e-4}), oc(wc.module->parameters(), {.lr = 1e-4});
  auto body = [&] {
    if (!whole) return wc.step_loss();
    Tensor loss = wc.step_loss();
    loss.backward();
    oc.step();
    oc.zero_grad(true);
    return loss;
  };
  // The timed function waits for its code on the first call (cold_s is the compiler's time);
  // background compilation is measured on its own below.
  auto fwd = compile(body, {.backend = backend, .background = false});
  auto eager_step = [&] {
    Tensor loss;
    if (!train) {
      NoGradGuard no_grad;
      loss = we.step_loss();
    } else {
      loss = we.step_loss();
      loss.backward();
      oe.step();
      oe.zero_grad(true);
    }
    sync();
    return loss;
  };
  // One step of the compiled copy through compiled function f (the phase decides what it covers).
  auto step_with = [&](auto& f) {
    if (!train) {
      NoGradGuard no_grad;
      return f();
    }
    if (whole) return f();
    Tensor loss = f();
    loss.backward();
    oc.step();
    oc.zero_grad(true);
    return loss;
  };
  auto compiled_step = [&] {
    Tensor l = step_with(fwd);
    sync();
    return l;
  };
  // First steps: the same parameters and random numbers, so the losses must agree (accuracy rule).
  manual_seed(1);
  auto t0 = Clock::now();
  Tensor lc = compiled_step();
  const double first_s = ms_since(t0) / 1000;
  const double cold_s = fwd.stats().compile_ms / 1000;
  manual_seed(1);
  t0 = Clock::now();
  Tensor le = eager_step();
  const double eager_first_s = ms_since(t0) / 1000;
  const double a = lc.item<double>(), b = le.item<double>();
  const bool accurate = std::abs(a - b) <= 1e-4 * (1 + std::abs(b));
  for (int i = 0; i < 2; ++i) {
    eager_step();
    compiled_step();
  }
  std::vector<double> te, tc;
  for (int i = 0; i < iters; ++i) {
    auto t = Clock::now();
    eager_step();
    te.push_back(ms_since(t));
    t = Clock::now();
    compiled_step();
    tc.push_back(ms_since(t));
  }
  // Peak memory of one steady step of each: the most the CPU allocator held beyond what was
  // live before the step (both models' parameters and optimizer states are live throughout,
  // so the peak above that is the step's own: activations, gradients, temporaries). The
  // steps alternate, so the peak is reset before each.
  auto step_peak_mb = [dev](const auto& step) {
    reset_peak_memory_stats(dev);
    const size_t before = memory_allocated(dev);
    (void)step();
    return static_cast<double>(max_memory_allocated(dev) - before) / (1 << 20);
  };
  const double peak_eager = step_peak_mb(eager_step);
  const double peak_compiled = step_peak_mb(compiled_step);
  // --profile: each kernel's GPU time over 3 steps of each, eager's ops and the compiled
  // graph's (its generated kernels by their ops, "gen ...", and its extern calls by op).
  if (profile && dev.is_cuda()) {
    for (int which = 0; which < 2; ++which) {
      cuda::profiler_start();
      for (int i = 0; i < 3; ++i) (void)(which ? compiled_step() : eager_step());
      std::fprintf(stderr, "kiln bench zoo --compiled --profile: %s %s, 3 %s steps\n%s", name.c_str(), phase.c_str(),
                   which ? "compiled" : "eager", cuda::profiler_stop().c_str());
    }
  }
  // The same compiled step in mode "reduce-overhead" (an inductor graph keeps its memory
  // plan's arena across calls, Note [Memory planning]); it trains the compiled copy further.
  auto fro = compile(body, {.mode = "reduce-overhead", .backend = backend, .background = false});
  for (int i = 0; i < 3; ++i) (void)step_with(fro);
  sync();
  std::vector<double> tr;
  for (int i = 0; i < iters; ++i) {
    auto t = Clock::now();
    (void)step_with(fro);
    sync();
    tr.push_back(ms_since(t));
  }
  // Warm: a fresh compiled function after reset() finds the generated code on disk.
  const int graphs = fwd.stats().graphs_compiled;
  const size_t breaks = fwd.stats().breaks.size();
  compiler::reset();
  auto fresh = compile(body, {.backend = backend, .background = false});
  if (whole) {
    (void)fresh();
  } else if (train) {
    Tensor l = fresh();
    l.backward();
    oc.zero_grad(true);
  } else {
    NoGradGuard no_grad;
    (void)fresh();
  }
  const double warm_s = fresh.stats().compile_ms / 1000;
  // Time to the first step with background compilation (Note [Background compilation]), from a
  // cold cache of its own: the step runs eager kernels while the compiler works beside it.
  double first_bg_s = -1, ready_bg_s = -1;
  if (backend == "inductor") {
    const char* old = std::getenv("KILN_CACHE_DIR");
    const std::string saved = old ? old : "";
    char dir[] = "/tmp/kiln-bench-bg-XXXXXX";
    if (mkdtemp(dir)) {
      setenv("KILN_CACHE_DIR", dir, 1);
      compiler::reset();
      auto bg = compile(body, {.backend = backend});
      auto step = [&] { return step_with(bg); };
      t0 = Clock::now();
      step();
      sync();
      first_bg_s = ms_since(t0) / 1000;
      // Until the kernels run, or a minute (a graph without loop kernels never runs one; the
      // build thread reads the environment: restore it after).
      while (bg.stats().generated_kernel_runs == 0 && ms_since(t0) < 60e3) step();
      if (bg.stats().generated_kernel_runs > 0) ready_bg_s = ms_since(t0) / 1000;
      if (old)
        setenv("KILN_CACHE_DIR", saved.c_str(), 1);
      else
        unsetenv("KILN_CACHE_DIR");
      std::filesystem::remove_all(dir);
    }
  }
  const double eager_ms = median(te), compiled_ms = median(tc);
  const double ro_ms = median(tr);
  nlohmann::json r = {{"model", name},
          {"phase", phase},
          {"mode", "default"},
          {"backend", backend},
          {"eager_ms", round_to(eager_ms, 3)},
          {"compiled_ms", round_to(compiled_ms, 3)},
          {"reduce_overhead_ms", round_to(ro_ms, 3)},
          {"speedup", round_to(eager_ms / compiled_ms, 3)},
          {"compile_cold_s", round_to(cold_s, 3)},
          {"compile_warm_s", round_to(warm_s, 3)},
          {"first_step_s", round_to(first_s, 3)},
          {"first_step_background_s", first_bg_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(round_to(first_bg_s, 3))},
          {"background_ready_s", ready_bg_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(round_to(ready_bg_s, 3))},
          {"eager_first_step_s", round_to(eager_first_s, 3)},
          {"peak_mb_eager", round_to(peak_eager, 1)},
          {"peak_mb_compiled", round_to(peak_compiled, 1)},
          {"accuracy_pass", accurate},
          {"graphs", graphs},
          {"breaks", breaks}};
  // A second row for mode "reduce-overhead" (the same compiled function; on a GPU, CUDA graphs);
  // model FLOP utilization for the transformers' training phases on a GPU.
  nlohmann::json ro = {{"model", name},         {"phase", phase},
                       {"mode", "reduce-overhead"}, {"backend", backend},
                       {"eager_ms", round_to(eager_ms, 3)}, {"compiled_ms", round_to(ro_ms, 3)},
                       {"speedup", round_to(eager_ms / ro_ms, 3)}};
  if (dev.is_cuda() && train && name.rfind("gpt", 0) == 0) {
    int64_t params = 0;
    for (const Tensor& p : wc.module->parameters()) params += p.numel();
    const double flops =
        transformer_step_flops(static_cast<double>(params), static_cast<double>(wc.inputs[0].numel()));
    r["mfu"] = round_to(flops / (compiled_ms / 1000) / kPeakFp32Flops, 4);
    ro["mfu"] = round_to(flops / (ro_ms / 1000) / kPeakFp32Flops, 4);
  }
  return nlohmann::json::array({r, ro});
}

}  // namespace

int cmd_bench_zoo_compiled(const ZooOptions& o, const std::vector<std::string>& names) {
  const Device dev(o.device);
  std::printf("kiln %s %s threads=%d backend=%s (eager and compiled steps alternate; medians of %d)\n", version(),
              dev.str().c_str(), get_num_threads(), o.backend.c_str(), o.iters);
  std::vector<std::string> rows;
  std::vector<std::string> phases;
  for (size_t b = 0, e; b <= o.phases.size(); b = e + 1) {
    e = std::min(o.phases.find(',', b), o.phases.size());
    const std::string p = o.phases.substr(b, e - b);
    if (p.empty()) continue;
    if (p != "train" && p != "step" && p != "infer") {
      std::fprintf(stderr, "kiln bench zoo: unknown phase '%s' (train, step or infer)\n", p.c_str());
      return 2;
    }
    phases.push_back(p);
  }
  for (const std::string& n : names)
    for (const std::string& p : phases) rows.push_back(n + ":" + p);
  auto header = [] {
    std::printf("\n%-13s %-6s %10s %11s %8s %8s %8s %8s %8s %8s %8s %8s %9s %5s %6s %6s\n", "model", "phase",
                "eager_ms", "compiled_ms", "ro_ms", "speedup", "eager_mb", "comp_mb", "cold_s", "warm_s", "first_s",
                "bg_1st_s", "eag_1st_s", "acc", "graphs", "breaks");
  };
  auto row = [](const nlohmann::json& r) {
    if (r.value("mode", "default") != "default") return;  // the table shows it as ro_ms
    const std::string name = r["model"], phase = r.value("phase", "?");
    if (r.contains("error")) {
      std::printf("%-13s %-6s error: %s\n", name.c_str(), phase.c_str(), r["error"].get<std::string>().c_str());
      return;
    }
    const double bg = r["first_step_background_s"].is_null() ? -1.0 : r["first_step_background_s"].get<double>();
    std::printf("%-13s %-6s %10.2f %11.2f %8.2f %8.3f %8.1f %8.1f %8.2f %8.2f %8.2f %8.2f %9.2f %5s %6d %6d\n",
                name.c_str(), phase.c_str(), r["eager_ms"].get<double>(), r["compiled_ms"].get<double>(),
                r["reduce_overhead_ms"].get<double>(), r["speedup"].get<double>(), r["peak_mb_eager"].get<double>(),
                r["peak_mb_compiled"].get<double>(), r["compile_cold_s"].get<double>(),
                r["compile_warm_s"].get<double>(), r["first_step_s"].get<double>(), bg,
                r["eager_first_step_s"].get<double>(),
                r["accuracy_pass"].get<bool>() ? "ok" : "FAIL", r["graphs"].get<int>(), r["breaks"].get<int>());
  };
  return run_model_table(
      rows, o.json,
      [&](const std::string& key) {
        const size_t c = key.find(':');
        return run_phase(key.substr(0, c), key.substr(c + 1), o.iters, o.backend, dev, o.profile);
      },
      [](const std::string& key, const std::string& err) {
        const size_t c = key.find(':');
        return nlohmann::json{{"model", key.substr(0, c)}, {"phase", key.substr(c + 1)}, {"error", err}};
      },
      header, row);
}

}  // namespace kiln::cli
