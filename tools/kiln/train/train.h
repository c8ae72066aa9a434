// `kiln train`: the built-in training tasks (digits, chars), shared by the CLI and the tests.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln::train {

struct Options {
  std::string task = "digits";  // "digits" or "chars"
  int64_t steps = 0;            // 0: the task's default
  int64_t batch = 0;            // 0: the task's default
  double lr = 0;                // 0: the task's default
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // 0: only at the end
  bool resume = false;
  int64_t log_every = 0;             // 0: the task's default
  std::string data_dir;              // empty: search (KILN_DATA_DIR, ./data, next to the binary)
  std::optional<bool> progress_bar;  // default: when stdout is a terminal
  bool json = false;
  bool quiet = false;                 // no per-interval lines (tests)
  bool compile = false;               // each training step runs through kiln::compile (whole-step capture)
  std::string backend = "aot_eager";  // the compile backend
};

struct Summary {
  std::string task;
  int64_t steps = 0;
  int64_t start_step = 0;  // > 0 when resumed
  double final_loss = 0;   // mean training loss of the last logged interval
  double seconds = 0;
  double samples_per_second = 0;
  std::optional<double> test_accuracy;  // digits
  std::optional<double> val_loss;       // chars
  std::string sample;                   // chars: generated text
  int64_t parameters = 0;
};

// A task owns its data and model; the loop in train.cpp owns optimizer, logging, checkpoints.
class Task {
 public:
  virtual ~Task() = default;
  virtual nn::Module& model() = 0;
  // Forward pass on the batch of `step` (a pure function of seed and step, so a resumed run
  // sees the same batches); returns the scalar loss.
  virtual Tensor loss_for_step(int64_t step) = 0;
  virtual int64_t samples_per_step() const = 0;
  virtual double lr_at(int64_t step) const = 0;  // never depends on the total step count
  virtual void finish(Summary& summary, std::ostream& out) = 0;
  // Everything that must match for a checkpoint to be resumable.
  virtual std::map<std::string, std::string> config() const = 0;
};

struct TaskDefaults {
  int64_t steps, batch, log_every;
  double lr;
};
TaskDefaults task_defaults(const std::string& task);

std::unique_ptr<Task> make_digits_task(const Options& opts, const std::string& data_dir);
std::unique_ptr<Task> make_chars_task(const Options& opts, const std::string& data_dir);

// Throws kiln::Error naming the option when one is out of range (the CLI maps it to exit code 2).
void validate(const Options& opts);
// Validates, then trains; throws kiln::Error when data or a checkpoint cannot be used.
Summary run(const Options& opts, std::ostream& out);
std::string summary_json(const Summary& s);

// Where the data files are: opts.data_dir, $KILN_DATA_DIR, ./data, or data/ beside the
// source tree the binary was built from.
std::string find_data_dir(const std::string& requested, const std::string& file);

}  // namespace kiln::train
