// kiln bench launch: the cost of one eager op on tiny tensors, where launching is all there is
// (issue 11: per-op overhead no higher than PyTorch's). Times a loop of `c = a + b` on one-element
// tensors and of the in-place `a.add_(b)`, synchronizing only at the end, as
//   python3 -c "import torch,time; a=torch.ones(1,device='cuda'); b=torch.ones(1,device='cuda'); ..."
// does in scripts/gpu-check; reports the median over repeats of the wall time per op, in µs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

int cmd_bench_launch(const LaunchOptions& opts) {
  const Device dev(opts.device);
  KILN_CHECK(!dev.is_cuda() || cuda::is_available(), "kiln bench launch: --device ", opts.device,
             ": no CUDA device");
  auto sync = [&] {
    if (dev.is_cuda()) cuda::synchronize();
  };
  Tensor a = ones({1}, TensorOptions(kFloat32).device(dev)), b = ones({1}, TensorOptions(kFloat32).device(dev));
  auto per_op_us = [&](auto&& op) {
    for (int i = 0; i < 100; ++i) op();  // warm-up: allocator pools, kernel modules
    sync();
    std::vector<double> us;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < opts.iters; ++i) op();
      sync();
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                   opts.iters);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  Tensor c;
  const double add_us = per_op_us([&] { c = a + b; });
  const double add_inplace_us = per_op_us([&] { a.add_(b); });
  if (opts.json) {
    nlohmann::json j{{"device", dev.str()}, {"iters", opts.iters}, {"add_us", add_us}, {"add_inplace_us", add_inplace_us}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("kiln bench launch on %s: c = a + b %.2f us/op, a.add_(b) %.2f us/op (one-element float32, %d ops, "
                "median of 5)\n",
                dev.str().c_str(), add_us, add_inplace_us, opts.iters);
  }
  return 0;
}

}  // namespace kiln::cli
