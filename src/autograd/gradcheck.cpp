// gradcheck: analytical VJPs against central finite differences, in float64.
#include <cmath>
#include <sstream>

#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln {

namespace {
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> floating_outputs(const std::vector<Tensor>& outs) {
  std::vector<Tensor> r;
  for (const Tensor& t : outs)
    if (t.defined() && is_floating_point(t.dtype())) r.push_back(t);
  return r;
}

// Values of every floating output, flattened and concatenated.
std::vector<double> eval_flat(const Fn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  std::vector<double> out;
  for (const Tensor& t : floating_outputs(fn(inputs))) {
    auto v = t.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

bool fail(const GradcheckOptions& o, const std::string& msg) {
  if (o.raise_exception) throw Error("gradcheck: " + msg);
  return false;
}
}  // namespace

bool gradcheck(const Fn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  std::vector<size_t> diff;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    KILN_CHECK(t.dtype() == kFloat64, "gradcheck: input ", i, " requires grad but is ", t.dtype(),
               "; gradcheck needs float64 inputs");
    diff.push_back(i);
  }
  KILN_CHECK(!diff.empty(), "gradcheck: no input requires grad");

  // Analytical Jacobian, one row per output element (a backward pass each).
  std::vector<Tensor> outs = floating_outputs(fn(inputs));
  std::vector<Tensor> diff_inputs;
  for (size_t i : diff) diff_inputs.push_back(inputs[i]);
  int64_t n_out = 0;
  for (const Tensor& o : outs) n_out += o.numel();
  std::vector<std::vector<std::vector<double>>> analytic(diff.size());  // [input][out elem][in elem]
  for (size_t d = 0; d < diff.size(); ++d)
    analytic[d].assign(n_out, std::vector<double>(inputs[diff[d]].numel(), 0.0));
  int64_t row = 0;
  for (const Tensor& o : outs) {
    for (int64_t k = 0; k < o.numel(); ++k, ++row) {
      if (!o.requires_grad()) continue;
      std::vector<double> onehot(o.numel(), 0.0);
      onehot[k] = 1.0;
      Tensor go = tensor<double>(onehot, o.sizes().vec(), kFloat64);
      auto grads = autograd::grad({o}, diff_inputs, {go}, /*retain_graph=*/true, false, /*allow_unused=*/true);
      for (size_t d = 0; d < diff.size(); ++d)
        if (grads[d].defined()) analytic[d][row] = grads[d].to_vector<double>();
    }
  }

  // Numerical Jacobian by central differences on detached copies.
  std::vector<Tensor> base;
  for (const Tensor& t : inputs) base.push_back(t.defined() ? t.detach() : t);
  for (size_t d = 0; d < diff.size(); ++d) {
    size_t i = diff[d];
    Tensor x = inputs[i].detach().contiguous().clone();
    double* p = x.data_ptr<double>();
    std::vector<Tensor> args = base;
    args[i] = x;
    for (int64_t j = 0; j < x.numel(); ++j) {
      double orig = p[j];
      p[j] = orig + opts.eps;
      auto plus = eval_flat(fn, args);
      p[j] = orig - opts.eps;
      auto minus = eval_flat(fn, args);
      p[j] = orig;
      if (static_cast<int64_t>(plus.size()) != n_out) return fail(opts, "output size changed under perturbation");
      for (int64_t r = 0; r < n_out; ++r) {
        double num = (plus[r] - minus[r]) / (2 * opts.eps);
        double ana = analytic[d][r][j];
        if (std::isnan(num) && std::isnan(ana)) continue;
        if (!(std::abs(num - ana) <= opts.atol + opts.rtol * std::abs(num))) {
          std::ostringstream os;
          os << "Jacobian mismatch for output element " << r << " with respect to input " << i << " element " << j
             << ": numerical " << num << ", analytical " << ana;
          return fail(opts, os.str());
        }
      }
    }
  }

  if (opts.check_backward_twice) {
    // Second order: gradcheck the function (inputs, v) → VJP(inputs) · v with create_graph.
    std::vector<Tensor> gos;
    for (const Tensor& o : outs) gos.push_back(randn(o.sizes().vec(), kFloat64));
    Fn vjp_fn = [&](const std::vector<Tensor>& in_given) {
      // Finite differences call this without grad mode and with plain copies:
      // the inner VJP still needs a graph to differentiate.
      EnableGradGuard grad_mode;
      std::vector<Tensor> in = in_given;
      for (size_t i : diff)
        if (!in[i].requires_grad()) in[i] = in[i].detach().requires_grad_(true);
      std::vector<Tensor> o2 = floating_outputs(fn(in));
      std::vector<Tensor> din;
      for (size_t i : diff) din.push_back(in[i]);
      std::vector<Tensor> roots, rg;
      for (size_t k = 0; k < o2.size(); ++k)
        if (o2[k].requires_grad()) {
          roots.push_back(o2[k]);
          rg.push_back(gos[k]);
        }
      auto g = autograd::grad(roots, din, rg, true, /*create_graph=*/true, /*allow_unused=*/true);
      std::vector<Tensor> r;
      for (auto& t : g)
        if (t.defined()) r.push_back(t);
      return r;
    };
    GradcheckOptions o2 = opts;
    o2.check_backward_twice = false;
    return gradcheck(vjp_fn, inputs, o2);
  }
  return true;
}

}  // namespace kiln
