// kiln::GradScaler: loss scaling for float16 training, as torch.amp.GradScaler.
//
//   kiln::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     { kiln::autocast ac(kiln::Device("cuda"), kiln::kFloat16); loss = criterion(model->forward(x), y); }
//     scaler.scale(loss).backward();
//     scaler.step(opt);      // unscales the grads; skips the step when one is inf or NaN
//     scaler.update();       // halves the scale after a skipped step, doubles it after
//   }                        // growth_interval good ones
#pragma once
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "kiln/optim/optimizer.h"
#include "kiln/tensor.h"

namespace kiln {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (outputs unchanged when disabled).
  Tensor scale(const Tensor& outputs);
  // Divides the optimizer's gradients by the scale in place and records whether any of them is
  // inf or NaN. At most once per optimizer between update()s, and before step().
  void unscale_(optim::Optimizer& optimizer);
  // Unscales (unless unscale_ ran) and steps the optimizer unless a gradient was inf or NaN.
  // Returns whether it stepped.
  bool step(optim::Optimizer& optimizer);
  // The new scale: backoff_factor times it when a step was skipped, growth_factor times it after
  // growth_interval steps in a row without infs; new_scale (> 0) sets it outright.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const { return enabled_ ? scale_ : 1.0; }
  double get_growth_factor() const { return growth_factor_; }
  double get_backoff_factor() const { return backoff_factor_; }
  int64_t get_growth_interval() const { return growth_interval_; }
  bool is_enabled() const { return enabled_; }
  // torch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };
  double scale_;
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
  bool enabled_;
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

namespace amp {
using ::kiln::GradScaler;
using ::kiln::GradScalerOptions;
}  // namespace amp

}  // namespace kiln
