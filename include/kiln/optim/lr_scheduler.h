// Learning-rate schedulers, as torch.optim.lr_scheduler. A scheduler sets the "lr" option of
// every parameter group of its optimizer: at construction (epoch 0, e.g. LinearLR applies its
// start_factor) and at each step(). The first construction stores each group's lr as
// "initial_lr" (base_lrs). Schedulers use torch's recursive (chainable) forms, so they compose
// with other changes to "lr" exactly as in torch.
//
// state_dict() holds everything needed to resume exactly (last_epoch, step count, base_lrs,
// last lrs and the scheduler's settings, as torch's __dict__), as named numbers; lists are stored
// under "<name>.<index>" and nested schedulers (SequentialLR) under "schedulers.<index>.<key>".
// The schedulers keep a reference to the optimizer, which must outlive them.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

using SchedulerState = std::map<std::string, double>;

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch (or iteration) and sets each group's lr.
  virtual void step();
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *optimizer_; }
  const std::string& name() const { return name_; }

  virtual SchedulerState state_dict() const;
  // Restores what state_dict() saved; a missing key or a different number of parameter groups
  // is a kiln::Error naming it.
  virtual void load_state_dict(const SchedulerState& sd);

 protected:
  // Sets "initial_lr" (last_epoch == -1) or requires it (resuming), as torch's base __init__.
  LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch);
  struct NoBaseLrs {};
  LRScheduler(std::string name, Optimizer& optimizer, NoBaseLrs);

  // The first step, made by each derived constructor at its end (torch's base __init__ does it,
  // but a C++ base constructor cannot call the derived get_lr).
  void initial_step();
  // The lrs for last_epoch (just advanced), from the groups' current lrs (torch's get_lr).
  virtual std::vector<double> get_lr() = 0;
  // The lrs for last_epoch as a function of base_lrs, when the scheduler has one.
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }
  // torch's step(epoch): jumps to `epoch` (closed form when there is one); SequentialLR uses it.
  void step_to(int64_t epoch);
  // Undoes the epoch count of the step each scheduler made at construction (SequentialLR).
  virtual void undo_initial_step() { --last_epoch_; }
  // Settings saved besides the common fields.
  virtual void save_extra(SchedulerState&) const {}
  virtual void load_extra(const SchedulerState&) {}

  double group_lr(size_t i) const;
  size_t num_groups() const { return optimizer_->param_groups().size(); }
  void apply(const std::vector<double>& lrs);

  std::string name_;
  Optimizer* optimizer_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;

  friend class SequentialLR;
};

// lr = base_lr * gamma^(epoch / step_size) (integer division).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = base_lr * gamma^(number of milestones <= epoch); a repeated milestone counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr = base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed recursively as
// torch does (and continuing periodically past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5,
           int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr = base_lr * lr_lambda(epoch); one function for every group or one per group. The functions
// are not part of state_dict (as torch, which saves only callable objects).
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch = -1);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

struct OneCycleLROptions {
  int64_t total_steps = 0;  // or epochs * steps_per_epoch when 0
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // "cos" or "linear"
  bool cycle_momentum = true;           // cycles "momentum" (SGD, RMSprop) or "beta1" (Adam, AdamW)
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
  int64_t last_epoch = -1;
};

// The 1cycle policy (torch.optim.lr_scheduler.OneCycleLR), stepped once per batch: lr rises
// from max_lr / div_factor to max_lr over pct_start of the steps, then falls to
// initial_lr / final_div_factor (three_phase: back to initial_lr first); momentum moves inversely.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleLROptions options);
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, OneCycleLROptions options);

 protected:
  std::vector<double> get_lr() override;
  void save_extra(SchedulerState& sd) const override;
  void load_extra(const SchedulerState& sd) override;

 private:
  struct Phase {
    double end_step;
    const char* start_lr;  // group option names
    const char* end_lr;
    const char* start_momentum;
    const char* end_momentum;
  };
  void make_phases();
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  double pct_start_;
  bool anneal_cos_;
  bool cycle_momentum_;
  bool use_beta1_ = false;
  bool three_phase_;
  std::vector<Phase> phases_;
};

// Runs schedulers one after another: schedulers[i] from milestones[i-1] on (restarting its count
// at 0 there), as torch.optim.lr_scheduler.SequentialLR. The schedulers must use `optimizer`.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);
  void step() override;
  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& sd) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override;
  void undo_initial_step() override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

struct ReduceLROnPlateauOptions {
  std::string mode = "min";  // "min": lower metrics are better; "max": higher
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  // "rel" or "abs"
  int64_t cooldown = 0;
  std::vector<double> min_lr = {0.0};  // one value, or one per parameter group
  double eps = 1e-8;
};

// Multiplies each group's lr by factor (not below min_lr) when the metric given to step() has
// not improved for more than `patience` steps, then waits `cooldown` steps, as torch.
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  Optimizer& optimizer() const { return *optimizer_; }

  SchedulerState state_dict() const;
  void load_state_dict(const SchedulerState& sd);

 private:
  bool is_better(double a, double best) const;

  Optimizer* optimizer_;
  bool mode_max_;
  double factor_;
  int64_t patience_;
  double threshold_;
  bool threshold_abs_;
  int64_t cooldown_;
  std::vector<double> min_lrs_;
  double eps_;
  int64_t last_epoch_ = 0;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace kiln::optim
