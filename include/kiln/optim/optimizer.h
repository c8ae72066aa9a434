// optim::Optimizer: the base of SGD, Adam, AdamW, RMSprop, Adagrad (as torch.optim.Optimizer).
//
// Hyperparameters live per parameter group as named numbers (torch's param_group dicts):
// "lr", "weight_decay", "momentum", "beta1", "beta2", "eps", ...; booleans are 0/1. Schedulers
// write "lr" (and "initial_lr", ...). Per-parameter state is a StateDict ("step", "exp_avg", ...)
// made on first use. step() reads the options of each group anew, skips parameters without a
// gradient, and updates parameters in place under NoGradGuard.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/state_dict.h"
#include "kiln/tensor.h"

namespace kiln::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  // Options for this group; the ones left out take the optimizer's defaults when added.
  std::map<std::string, double> options;

  ParamGroup() = default;
  ParamGroup(std::vector<Tensor> p, std::map<std::string, double> o = {})
      : params(std::move(p)), options(std::move(o)) {}
  double lr() const { return get("lr"); }
  void set_lr(double lr) { options["lr"] = lr; }
  double get(const std::string& key) const;  // throws naming the key when absent
  bool has(const std::string& key) const { return options.count(key) != 0; }
};

// torch's optimizer.state_dict(): per-parameter state under "<index>.<name>" (indices count the
// parameters across groups in order, as torch), plus each group's options and parameter indices.
// As in torch, the state tensors are the optimizer's own (not copies): clone to keep a snapshot.
struct OptimizerStateDict {
  StateDict state;
  std::vector<std::map<std::string, double>> param_groups;
  std::vector<std::vector<int64_t>> group_params;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  // Re-evaluates the loss with gradients (closure), steps, and returns the loss, as torch.
  Tensor step(const std::function<Tensor()>& closure);
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group; options it leaves out take the defaults. A parameter may be in one group only.
  void add_param_group(ParamGroup group);
  const std::map<std::string, double>& defaults() const { return defaults_; }
  const std::string& name() const { return name_; }

  OptimizerStateDict state_dict() const;
  // Checks group count and sizes, option values (finite; lr, eps, ... >= 0; betas in [0, 1)),
  // state keys, every state tensor's shape, each "step" (finite, >= 0) and that each parameter's
  // state is complete (all of required_state(), or none) before changing anything, then copies
  // the state (to the parameter's dtype and device; "step" stays a float32 CPU scalar) and takes
  // the saved group options. A clear kiln::Error names a mismatch.
  void load_state_dict(const OptimizerStateDict& sd);
  // The checks of load_state_dict alone: throws where it would, changes nothing (kiln::load checks
  // a checkpoint's model and optimizer parts before it changes either).
  void check_state_dict(const OptimizerStateDict& sd) const;

  // The state of one parameter (created empty on first use).
  StateDict& state(const Tensor& param);
  const StateDict* find_state(const Tensor& param) const;

 protected:
  // Validates `defaults` with the optimizer's own checks first (in the derived constructor).
  Optimizer(std::string name, std::vector<ParamGroup> groups, std::map<std::string, double> defaults);

  // One group's parameters that have a gradient, with their gradients (others are skipped).
  struct GroupGrads {
    std::vector<Tensor> params;
    std::vector<Tensor> grads;
  };
  GroupGrads with_grads(const ParamGroup& group) const;
  // A state tensor of `param` (undefined when absent).
  Tensor state_or_none(const Tensor& param, const std::string& key) const;
  // The state names every parameter that has state holds (made together on its first step);
  // load_state_dict refuses a parameter's state without all of them.
  virtual std::vector<std::string> required_state() const { return {}; }

 private:
  std::map<const TensorImpl*, StateDict> prepare_state(const OptimizerStateDict& sd, bool build) const;

  std::string name_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, double> defaults_;
  std::map<const TensorImpl*, StateDict> state_;
};

}  // namespace kiln::optim
