// kiln bench memory: the bandwidth of the memory-bound eager ops a training step spends its
// elementwise time in (casts, bias adds, residual adds of mixed dtypes, bias gradients, the
// optimizer step), as GB/s of the bytes each must move and as a fraction of a plain
// device-to-device copy measured in the same run — the physical bound, not another library.
// Sizes are gpt2's at batch 8 x 1024 tokens (BENCHMARKS.md).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/optim/adamw.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {
namespace {

struct Case {
  std::string name;
  double bytes;  // read + written once each
  std::function<void()> run;
};

// Median milliseconds of one call, timed with events around `iters` calls.
double median_ms(const std::function<void()>& f, int iters) {
  for (int i = 0; i < 3; ++i) f();  // warm-up: allocator pools
  cuda::synchronize();
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) {
    cuda::Event a(true), b(true);
    a.record();
    for (int i = 0; i < iters; ++i) f();
    b.record();
    b.synchronize();
    ms.push_back(a.elapsed_time(b) / iters);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int cmd_bench_memory(const MemoryOptions& opts) {
  const Device dev(opts.device);
  KILN_CHECK(dev.is_cuda(), "kiln bench memory: --device ", opts.device, ": only cuda is measured");
  KILN_CHECK(cuda::is_available(), "kiln bench memory: --device ", opts.device, ": no CUDA device");
  auto on = [&](DType t) { return TensorOptions(t).device(dev); };
  const int64_t rows = 8192, d = 768, h = 3072;
  Tensor big32 = randn({rows, h}, on(kFloat32)), big16 = big32.to(kBFloat16);
  Tensor other16 = randn({rows, h}, on(kBFloat16)), bias16 = randn({h}, on(kBFloat16));
  Tensor res32 = randn({rows, d}, on(kFloat32)), branch16 = randn({rows, d}, on(kBFloat16));
  const double n = static_cast<double>(rows * h), nd = static_cast<double>(rows * d);
  Tensor sink;

  // AdamW over gpt2's parameter shapes: 12 layers of 4 weights and 4 biases plus 2 norms each,
  // embeddings and the final norm (124M floats).
  std::vector<Tensor> params;
  auto param = [&](std::vector<int64_t> s) {
    Tensor p = randn(s, on(kFloat32)).requires_grad_(true);
    p.mutable_grad() = randn(s, on(kFloat32));
    params.push_back(p);
  };
  param({50304, d});
  param({1024, d});
  for (int l = 0; l < 12; ++l) {
    param({3 * d, d}), param({3 * d}), param({d, d}), param({d}), param({h, d}), param({h}), param({d, h}), param({d});
    param({d}), param({d}), param({d}), param({d});
  }
  param({d}), param({d});
  double pn = 0;
  for (const Tensor& p : params) pn += static_cast<double>(p.numel());
  optim::AdamW opt(params, optim::AdamWOptions{.lr = 1e-4});

  std::vector<Case> cases = {
      {"clone float32 (the copy bound)", n * 8, [&] { sink = big32.clone(); }},
      {"to bfloat16 from float32", n * 6, [&] { sink = big32.to(kBFloat16); }},
      {"to float32 from bfloat16", n * 6, [&] { sink = big16.to(kFloat32); }},
      {"add bfloat16", n * 6, [&] { sink = big16 + other16; }},
      {"add float32", n * 12, [&] { sink = big32 + big32; }},
      {"add bfloat16 + bias [3072]", n * 4, [&] { sink = big16 + bias16; }},
      {"add float32 + bfloat16 (residual)", nd * 10, [&] { sink = res32 + branch16; }},
      {"sum bfloat16 over rows (bias grad)", n * 2, [&] { sink = big16.sum(0); }},
      {"mul_ float32 by a number", n * 8, [&] { big32.mul_(1.0); }},
      {"AdamW step, gpt2's 124M float32 params", pn * 4 * 7, [&] { opt.step(); }},
  };
  std::vector<double> ms;
  for (const Case& c : cases) ms.push_back(median_ms(c.run, c.name.starts_with("AdamW") ? 5 : 20));
  const double bound_gbs = cases[0].bytes / ms[0] / 1e6;
  nlohmann::json rows_json = nlohmann::json::array();
  if (!opts.json)
    std::printf("kiln bench memory on %s (median of 5; GB/s of the bytes each op must move)\n%-42s %9s %9s %9s\n",
                dev.str().c_str(), "op", "ms", "GB/s", "of copy");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double gbs = cases[i].bytes / ms[i] / 1e6;
    if (opts.json)
      rows_json.push_back({{"op", cases[i].name}, {"ms", ms[i]}, {"gbs", gbs}, {"of_copy", gbs / bound_gbs}});
    else
      std::printf("%-42s %9.3f %9.0f %9.2f\n", cases[i].name.c_str(), ms[i], gbs, gbs / bound_gbs);
  }
  if (opts.json) std::printf("%s\n", nlohmann::json{{"device", dev.str()}, {"rows", rows_json}}.dump().c_str());
  return 0;
}

}  // namespace kiln::cli
