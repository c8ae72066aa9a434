// Training checkpoints: a model's state_dict, an optimizer's state and the step, in one
// safetensors file (Note [Checkpoint layout]), written atomically (temp file + rename).
// kiln::load also reads plain state_dicts: a safetensors file without kiln's metadata (as
// safetensors.torch.save_file writes) and torch.save's .pt/.bin files.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/optim/optimizer.h"

namespace kiln {

struct Checkpoint {
  int64_t step = 0;  // 0 for a plain state_dict
  // Strings the caller stored with save() (run configuration, data-loader position, RNG state...).
  std::map<std::string, std::string> extra;
  // With LoadOptions::strict = false: the model keys the file lacked and the file keys (after the
  // prefix mapping) the model lacks, as torch's load_state_dict returns them.
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// How load() maps the keys of a file onto the model's state_dict keys.
struct LoadOptions {
  // As torch's load_state_dict(strict=True): every model key must be in the file and every file
  // key in the model. A shape or dtype mismatch is an error either way.
  bool strict = true;
  // Removed from the start of every file key that has it (as torch's
  // consume_prefix_in_state_dict_if_present: "module." from DataParallel); other keys are kept.
  std::string strip_prefix{};
  // Then put before every file key ("backbone." loads a backbone's weights into a larger model).
  std::string add_prefix{};
};

void save(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
          const std::map<std::string, std::string>& extra = {});
void save(const std::string& path, const nn::Module& model, int64_t step = 0,
          const std::map<std::string, std::string>& extra = {});

// Restores the model and, when given, the optimizer, from any of:
//  - a kiln checkpoint (save above);
//  - a plain safetensors state_dict (no kiln metadata; only the model can be restored);
//  - a torch.save'd state_dict (.pt/.bin, a zip archive; read by a restricted unpickler that
//    accepts only tensors, dicts, lists, tuples, numbers and strings, see kiln::pytorch).
// The format is told by the file's first bytes, not its name. Every key, shape and dtype is
// checked before anything changes: floating-point tensors convert to the model's dtype (as torch
// copies them), other dtypes must match. A file that cannot be used gives a kiln::Error naming
// the path and, where one is at fault, the key.
Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer* optimizer = nullptr,
                const LoadOptions& options = {});
inline Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                       const LoadOptions& options = {}) {
  return load(path, model, &optimizer, options);
}
inline Checkpoint load(const std::string& path, nn::Module& model, const LoadOptions& options) {
  return load(path, model, nullptr, options);
}

// The step and extra strings of a kiln checkpoint, from its header alone (no tensor is read or
// checked): to tell whether a checkpoint belongs to this run before loading it.
Checkpoint checkpoint_info(const std::string& path);

// An exclusive lock on a checkpoint directory, held while the object lives: a second trainer
// pointed at the same directory fails at once (naming the process that holds it) instead of the
// two overwriting each other's checkpoints. The lock is a flock on DIR/.kiln.lock, which the
// kernel releases when the holder exits or is killed, so it never goes stale. Taking it also
// removes the temp files of checkpoint writes that were killed midway (Note [Temp file names]).
class CheckpointLock {
 public:
  explicit CheckpointLock(const std::string& dir);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;
  const std::string& path() const { return path_; }
  int removed_temp_files() const { return removed_; }

 private:
  std::string path_;
  int fd_ = -1;
  int removed_ = 0;
};

}  // namespace kiln
