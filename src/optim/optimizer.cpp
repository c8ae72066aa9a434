// optim::Optimizer: parameter groups, per-parameter state, zero_grad and
// state_dict / load_state_dict shared by every optimizer.
#include "kiln/optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "core/tensor_impl.h"
#include "kiln/autograd.h"

namespace kiln::optim {

double ParamGroup::get(const std::string& key) const {
  auto it = options.find(key);
  KILN_CHECK(it != options.end(), "optim: parameter group has no option '", key, "'");
  return it->second;
}

namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "nothing" : out;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, std::map<std::string, double> defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  size_t count = 0;
  for (const ParamGroup& g : groups) count += g.params.size();
  KILN_CHECK(count > 0, name_, ": optimizer got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  std::set<const TensorImpl*> seen;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) seen.insert(p.unsafe_impl());
  std::set<const TensorImpl*> mine;
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK(p.defined(), name_, ": parameter ", i, " of the group is undefined");
    KILN_CHECK(p.is_leaf(), name_, ": can't optimize a non-leaf Tensor (parameter ", i, " of the group)");
    KILN_CHECK(p.is_floating_point(), name_, ": can only optimize floating-point tensors, but parameter ", i,
               " of the group has dtype ", p.dtype());
    KILN_CHECK(mine.insert(p.unsafe_impl()).second, name_, ": parameter ", i, " appears twice in the parameter group");
    KILN_CHECK(!seen.count(p.unsafe_impl()), name_, ": some parameters appear in more than one parameter group");
  }
  for (const auto& [k, v] : defaults_) group.options.emplace(k, v);  // keeps the group's own values
  groups_.push_back(std::move(group));
}

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    EnableGradGuard grad;
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        NoGradGuard no_grad;
        Tensor& grad = p.mutable_grad();
        if (grad.grad_fn()) grad.detach_();  // a graph made with create_graph
        grad.zero_();
      }
    }
}

StateDict& Optimizer::state(const Tensor& param) { return state_[param.unsafe_impl()]; }

const StateDict* Optimizer::find_state(const Tensor& param) const {
  auto it = state_.find(param.unsafe_impl());
  return it == state_.end() ? nullptr : &it->second;
}

Tensor Optimizer::state_or_none(const Tensor& param, const std::string& key) const {
  const StateDict* s = find_state(param);
  const Tensor* t = s ? s->find(key) : nullptr;
  return t ? *t : Tensor();
}

Optimizer::GroupGrads Optimizer::with_grads(const ParamGroup& group) const {
  GroupGrads out;
  for (const Tensor& p : group.params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    KILN_CHECK(g.sizes() == p.sizes() && g.dtype() == p.dtype() && g.device() == p.device(), name_,
               ": a gradient of shape ", shape_str(g.sizes()), ", dtype ", g.dtype(), " on ", g.device(),
               " does not match its parameter (", shape_str(p.sizes()), ", ", p.dtype(), ", ", p.device(), ")");
    out.params.push_back(p);
    out.grads.push_back(g);
  }
  return out;
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  int64_t index = 0;
  for (const ParamGroup& g : groups_) {
    sd.param_groups.push_back(g.options);
    std::vector<int64_t>& ids = sd.group_params.emplace_back();
    for (const Tensor& p : g.params) {
      ids.push_back(index);
      if (const StateDict* s = find_state(p))
        for (const auto& [k, v] : *s) sd.state.insert(std::to_string(index) + "." + k, v);
      ++index;
    }
  }
  return sd;
}

// Checks everything about `sd` that load_state_dict relies on; with `build`, also makes the
// state to install (copies on the parameters' devices and dtypes). Changes nothing either way.
std::map<const TensorImpl*, StateDict> Optimizer::prepare_state(const OptimizerStateDict& sd, bool build) const {
  const std::string what = name_ + ".load_state_dict";
  KILN_CHECK(sd.param_groups.size() == groups_.size(), what, ": loaded state dict has ", sd.param_groups.size(),
             " parameter groups, but the optimizer has ", groups_.size());
  KILN_CHECK(sd.group_params.size() == sd.param_groups.size(), what, ": loaded state dict lists parameters for ",
             sd.group_params.size(), " groups but options for ", sd.param_groups.size());
  // Saved parameter index -> this optimizer's parameter, by position (as torch).
  std::map<int64_t, const Tensor*> params;
  for (size_t g = 0; g < groups_.size(); ++g) {
    KILN_CHECK(sd.group_params[g].size() == groups_[g].params.size(), what, ": parameter group ", g, " has ",
               sd.group_params[g].size(), " parameters in the loaded state dict but ", groups_[g].params.size(),
               " in the optimizer");
    for (size_t k = 0; k < groups_[g].params.size(); ++k)
      KILN_CHECK(params.emplace(sd.group_params[g][k], &groups_[g].params[k]).second, what, ": parameter index ",
                 sd.group_params[g][k], " appears twice in the loaded state dict");
    // Values step() would use as they are: a corrupt file must not become a NaN learning rate.
    for (const auto& [k, v] : sd.param_groups[g]) {
      KILN_CHECK(std::isfinite(v), what, ": option '", k, "' of parameter group ", g, " is ", v);
      static const std::set<std::string> non_negative = {
          "lr", "eps", "weight_decay", "momentum", "dampening", "lr_decay", "initial_accumulator_value", "alpha"};
      KILN_CHECK(!non_negative.count(k) || v >= 0, what, ": option '", k, "' of parameter group ", g,
                 " must not be negative, got ", v);
      KILN_CHECK((k != "beta1" && k != "beta2") || (v >= 0 && v < 1), what, ": option '", k, "' of parameter group ", g,
                 " must be in [0, 1), got ", v);
    }
  }
  std::map<const TensorImpl*, StateDict> state;
  std::map<const TensorImpl*, std::pair<int64_t, std::vector<std::string>>> names;  // for the completeness check
  NoGradGuard no_grad;
  for (const auto& [key, value] : sd.state) {
    size_t dot = key.find('.');
    int64_t index = -1;
    const char* end = key.data() + (dot == std::string::npos ? key.size() : dot);
    auto [ptr, ec] = std::from_chars(key.data(), end, index);
    KILN_CHECK(dot != std::string::npos && dot + 1 < key.size() && ec == std::errc() && ptr == end, what,
               ": state key '", key, "' is not of the form '<parameter index>.<name>'");
    auto it = params.find(index);
    KILN_CHECK(it != params.end(), what, ": state key '", key, "' names parameter ", index,
               ", which no parameter group holds");
    const Tensor& p = *it->second;
    const std::string name = key.substr(dot + 1);
    KILN_CHECK(value.defined(), what, ": state '", key, "' is undefined");
    auto& [idx, seen] = names[p.unsafe_impl()];
    idx = index;
    seen.push_back(name);
    Tensor v;
    if (name == "step") {
      KILN_CHECK(value.numel() == 1, what, ": state '", key, "' should hold one number, got shape ",
                 shape_str(value.sizes()));
      if (value.has_storage()) {  // (a tracer has no value to check)
        double step = value.to(kCPU, kFloat64).reshape({}).item<double>();
        KILN_CHECK(std::isfinite(step) && step >= 0, what, ": state '", key, "' is ", step,
                   " (a step count must be finite and >= 0)");
      }
      if (build) v = value.reshape({}).to(kCPU, kFloat32, /*non_blocking=*/false, /*copy=*/true);
    } else {
      KILN_CHECK(value.sizes() == p.sizes(), what, ": state '", key, "' has shape ", shape_str(value.sizes()),
                 " but its parameter has shape ", shape_str(p.sizes()));
      if (build) v = value.to(p.device(), p.dtype(), /*non_blocking=*/false, /*copy=*/true);
    }
    if (build) state[p.unsafe_impl()].insert(name, v.detach());
  }
  // A parameter's state is all there or absent (not stepped yet): a partial one would fail in step().
  const std::vector<std::string> required = required_state();
  for (const auto& [impl, entry] : names) {
    const auto& [index, seen] = entry;
    for (const std::string& r : required)
      KILN_CHECK(std::find(seen.begin(), seen.end(), r) != seen.end(), what, ": the state of parameter ", index,
                 " lacks '", r, "' (", name_, " keeps ", join_names(required), " per parameter; the file has ",
                 join_names(seen), ")");
  }
  return state;
}

void Optimizer::check_state_dict(const OptimizerStateDict& sd) const { (void)prepare_state(sd, /*build=*/false); }

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  std::map<const TensorImpl*, StateDict> state = prepare_state(sd, /*build=*/true);
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].options = sd.param_groups[g];
    for (const auto& [k, v] : defaults_) groups_[g].options.emplace(k, v);  // options saved by an older kiln
  }
  state_ = std::move(state);
}

}  // namespace kiln::optim
