// Training checkpoints: a model's state_dict, an optimizer's state and the step, in one
// safetensors file (Note [Checkpoint layout]), written atomically (temp file + rename).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "kiln/nn/module.h"
#include "kiln/optim/optimizer.h"

namespace kiln {

struct Checkpoint {
  int64_t step = 0;
  // Strings the caller stored with save() (run configuration, data-loader position, RNG state...).
  std::map<std::string, std::string> extra;
};

void save(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
          const std::map<std::string, std::string>& extra = {});
void save(const std::string& path, const nn::Module& model, int64_t step = 0,
          const std::map<std::string, std::string>& extra = {});

// Restores the model (strict: every key must match) and, when given, the optimizer. A file that is
// not a kiln checkpoint, or a truncated/corrupt one, gives a kiln::Error naming the path.
Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer* optimizer = nullptr);
inline Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer& optimizer) {
  return load(path, model, &optimizer);
}

}  // namespace kiln
