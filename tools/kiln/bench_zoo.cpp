// kiln bench zoo: one eager training step of each BENCHMARKS.md workload, timed exactly as
// reference/torch_zoo.py's run() so that the two programs' figures can be divided.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "kiln/parallel.h"
#include "models/zoo.h"
#include "tools/kiln/commands.h"
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

// One model, as torch_zoo.run(name, "fp32", "eager", "cpu", iters).
nlohmann::json run_one(const std::string& name, int iters) {
  models::Workload w = models::make_workload(name, kCPU, /*cpu_sizes=*/true);
  optim::AdamW opt(w.module->parameters(), {.lr = 1e-4});
  auto step = [&] {
    Tensor loss = w.step_loss();
    loss.backward();
    opt.step();
    opt.zero_grad(/*set_to_none=*/true);
    return loss;
  };
  // The first step includes the optimizer's state allocation and every cache warming up.
  auto t0 = Clock::now();
  const double l0 = step().item<float>();
  const double first = seconds_since(t0);
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    auto t = Clock::now();
    step();
    times.push_back(seconds_since(t) * 1000);
  }
  return {{"model", name},
          {"prec", "fp32"},
          {"mode", "eager"},
          {"step_ms", round_to(median(times), 3)},
          {"first_s", round_to(first, 2)},
          {"loss0", round_to(l0, 4)},
          {"params_m", round_to(static_cast<double>(models::num_parameters(*w.module)) / 1e6, 2)}};
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
  KILN_CHECK(d.is_cpu(), "--device ", o.device, ": not supported yet (kiln bench zoo runs on the CPU only)");
  return out;
}

int cmd_bench_zoo(const ZooOptions& o) {
  const std::vector<std::string> names = validate_zoo(o);
  if (o.compiled) return cmd_bench_zoo_compiled(o, names);
  // As torch_zoo: a header, one JSON line per model with --json, and the table at the end
  // (without --json the table's rows come as each model finishes).
  std::printf("kiln %s cpu threads=%d blas=%s\n", version(), get_num_threads(), cpu_info("blas").c_str());
  auto table_header = [] {
    std::printf("\n%-13s %-5s %-6s %9s %8s %9s %9s\n", "model", "prec", "mode", "step_ms", "first_s", "loss0",
                "params_m");
  };
  auto table_row = [](const nlohmann::json& r) {
    const std::string name = r["model"];
    if (r.contains("error")) {
      std::printf("%-13s %-5s %-6s error: %s\n", name.c_str(), "fp32", "eager", r["error"].get<std::string>().c_str());
      return;
    }
    std::printf("%-13s %-5s %-6s %9.2f %8.2f %9.4f %9.2f\n", name.c_str(), "fp32", "eager", r["step_ms"].get<double>(),
                r["first_s"].get<double>(), r["loss0"].get<double>(), r["params_m"].get<double>());
  };
  return run_model_table(
      names, o.json, [&](const std::string& name) { return run_one(name, o.iters); },
      [](const std::string& name, const std::string& err) {
        return nlohmann::json{{"model", name}, {"prec", "fp32"}, {"mode", "eager"}, {"error", err}};
      },
      table_header, table_row);
}

}  // namespace kiln::cli
