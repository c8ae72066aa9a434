// The model zoo: BENCHMARKS.md's six workloads by name, as torch_zoo.py's `workload`.
//
//   auto w = kiln::models::make_workload("resnet18", kiln::kCPU, /*cpu_sizes=*/true);
//   kiln::Tensor loss = w.loss(w.forward(w.inputs));
//   loss.backward();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::models {

// "mlp", "gpt_nano", "gpt2", "resnet18", "mobilenet_v2", "dlrm".
const std::vector<std::string>& names();

// A freshly initialised model (on the CPU, training mode); throws listing the names when unknown.
std::shared_ptr<nn::Module> create(const std::string& name);

// A model with its synthetic batch and loss. `forward` calls the model's own forward with the
// inputs (DLRM takes two); `loss` maps the output to a scalar, with the targets captured.
struct Workload {
  std::string name;
  std::shared_ptr<nn::Module> module;
  std::vector<Tensor> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> forward;
  std::function<Tensor(const Tensor&)> loss;
  int64_t batch_size = 0;

  Tensor step_loss() const { return loss(forward(inputs)); }  // forward + loss on the batch
};

// Seeds the default generators with `seed` first (as torch_zoo.py's torch.manual_seed(0)), so the
// same arguments give the same weights and batch. The model is moved to `device` and left in
// training mode. cpu_sizes uses BENCHMARKS.md's CPU batches (mlp 64, gpt_nano 4×128, gpt2 1×128,
// images 8×3×64×64, dlrm 256) instead of the GPU ones (512, 32×256, 8×1024, 64×3×224×224, 2048).
Workload make_workload(const std::string& name, Device device, bool cpu_sizes, uint64_t seed = 0);

// Elements in the model's parameters, each shared tensor counted once (torch's
// sum(p.numel() for p in m.parameters())).
int64_t num_parameters(const nn::Module& m);

}  // namespace kiln::models
