#pragma once
#include <string>
#include <vector>

namespace kiln::cli {

struct BenchOptions {
  int repeat = 11;
  bool json = false;
};

// kiln bench zoo: BENCHMARKS.md's training-step zoo, timed as reference/torch_zoo.py.
struct ZooOptions {
  std::string models = "mlp,gpt_nano,resnet18,mobilenet_v2,dlrm";  // gpt2 is opt-in: slow on a CPU
  int iters = 20;
  bool json = false;
  std::string device = "cpu";
  std::string precision = "fp32";    // "fp32" | "bf16" (autocast around forward and loss)
  bool compiled = false;             // also kiln::compile: eager vs compiled, train and inference
  std::string backend = "inductor";  // with --compiled
  std::string phases = "train,step,infer";  // with --compiled (bench_zoo_compiled.cpp)
  bool profile = false;              // CUDA: per-op GPU time of 3 more steps, on stderr
  bool cold = false;                 // bench compile: also recording warm and after a cache sweep
};

// kiln bench launch: per-op cost of tiny eager ops.
struct LaunchOptions {
  std::string device = "cuda";
  int iters = 10000;
  bool json = false;
};

// kiln bench memory: bandwidth of memory-bound CUDA ops against a device copy.
struct MemoryOptions {
  std::string device = "cuda";
  bool json = false;
};

// The CPU backend's answer for `key` in Backend::info() ("blas": "openblas" or "kiln"), "?" when it has none.
std::string cpu_info(const std::string& key);

int cmd_info(bool json);
int cmd_ops(bool json);
int cmd_bench_ops(const BenchOptions& opts);
// The model names of --models; throws kiln::Error on a usage problem (unknown model, --iters < 1,
// a device other than the CPU).
std::vector<std::string> validate_zoo(const ZooOptions& opts);
// Exit code 1 when a model failed (the others still ran and were reported).
int cmd_bench_zoo(const ZooOptions& opts);
int cmd_bench_zoo_compiled(const ZooOptions& opts, const std::vector<std::string>& names);
// kiln bench compile: capture and AOT autograd per zoo model (same options as bench zoo).
int cmd_bench_compile(const ZooOptions& opts);
int cmd_bench_launch(const LaunchOptions& opts);
int cmd_bench_memory(const MemoryOptions& opts);

}  // namespace kiln::cli
