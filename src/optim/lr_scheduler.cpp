// Learning-rate schedulers: torch.optim.lr_scheduler's chainable forms, closed
// forms (SequentialLR's restarts) and state for exact resumption.
#include "kiln/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace kiln::optim {

namespace {
constexpr double kPi = std::numbers::pi;

void put_list(SchedulerState& sd, const std::string& key, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) sd[key + "." + std::to_string(i)] = v[i];
}
std::vector<double> get_list(const SchedulerState& sd, const std::string& key) {
  std::vector<double> v;
  for (auto it = sd.find(key + ".0"); it != sd.end(); it = sd.find(key + "." + std::to_string(v.size())))
    v.push_back(it->second);
  return v;
}
double get(const SchedulerState& sd, const std::string& key, const std::string& who) {
  auto it = sd.find(key);
  KILN_CHECK(it != sd.end(), who, ".load_state_dict: the state has no '", key, "'");
  return it->second;
}
// Python's floor modulo (non-negative for a positive divisor).
int64_t py_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }
}  // namespace

// ---- LRScheduler ----
LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch)
    : name_(std::move(name)), optimizer_(&optimizer), last_epoch_(last_epoch) {
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    if (last_epoch == -1)
      groups[i].options.emplace("initial_lr", groups[i].lr());  // kept when another scheduler set it
    else
      KILN_CHECK(groups[i].has("initial_lr"), name_, ": param 'initial_lr' is not specified in param_groups[", i,
                 "] when resuming an optimizer (last_epoch = ", last_epoch, ")");
    base_lrs_.push_back(groups[i].get("initial_lr"));
  }
}

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, NoBaseLrs)
    : name_(std::move(name)), optimizer_(&optimizer) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  auto closed = closed_form_lr();
  apply(closed ? *closed : get_lr());
}

double LRScheduler::group_lr(size_t i) const { return optimizer_->param_groups()[i].lr(); }

void LRScheduler::apply(const std::vector<double>& lrs) {
  auto& groups = optimizer_->param_groups();
  KILN_CHECK(lrs.size() == groups.size(), name_, ": got ", lrs.size(), " learning rates for ", groups.size(),
             " parameter groups (was a group added after the scheduler was made?)");
  last_lr_.clear();
  for (size_t i = 0; i < groups.size(); ++i) {
    groups[i].set_lr(lrs[i]);
    last_lr_.push_back(lrs[i]);
  }
}

SchedulerState LRScheduler::state_dict() const {
  SchedulerState sd{{"last_epoch", static_cast<double>(last_epoch_)},
                    {"_step_count", static_cast<double>(step_count_)}};
  put_list(sd, "base_lrs", base_lrs_);
  put_list(sd, "_last_lr", last_lr_);
  save_extra(sd);
  return sd;
}

void LRScheduler::load_state_dict(const SchedulerState& sd) {
  std::vector<double> base = get_list(sd, "base_lrs"), last = get_list(sd, "_last_lr");
  KILN_CHECK(base.size() == num_groups() && last.size() == num_groups(), name_, ".load_state_dict: the state has ",
             base.size(), " base_lrs and ", last.size(), " last lrs, but the optimizer has ", num_groups(),
             " parameter groups");
  const int64_t last_epoch = static_cast<int64_t>(get(sd, "last_epoch", name_));
  const int64_t step_count = static_cast<int64_t>(get(sd, "_step_count", name_));
  load_extra(sd);  // may throw: the common fields change only after it succeeds
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- StepLR ----
StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler("StepLR", optimizer, last_epoch), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}
std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs;
  const bool decay = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  for (size_t i = 0; i < num_groups(); ++i) lrs.push_back(decay ? group_lr(i) * gamma_ : group_lr(i));
  return lrs;
}
std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}
void StepLR::save_extra(SchedulerState& sd) const {
  sd["step_size"] = static_cast<double>(step_size_);
  sd["gamma"] = gamma_;
}
void StepLR::load_extra(const SchedulerState& sd) {
  step_size_ = static_cast<int64_t>(get(sd, "step_size", name_));
  gamma_ = get(sd, "gamma", name_);
}

// ---- MultiStepLR ----
MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma, int64_t last_epoch)
    : LRScheduler("MultiStepLR", optimizer, last_epoch), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}
std::vector<double> MultiStepLR::get_lr() {
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  std::vector<double> lrs;
  for (size_t i = 0; i < num_groups(); ++i)
    lrs.push_back(hits == 0 ? group_lr(i) : group_lr(i) * std::pow(gamma_, static_cast<double>(hits)));
  return lrs;
}
std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}
void MultiStepLR::save_extra(SchedulerState& sd) const {
  put_list(sd, "milestones", std::vector<double>(milestones_.begin(), milestones_.end()));
  sd["gamma"] = gamma_;
}
void MultiStepLR::load_extra(const SchedulerState& sd) {
  std::vector<double> m = get_list(sd, "milestones");
  gamma_ = get(sd, "gamma", name_);
  milestones_.assign(m.begin(), m.end());
}

// ---- ExponentialLR ----
ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch)
    : LRScheduler("ExponentialLR", optimizer, last_epoch), gamma_(gamma) {
  initial_step();
}
std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs;
  for (size_t i = 0; i < num_groups(); ++i) lrs.push_back(last_epoch_ == 0 ? group_lr(i) : group_lr(i) * gamma_);
  return lrs;
}
std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}
void ExponentialLR::save_extra(SchedulerState& sd) const { sd["gamma"] = gamma_; }
void ExponentialLR::load_extra(const SchedulerState& sd) { gamma_ = get(sd, "gamma", name_); }

// ---- CosineAnnealingLR ----
CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min, int64_t last_epoch)
    : LRScheduler("CosineAnnealingLR", optimizer, last_epoch), t_max_(T_max), eta_min_(eta_min) {
  KILN_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}
std::vector<double> CosineAnnealingLR::get_lr() {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (size_t i = 0; i < num_groups(); ++i) {
    const double lr = group_lr(i), base = base_lrs_[i];
    if (last_epoch_ == 0)
      lrs.push_back(lr);
    else if (step_count_ == 1 && last_epoch_ > 0)  // resumed at last_epoch > 0
      lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(e * kPi / T)) / 2);
    else if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0)  // the minimum: the ratio below is 0/0
      lrs.push_back(lr + (base - eta_min_) * (1 - std::cos(kPi / T)) / 2);
    else
      lrs.push_back((1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min_) + eta_min_);
  }
  return lrs;
}
std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * e / T)) / 2);
  return lrs;
}
void CosineAnnealingLR::save_extra(SchedulerState& sd) const {
  sd["T_max"] = static_cast<double>(t_max_);
  sd["eta_min"] = eta_min_;
}
void CosineAnnealingLR::load_extra(const SchedulerState& sd) {
  t_max_ = static_cast<int64_t>(get(sd, "T_max", name_));
  eta_min_ = get(sd, "eta_min", name_);
}

// ---- LinearLR ----
LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters,
                   int64_t last_epoch)
    : LRScheduler("LinearLR", optimizer, last_epoch),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  KILN_CHECK(start_factor > 0 && start_factor <= 1,
             "LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
             start_factor);
  KILN_CHECK(end_factor >= 0 && end_factor <= 1,
             "LinearLR: ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  KILN_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}
std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs;
  const double d = end_factor_ - start_factor_;
  for (size_t i = 0; i < num_groups(); ++i) {
    const double lr = group_lr(i);
    if (last_epoch_ == 0)
      lrs.push_back(lr * start_factor_);
    else if (last_epoch_ > total_iters_)
      lrs.push_back(lr);
    else
      lrs.push_back(lr * (1.0 + d / (static_cast<double>(total_iters_) * start_factor_ +
                                     static_cast<double>(last_epoch_ - 1) * d)));
  }
  return lrs;
}
std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double b : base_lrs_)
    lrs.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  return lrs;
}
void LinearLR::save_extra(SchedulerState& sd) const {
  sd["start_factor"] = start_factor_;
  sd["end_factor"] = end_factor_;
  sd["total_iters"] = static_cast<double>(total_iters_);
}
void LinearLR::load_extra(const SchedulerState& sd) {
  start_factor_ = get(sd, "start_factor", name_);
  end_factor_ = get(sd, "end_factor", name_);
  total_iters_ = static_cast<int64_t>(get(sd, "total_iters", name_));
}

// ---- LambdaLR ----
LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch)
    : LambdaLR(optimizer, std::vector<Lambda>(optimizer.param_groups().size(), lr_lambda), last_epoch) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch)
    : LRScheduler("LambdaLR", optimizer, last_epoch), lambdas_(std::move(lr_lambdas)) {
  KILN_CHECK(lambdas_.size() == num_groups(), "LambdaLR: expected ", num_groups(), " lr_lambdas, but got ",
             lambdas_.size());
  for (size_t i = 0; i < lambdas_.size(); ++i) KILN_CHECK(lambdas_[i], "LambdaLR: lr_lambda ", i, " is empty");
  initial_step();
}
std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t i = 0; i < num_groups(); ++i) lrs.push_back(base_lrs_[i] * lambdas_[i](last_epoch_));
  return lrs;
}

// ---- OneCycleLR ----
namespace {
int64_t one_cycle_total(const OneCycleLROptions& o) {
  if (o.total_steps != 0) {
    KILN_CHECK(o.total_steps > 0, "OneCycleLR: expected a positive total_steps, but got ", o.total_steps);
    return o.total_steps;
  }
  KILN_CHECK(o.epochs > 0 && o.steps_per_epoch > 0,
             "OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch), positive; got epochs ",
             o.epochs, ", steps_per_epoch ", o.steps_per_epoch);
  return o.epochs * o.steps_per_epoch;
}
// Writes the per-group options OneCycleLR works from before the base constructor reads "initial_lr".
Optimizer& one_cycle_prepare(Optimizer& optimizer, const std::vector<double>& max_lrs, const OneCycleLROptions& o) {
  auto& groups = optimizer.param_groups();
  KILN_CHECK(max_lrs.size() == 1 || max_lrs.size() == groups.size(), "OneCycleLR: expected ", groups.size(),
             " values for max_lr, got ", max_lrs.size());
  KILN_CHECK(o.pct_start >= 0 && o.pct_start <= 1, "OneCycleLR: expected a pct_start between 0 and 1, but got ",
             o.pct_start);
  KILN_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear",
             "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got '", o.anneal_strategy, "'");
  (void)one_cycle_total(o);
  const auto& d = optimizer.defaults();
  const bool use_beta1 = d.count("beta1") != 0;
  KILN_CHECK(!o.cycle_momentum || use_beta1 || d.count("momentum") != 0, "OneCycleLR: optimizer ", optimizer.name(),
             " must support momentum or beta1 with the cycle_momentum option enabled");
  if (o.last_epoch != -1) {
    for (size_t i = 0; i < groups.size(); ++i)
      for (const char* k : {"max_lr", "min_lr"})
        KILN_CHECK(groups[i].has(k), "OneCycleLR: param '", k, "' is not specified in param_groups[", i,
                   "] when resuming an optimizer (last_epoch = ", o.last_epoch, ")");
    return optimizer;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const double max_lr = max_lrs.size() == 1 ? max_lrs[0] : max_lrs[i];
    const double initial = max_lr / o.div_factor;
    groups[i].options["initial_lr"] = initial;
    groups[i].options["max_lr"] = max_lr;
    groups[i].options["min_lr"] = initial / o.final_div_factor;
    if (o.cycle_momentum) {
      groups[i].options[use_beta1 ? "beta1" : "momentum"] = o.max_momentum;
      groups[i].options["max_momentum"] = o.max_momentum;
      groups[i].options["base_momentum"] = o.base_momentum;
    }
  }
  return optimizer;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleLROptions options)
    : OneCycleLR(optimizer, std::vector<double>{max_lr}, std::move(options)) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, OneCycleLROptions o)
    : LRScheduler("OneCycleLR", one_cycle_prepare(optimizer, max_lrs, o), o.last_epoch),
      total_steps_(one_cycle_total(o)),
      pct_start_(o.pct_start),
      anneal_cos_(o.anneal_strategy == "cos"),
      cycle_momentum_(o.cycle_momentum),
      use_beta1_(optimizer.defaults().count("beta1") != 0),
      three_phase_(o.three_phase) {
  make_phases();
  initial_step();
}

void OneCycleLR::make_phases() {
  const double n = static_cast<double>(total_steps_);
  if (three_phase_)
    phases_ = {{pct_start_ * n - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * pct_start_ * n - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  else
    phases_ = {{pct_start_ * n - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_cos_) return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  KILN_CHECK(last_epoch_ <= total_steps_, "OneCycleLR: tried to step ", last_epoch_,
             " times; the specified number of total steps is ", total_steps_);
  const double step = static_cast<double>(last_epoch_);
  std::vector<double> lrs;
  for (ParamGroup& g : optimizer_->param_groups()) {
    double start = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (step <= p.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start) / (p.end_step - start);
        lr = anneal(g.get(p.start_lr), g.get(p.end_lr), pct);
        if (cycle_momentum_) momentum = anneal(g.get(p.start_momentum), g.get(p.end_momentum), pct);
        break;
      }
      start = p.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_) g.options[use_beta1_ ? "beta1" : "momentum"] = momentum;
  }
  return lrs;
}

void OneCycleLR::save_extra(SchedulerState& sd) const {
  sd["total_steps"] = static_cast<double>(total_steps_);
  sd["pct_start"] = pct_start_;
  sd["anneal_cos"] = anneal_cos_;
  sd["cycle_momentum"] = cycle_momentum_;
  sd["use_beta1"] = use_beta1_;
  sd["three_phase"] = three_phase_;
}
void OneCycleLR::load_extra(const SchedulerState& sd) {
  const int64_t total = static_cast<int64_t>(get(sd, "total_steps", name_));
  const double pct = get(sd, "pct_start", name_);
  const bool cos = get(sd, "anneal_cos", name_) != 0, cycle = get(sd, "cycle_momentum", name_) != 0;
  const bool beta1 = get(sd, "use_beta1", name_) != 0, three = get(sd, "three_phase", name_) != 0;
  total_steps_ = total;
  pct_start_ = pct;
  anneal_cos_ = cos;
  cycle_momentum_ = cycle;
  use_beta1_ = beta1;
  three_phase_ = three;
  make_phases();
}

// ---- SequentialLR ----
SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler("SequentialLR", optimizer, NoBaseLrs{}),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  KILN_CHECK(!schedulers_.empty(), "SequentialLR: expects at least one scheduler");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    KILN_CHECK(schedulers_[i], "SequentialLR: scheduler ", i, " is null");
    KILN_CHECK(&schedulers_[i]->optimizer() == &optimizer,
               "SequentialLR: expects all schedulers to belong to the same optimizer, but scheduler ", i, " (",
               schedulers_[i]->name(), ") uses another one");
  }
  KILN_CHECK(milestones_.size() + 1 == schedulers_.size(),
             "SequentialLR: expects the number of schedulers to be one more than the number of milestones, but got ",
             schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  last_epoch_ = last_epoch + 1;
  for (size_t i = 0; i < num_groups(); ++i) {
    ParamGroup& g = optimizer.param_groups()[i];
    g.set_lr(g.get("initial_lr"));  // undo what the schedulers' constructors did
    base_lrs_.push_back(g.get("initial_lr"));
  }
  for (auto& s : schedulers_) s->undo_initial_step();
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    s.step_to(0);
  else
    s.step();
  last_lr_ = s.get_last_lr();
}

std::vector<double> SequentialLR::get_lr() {
  KILN_FAIL("SequentialLR: not supported yet: a SequentialLR started at a milestone of another SequentialLR");
}

void SequentialLR::undo_initial_step() {
  for (auto& s : schedulers_) s->undo_initial_step();
}

SchedulerState SequentialLR::state_dict() const {
  SchedulerState sd{{"last_epoch", static_cast<double>(last_epoch_)}};
  put_list(sd, "_last_lr", last_lr_);
  put_list(sd, "milestones", std::vector<double>(milestones_.begin(), milestones_.end()));
  sd["num_schedulers"] = static_cast<double>(schedulers_.size());
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (const auto& [k, v] : schedulers_[i]->state_dict()) sd["schedulers." + std::to_string(i) + "." + k] = v;
  return sd;
}

void SequentialLR::load_state_dict(const SchedulerState& sd) {
  const size_t n = static_cast<size_t>(get(sd, "num_schedulers", name_));
  KILN_CHECK(n == schedulers_.size(), name_, ".load_state_dict: the state has ", n, " schedulers, but this one has ",
             schedulers_.size());
  std::vector<double> last = get_list(sd, "_last_lr"), m = get_list(sd, "milestones");
  KILN_CHECK(last.size() == num_groups(), name_, ".load_state_dict: the state has ", last.size(),
             " last lrs, but the optimizer has ", num_groups(), " parameter groups");
  KILN_CHECK(m.size() + 1 == n, name_, ".load_state_dict: the state has ", m.size(), " milestones for ", n,
             " schedulers");
  const int64_t last_epoch = static_cast<int64_t>(get(sd, "last_epoch", name_));
  for (size_t i = 0; i < n; ++i) {
    const std::string prefix = "schedulers." + std::to_string(i) + ".";
    SchedulerState sub;
    for (auto it = sd.lower_bound(prefix); it != sd.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      sub[it->first.substr(prefix.size())] = it->second;
    schedulers_[i]->load_state_dict(sub);
  }
  last_epoch_ = last_epoch;
  last_lr_ = std::move(last);
  milestones_.assign(m.begin(), m.end());
}

// ---- ReduceLROnPlateau ----
ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions o)
    : optimizer_(&optimizer),
      mode_max_(o.mode == "max"),
      factor_(o.factor),
      patience_(o.patience),
      threshold_(o.threshold),
      threshold_abs_(o.threshold_mode == "abs"),
      cooldown_(o.cooldown),
      eps_(o.eps) {
  KILN_CHECK(o.factor < 1.0, "ReduceLROnPlateau: factor should be < 1.0, got ", o.factor);
  KILN_CHECK(o.mode == "min" || o.mode == "max", "ReduceLROnPlateau: mode '", o.mode, "' is unknown (min or max)");
  KILN_CHECK(o.threshold_mode == "rel" || o.threshold_mode == "abs", "ReduceLROnPlateau: threshold mode '",
             o.threshold_mode, "' is unknown (rel or abs)");
  const size_t n = optimizer.param_groups().size();
  KILN_CHECK(o.min_lr.size() == 1 || o.min_lr.size() == n, "ReduceLROnPlateau: expected ", n, " min_lrs, got ",
             o.min_lr.size());
  min_lrs_ = o.min_lr.size() == 1 ? std::vector<double>(n, o.min_lr[0]) : o.min_lr;
  best_ = mode_max_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  for (const ParamGroup& g : optimizer.param_groups()) last_lr_.push_back(g.lr());
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (!mode_max_) return threshold_abs_ ? a < best - threshold_ : a < best * (1 - threshold_);
  return threshold_abs_ ? a > best + threshold_ : a > best * (threshold_ + 1);
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (in_cooldown()) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  auto& groups = optimizer_->param_groups();
  KILN_CHECK(groups.size() == min_lrs_.size(), "ReduceLROnPlateau: the optimizer has ", groups.size(),
             " parameter groups but ", min_lrs_.size(), " min_lrs (was a group added?)");
  if (num_bad_epochs_ > patience_) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const double old_lr = groups[i].lr(), new_lr = std::max(old_lr * factor_, min_lrs_[i]);
      if (old_lr - new_lr > eps_) groups[i].set_lr(new_lr);
    }
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const ParamGroup& g : groups) last_lr_.push_back(g.lr());
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  SchedulerState sd{{"last_epoch", static_cast<double>(last_epoch_)},
                    {"best", best_},
                    {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
                    {"cooldown_counter", static_cast<double>(cooldown_counter_)},
                    {"mode_max", mode_max_},
                    {"factor", factor_},
                    {"patience", static_cast<double>(patience_)},
                    {"threshold", threshold_},
                    {"threshold_abs", threshold_abs_},
                    {"cooldown", static_cast<double>(cooldown_)},
                    {"eps", eps_}};
  put_list(sd, "min_lrs", min_lrs_);
  put_list(sd, "_last_lr", last_lr_);
  return sd;
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& sd) {
  const std::string who = "ReduceLROnPlateau";
  std::vector<double> min_lrs = get_list(sd, "min_lrs"), last = get_list(sd, "_last_lr");
  const size_t n = optimizer_->param_groups().size();
  KILN_CHECK(min_lrs.size() == n && last.size() == n, who, ".load_state_dict: the state has ", min_lrs.size(),
             " min_lrs and ", last.size(), " last lrs, but the optimizer has ", n, " parameter groups");
  const double keys[11] = {get(sd, "last_epoch", who),       get(sd, "best", who),      get(sd, "num_bad_epochs", who),
                           get(sd, "cooldown_counter", who), get(sd, "mode_max", who),  get(sd, "factor", who),
                           get(sd, "patience", who),         get(sd, "threshold", who), get(sd, "threshold_abs", who),
                           get(sd, "cooldown", who),         get(sd, "eps", who)};
  last_epoch_ = static_cast<int64_t>(keys[0]);
  best_ = keys[1];
  num_bad_epochs_ = static_cast<int64_t>(keys[2]);
  cooldown_counter_ = static_cast<int64_t>(keys[3]);
  mode_max_ = keys[4] != 0;
  factor_ = keys[5];
  patience_ = static_cast<int64_t>(keys[6]);
  threshold_ = keys[7];
  threshold_abs_ = keys[8] != 0;
  cooldown_ = static_cast<int64_t>(keys[9]);
  eps_ = keys[10];
  min_lrs_ = std::move(min_lrs);
  last_lr_ = std::move(last);
}

}  // namespace kiln::optim
