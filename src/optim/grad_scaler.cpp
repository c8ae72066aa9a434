// kiln::GradScaler (include/kiln/optim/grad_scaler.h), after torch.amp.GradScaler.
#include "kiln/optim/grad_scaler.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"

namespace kiln {

namespace {
void check_options(double scale, double growth, double backoff, double interval) {
  KILN_CHECK(std::isfinite(scale) && scale > 0, "GradScaler: the scale must be finite and positive, got ", scale);
  KILN_CHECK(growth > 1.0, "GradScaler: growth_factor should be > 1, got ", growth);
  KILN_CHECK(backoff > 0.0 && backoff < 1.0, "GradScaler: backoff_factor should be in (0, 1), got ", backoff);
  KILN_CHECK(interval >= 1 && interval == std::floor(interval), "GradScaler: growth_interval should be a positive integer, got ",
             interval);
}
}  // namespace

GradScaler::GradScaler(GradScalerOptions o)
    : scale_(o.init_scale),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval),
      enabled_(o.enabled) {
  check_options(scale_, growth_factor_, backoff_factor_, static_cast<double>(growth_interval_));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  KILN_CHECK(outputs.defined(), "GradScaler::scale: the outputs tensor is undefined");
  KILN_CHECK(is_floating_point(outputs.dtype()), "GradScaler::scale: expected floating-point outputs (a loss), got ",
             outputs.dtype());
  return outputs * Scalar(scale_);
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  PerOptimizer& st = per_optimizer_[&optimizer];
  KILN_CHECK(st.stage != Stage::Unscaled, "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()");
  KILN_CHECK(st.stage != Stage::Stepped, "GradScaler::unscale_: unscale_() is being called after step()");
  NoGradGuard no_grad;
  // float32 reciprocal, as torch's inv_scale tensor; the inf check reads each gradient once more,
  // and one value read decides for all of them.
  const Scalar inv(static_cast<double>(1.0f / static_cast<float>(scale_)));
  Tensor all_finite;
  for (auto& group : optimizer.param_groups())
    for (Tensor& p : group.params) {
      if (!p.grad().defined()) continue;
      Tensor& g = p.mutable_grad();
      KILN_CHECK(g.dtype() != DType::Float16, "GradScaler::unscale_: attempting to unscale float16 gradients "
                 "(keep the parameters in float32 and let autocast cast them)");
      Tensor finite = isfinite(g).all();
      all_finite = all_finite.defined() ? logical_and(all_finite, finite) : finite;
      g.mul_(inv);
    }
  st.found_inf = all_finite.defined() && !all_finite.item<bool>();
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  PerOptimizer& st = per_optimizer_[&optimizer];
  KILN_CHECK(st.stage != Stage::Stepped, "GradScaler::step: step() has already been called since the last update()");
  if (st.stage == Stage::Ready) unscale_(optimizer);
  st.stage = Stage::Stepped;
  if (st.found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  if (new_scale) {
    check_options(*new_scale, growth_factor_, backoff_factor_, static_cast<double>(growth_interval_));
    scale_ = *new_scale;
  } else {
    KILN_CHECK(!per_optimizer_.empty(), "GradScaler::update: no inf checks were recorded prior to update() "
               "(call step() or unscale_() first)");
    bool found_inf = false;
    for (const auto& [opt, st] : per_optimizer_) found_inf |= st.found_inf;
    if (found_inf) {
      scale_ *= backoff_factor_;
      growth_tracker_ = 0;
    } else if (++growth_tracker_ == growth_interval_) {
      scale_ *= growth_factor_;
      growth_tracker_ = 0;
    }
  }
  per_optimizer_.clear();
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!enabled_) return {};
  return {{"scale", scale_},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", static_cast<double>(growth_interval_)},
          {"_growth_tracker", static_cast<double>(growth_tracker_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  KILN_CHECK(enabled_, "GradScaler::load_state_dict: this scaler is disabled");
  KILN_CHECK(!state.empty(), "GradScaler::load_state_dict: the state is empty (a disabled scaler's state_dict())");
  auto get = [&](const char* key) {
    auto it = state.find(key);
    KILN_CHECK(it != state.end(), "GradScaler::load_state_dict: key '", key, "' is missing");
    return it->second;
  };
  const double scale = get("scale"), growth = get("growth_factor"), backoff = get("backoff_factor"),
               interval = get("growth_interval"), tracker = get("_growth_tracker");
  check_options(scale, growth, backoff, interval);
  KILN_CHECK(tracker >= 0 && tracker < interval && tracker == std::floor(tracker),
             "GradScaler::load_state_dict: _growth_tracker should be an integer in [0, growth_interval), got ", tracker);
  scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = static_cast<int64_t>(interval);
  growth_tracker_ = static_cast<int64_t>(tracker);
}

}  // namespace kiln
