// kiln bench compile: what capture and AOT autograd cost and save on each zoo model (CPU sizes):
// recording time, graphs, breaks, cold capture, ops before and after decomposition, the
// partition's saved bytes, and the aot_eager training step against eager, in one run.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "kiln/parallel.h"
#include "models/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/model_table.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double round_to(double x, int digits) {
  const double s = std::pow(10.0, digits);
  return std::nearbyint(x * s) / s;
}

// The accuracy rule's gradient check after one step (BENCHMARKS.md, as PyTorch's harness:
// allclose with atol = rtol = 1e-3). Gradients that are exactly zero in exact arithmetic (a
// bias followed by batch norm) hold only rounding noise, which an absolute tolerance absorbs.
// Evicts the caches: writes then reads a buffer four times the last-level cache (at least
// 64 MiB, where sysconf does not know it), so what a recording touches next (its code, the
// graph it follows, the tensors' metadata) comes from memory, as after a heavy training step.
volatile unsigned sweep_sink = 0;
void sweep_caches() {
  static std::vector<unsigned char> buf = [] {
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return std::vector<unsigned char>(std::max<size_t>(size_t{64} << 20, 4 * static_cast<size_t>(std::max(llc, 0L))));
  }();
  static unsigned char round = 0;
  ++round;
  for (size_t i = 0; i < buf.size(); i += 64) buf[i] = static_cast<unsigned char>(buf[i] + round);
  unsigned sum = 0;
  for (size_t i = 0; i < buf.size(); i += 64) sum += buf[i];
  sweep_sink = sweep_sink + sum;  // the reads are kept
}

// Recording's cost of one forward call of `fwd` (µs per recorded op); the loss is dropped.
template <class F>
double record_us_per_op(F& fwd) {
  (void)fwd();
  const auto& s = fwd.stats();
  return s.last_call_ops ? (s.last_call_us - s.last_run_us) / static_cast<double>(s.last_call_ops) : 0;
}

bool grads_match(const nn::Module& a, const nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].grad().defined() != pb[i].grad().defined()) return false;
    if (!pa[i].grad().defined()) continue;
    auto x = pa[i].grad().to_vector<double>(), y = pb[i].grad().to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k)
      if (!(std::abs(x[k] - y[k]) <= 1e-3 + 1e-3 * std::abs(y[k]))) return false;
  }
  return true;
}

nlohmann::json run_one(const std::string& name, int iters, bool cold) {
  // Two copies from one seed: eager, and the forward+loss compiled with aot_eager.
  models::Workload we = models::make_workload(name, kCPU, /*cpu_sizes=*/true);
  models::Workload wc = models::make_workload(name, kCPU, /*cpu_sizes=*/true);
  optim::AdamW opt_e(we.module->parameters(), {.lr = 1e-4});
  optim::AdamW opt_c(wc.module->parameters(), {.lr = 1e-4});
  auto fwd = compile([&] { return wc.step_loss(); }, {.backend = "aot_eager"});
  auto eager_step = [&](bool step) {
    Tensor loss = we.step_loss();
    loss.backward();
    if (step) opt_e.step();
    return loss;
  };
  auto compiled_step = [&](bool step) {
    Tensor loss = fwd();
    loss.backward();
    if (step) opt_c.step();
    return loss;
  };
  // One step without the update: losses and gradients against eager (the accuracy rule).
  // Both draw the same random numbers (dropout): the compiled graph reproduces eager's.
  manual_seed(1);
  Tensor lc = compiled_step(false);
  // Cold capture: the first call's recording plus compiling its graphs (not running them).
  const double cold_ms = (fwd.stats().last_call_us - fwd.stats().last_run_us) / 1000 + fwd.stats().compile_ms;
  manual_seed(1);
  Tensor le = eager_step(false);
  const double dl = std::abs(lc.item<double>() - le.item<double>());
  const bool accurate = dl <= 1e-4 * (1 + std::abs(le.item<double>())) && grads_match(*wc.module, *we.module);
  opt_e.step();
  opt_c.step();
  opt_e.zero_grad(true);
  opt_c.zero_grad(true);
  for (int i = 0; i < 2; ++i) {
    eager_step(true);
    opt_e.zero_grad(true);
    compiled_step(true);
    opt_c.zero_grad(true);
  }
  std::vector<double> te, tc, rec_call, rec_op;
  for (int i = 0; i < iters; ++i) {
    auto t = Clock::now();
    eager_step(true);
    opt_e.zero_grad(true);
    te.push_back(ms_since(t));
    t = Clock::now();
    compiled_step(true);
    opt_c.zero_grad(true);
    tc.push_back(ms_since(t));
    const auto& s = fwd.stats();
    const double record_us = s.last_call_us - s.last_run_us;
    rec_call.push_back(record_us);
    rec_op.push_back(s.last_call_ops ? record_us / static_cast<double>(s.last_call_ops) : 0);
  }
  // --cold: recording alone, warm (right after a call that recorded the same code) and cold
  // (after a cache sweep). The figure in the step above is in between: an optimizer step and
  // zero_grad run before each recording.
  std::vector<double> rec_warm, rec_cold;
  for (int i = 0; cold && i < iters; ++i) {
    (void)record_us_per_op(fwd);
    rec_warm.push_back(record_us_per_op(fwd));
    sweep_caches();
    rec_cold.push_back(record_us_per_op(fwd));
  }
  // assume_pure: the guards of a replayed call (argument metadata, every captured tensor).
  auto pure = compile([&] { return wc.step_loss(); }, {.backend = "aot_eager", .assume_pure = true});
  std::vector<double> guard;
  {
    NoGradGuard no_grad;  // a forward only: the guards are what is measured
    for (int i = 0; i < 3 + iters; ++i) {
      (void)pure();
      if (pure.stats().pure_replays > 0) guard.push_back(pure.stats().last_guard_us);
    }
  }
  const auto& s = fwd.stats();
  size_t ops = 0, prim_ops = 0, saved = 0, saveall = 0;
  for (size_t n : s.ops_per_graph) ops += n;
  for (size_t n : s.prim_ops_per_graph) prim_ops += n;
  for (size_t n : s.saved_bytes) saved += n;
  for (size_t n : s.saveall_bytes) saveall += n;
  const double eager_ms = median(te), aot_ms = median(tc);
  nlohmann::json r = {
      {"model", name},
      {"record_us_per_op", round_to(median(rec_op), 3)},
      {"record_us_per_call", round_to(median(rec_call), 1)},
      {"guard_us", guard.empty() ? nlohmann::json(nullptr) : nlohmann::json(round_to(median(guard), 2))},
      {"graphs", s.graphs_compiled},
      {"breaks", s.breaks.size()},
      {"capture_ms", round_to(cold_ms, 1)},
      {"ops", ops},
      {"prim_ops", prim_ops},
      {"saved_bytes", saved},
      {"saveall_bytes", saveall},
      {"eager_ms", round_to(eager_ms, 2)},
      {"aot_eager_ms", round_to(aot_ms, 2)},
      {"accuracy_pass", accurate}};
  if (cold) {
    r["record_us_per_op_warm"] = round_to(median(rec_warm), 3);
    r["record_us_per_op_cold"] = round_to(median(rec_cold), 3);
  }
  return r;
}

}  // namespace

int cmd_bench_compile(const ZooOptions& o) {
  const std::vector<std::string> names = validate_zoo(o);
  std::printf("kiln %s cpu threads=%d: capture and AOT autograd (aot_eager) per zoo model\n", version(),
              get_num_threads());
  auto header = [&] {
    std::printf("\n%-13s %8s %9s %8s %6s %6s %9s %6s %8s %10s %10s %9s %9s %7s %5s", "model", "rec_us/op",
                "rec_ms/call", "guard_us", "graphs", "breaks", "capture_ms", "ops", "prim_ops", "saved_MB",
                "saveall_MB", "eager_ms", "aot_ms", "ratio", "acc");
    // --cold: recording's µs/op warm and after a cache sweep.
    std::printf(o.cold ? " %9s %9s\n" : "\n", "rec_warm", "rec_cold");
  };
  auto row = [&](const nlohmann::json& r) {
    const std::string name = r["model"];
    if (r.contains("error")) {
      std::printf("%-13s error: %s\n", name.c_str(), r["error"].get<std::string>().c_str());
      return;
    }
    // No guard figure where assume_pure always re-records (random ops, breaks): "-".
    char guard[16] = "       -";
    if (!r["guard_us"].is_null()) std::snprintf(guard, sizeof guard, "%8.2f", r["guard_us"].get<double>());
    std::printf("%-13s %8.3f %11.2f %s %6d %6d %10.1f %6zu %8zu %10.2f %10.2f %9.2f %9.2f %7.3f %5s", name.c_str(),
                r["record_us_per_op"].get<double>(), r["record_us_per_call"].get<double>() / 1000, guard,
                r["graphs"].get<int>(), r["breaks"].get<int>(), r["capture_ms"].get<double>(), r["ops"].get<size_t>(),
                r["prim_ops"].get<size_t>(), r["saved_bytes"].get<size_t>() / 1e6,
                r["saveall_bytes"].get<size_t>() / 1e6, r["eager_ms"].get<double>(), r["aot_eager_ms"].get<double>(),
                r["eager_ms"].get<double>() / r["aot_eager_ms"].get<double>(),
                r["accuracy_pass"].get<bool>() ? "yes" : "NO");
    if (o.cold)
      std::printf(" %9.3f %9.3f", r["record_us_per_op_warm"].get<double>(), r["record_us_per_op_cold"].get<double>());
    std::printf("\n");
  };
  return run_model_table(
      names, o.json, [&](const std::string& name) { return run_one(name, o.iters, o.cold); },
      [](const std::string& name, const std::string& err) {
        return nlohmann::json{{"model", name}, {"error", err}};
      },
      header, row);
}

}  // namespace kiln::cli
