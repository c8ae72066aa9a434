// kiln bench zoo: one eager training step of each BENCHMARKS.md workload, timed exactly as
// reference/torch_zoo.py's run() so that the two programs' figures can be divided.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "kiln/parallel.h"
#include "models/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/gpu_peaks.h"
#include "tools/kiln/model_table.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

// torch_zoo rounds with Python's round(x, n); the shortest repr of the result is what it prints.
double round_to(double x, int digits) {
  const double s = std::pow(10.0, digits);
  return std::nearbyint(x * s) / s;
}

// statistics.median: the mean of the two middle values for an even count.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void sync(Device d) {
  if (d.is_cuda()) cuda::synchronize();
}

// One model, as torch_zoo.run(name, prec, "eager", device, iters): on the CPU at BENCHMARKS.md's
// CPU sizes, on CUDA at the GPU sizes; bf16 is autocast around forward and loss, as torch_zoo's.
nlohmann::json run_one(const std::string& name, Device dev, const std::string& prec, int iters, bool profile) {
  models::Workload w = models::make_workload(name, dev, /*cpu_sizes=*/dev.is_cpu());
  optim::AdamW opt(w.module->parameters(), {.lr = 1e-4});
  const bool bf16 = prec == "bf16";
  auto step = [&] {
    Tensor loss;
    {
      autocast ac(dev, kBFloat16, /*enabled=*/bf16);
      loss = w.step_loss();
    }
    loss.backward();
    opt.step();
    opt.zero_grad(/*set_to_none=*/true);
    return loss;
  };
  sync(dev);
  if (dev.is_cuda()) cuda::reset_peak_memory_stats();
  // The first step includes the optimizer's state allocation and every cache warming up.
  auto t0 = Clock::now();
  const double l0 = step().item<float>();
  sync(dev);
  const double first = seconds_since(t0);
  for (int i = 0; i < 3; ++i) step();
  sync(dev);
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    auto t = Clock::now();
    step();
    sync(dev);
    times.push_back(seconds_since(t) * 1000);
  }
  const double ms = median(times);
  if (profile) {
    cuda::profiler_start();
    for (int i = 0; i < 3; ++i) step();
    std::fprintf(stderr, "kiln bench zoo --profile: %s %s, 3 steps on %s\n%s", name.c_str(), prec.c_str(),
                 dev.str().c_str(), cuda::profiler_stop().c_str());
  }
  const int64_t params = models::num_parameters(*w.module);
  nlohmann::json r = {{"model", name},
                      {"prec", prec},
                      {"precision", prec},
                      {"mode", "eager"},
                      {"device", dev.str()},
                      {"step_ms", round_to(ms, 3)},
                      {"eager_ms", round_to(ms, 3)},
                      {"first_s", round_to(first, 2)},
                      {"loss0", round_to(l0, 4)},
                      {"params_m", round_to(static_cast<double>(params) / 1e6, 2)}};
  if (dev.is_cuda()) {
    r["peak_mb"] = round_to(static_cast<double>(cuda::max_memory_allocated()) / (1 << 20), 1);
    // Model FLOP utilization of the transformers: 6 FLOPs per parameter per token (forward and
    // backward; attention's T^2 term left out), against the measured peak of the precision.
    if (name.rfind("gpt", 0) == 0) {
      const double tokens = static_cast<double>(w.inputs[0].numel());
      const double flops = transformer_step_flops(static_cast<double>(params), tokens);
      r["mfu"] = round_to(flops / (ms / 1000) / (bf16 ? kPeakBf16Flops : kPeakFp32Flops), 4);
    }
  }
  return r;
}

}  // namespace

std::vector<std::string> validate_zoo(const ZooOptions& o) {
  std::vector<std::string> out;
  std::stringstream ss(o.models);
  for (std::string name; std::getline(ss, name, ',');) {
    const auto& known = models::names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      KILN_FAIL("--models: unknown model '", name, "' (expected a comma-separated list of: ", list, ")");
    }
    out.push_back(name);
  }
  KILN_CHECK(!out.empty(), "--models: no model given");
  KILN_CHECK(o.iters >= 1, "--iters: must be at least 1, got ", o.iters);
  Device d(o.device);  // throws on a malformed device string
  KILN_CHECK(d.is_cpu() || d.is_cuda(), "--device ", o.device, ": expected cpu or cuda");
  if (d.is_cuda())
    KILN_CHECK(cuda::is_available(), "--device ", o.device, ": no CUDA device is available (kiln info says why)");
  KILN_CHECK(o.precision == "fp32" || o.precision == "bf16", "--precision: expected fp32 or bf16, got '", o.precision,
             "'");
  KILN_CHECK(!o.profile || d.is_cuda(), "--profile: times CUDA kernels; give --device cuda");
  KILN_CHECK(!o.compiled || o.precision == "fp32", "--compiled: not supported yet in bf16 (fp32 only)");
  return out;
}

int cmd_bench_zoo(const ZooOptions& o) {
  const std::vector<std::string> names = validate_zoo(o);
  if (o.compiled) return cmd_bench_zoo_compiled(o, names);
  // As torch_zoo: a header, one JSON line per model with --json, and the table at the end
  // (without --json the table's rows come as each model finishes).
  const Device dev(o.device);
  if (dev.is_cuda())
    std::printf("kiln %s %s\n", version(), cuda::get_device_properties().name.c_str());
  else
    std::printf("kiln %s cpu threads=%d blas=%s\n", version(), get_num_threads(), cpu_info("blas").c_str());
  auto table_header = [] {
    std::printf("\n%-13s %-5s %-6s %9s %8s %9s %9s %8s %6s\n", "model", "prec", "mode", "step_ms", "first_s", "loss0",
                "params_m", "peak_MB", "mfu");
  };
  auto table_row = [](const nlohmann::json& r) {
    const std::string name = r["model"], prec = r["prec"];
    if (r.contains("error")) {
      std::printf("%-13s %-5s %-6s error: %s\n", name.c_str(), prec.c_str(), "eager",
                  r["error"].get<std::string>().c_str());
      return;
    }
    std::printf("%-13s %-5s %-6s %9.2f %8.2f %9.4f %9.2f %8.1f %6.3f\n", name.c_str(), prec.c_str(), "eager",
                r["step_ms"].get<double>(), r["first_s"].get<double>(), r["loss0"].get<double>(),
                r["params_m"].get<double>(), r.value("peak_mb", std::nan("")), r.value("mfu", std::nan("")));
  };
  return run_model_table(
      names, o.json, [&](const std::string& name) { return run_one(name, dev, o.precision, o.iters, o.profile); },
      [&](const std::string& name, const std::string& err) {
        return nlohmann::json{{"model", name}, {"prec", o.precision}, {"precision", o.precision}, {"mode", "eager"},
                              {"error", err}};
      },
      table_header, table_row);
}

}  // namespace kiln::cli
