// Eager against compiled for one program, and the shrinker (differ.h).
#include "tests/compile/fuzz/differ.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "tests/ops/ref.h"

namespace kiln::fuzz {

namespace {

using Fn = std::function<TensorList(const TensorList&)>;

// What one run showed a user.
struct Outcome {
  bool threw = false;
  std::string error;
  TensorList outs, inputs_after, grads;
  bool bwd_threw = false;
  std::string bwd_error;
};

Outcome execute(const Fn& f, const Program& p, double scale, bool random) {
  Outcome o;
  TensorList in = make_inputs(p, scale);
  // Gradients are taken with respect to the inputs that required grad before the call (leaves):
  // one the call wrote with grad has a history the compiled graph's node does not run through
  // for values computed from it (Note [Views of written inputs]; torch.compile's neither).
  std::vector<bool> leaf;
  for (const Tensor& t : in) leaf.push_back(t.defined() && t.requires_grad());
  if (random) manual_seed(1234);
  try {
    o.outs = f(in);
  } catch (const std::exception& e) {
    o.threw = true;
    o.error = e.what();
    return o;
  }
  for (size_t k = 0; k < o.outs.size(); ++k)
    if (o.outs[k].defined() && !o.outs[k].has_storage()) {
      o.threw = true;  // a tracer escaped the compiled call: the user cannot read it
      o.error = "output " + std::to_string(k) + " was never made real (no storage)";
      return o;
    }
  {
    NoGradGuard g;
    for (const Tensor& t : in) o.inputs_after.push_back(t.defined() ? t.detach().clone() : t);
  }
  // Gradients of sum_k <out_k, w_k> (fixed weights) with respect to every input requiring grad.
  TensorList roots, cot, wrt;
  for (const Tensor& t : o.outs)
    if (t.defined() && t.requires_grad()) {
      roots.push_back(t);
      cot.push_back(test::make_input(t.sizes().vec(), t.dtype(), 99));
    }
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    bool seen = false;  // an argument passed twice (aliasing_args) is one leaf
    for (const Tensor& w : wrt) seen = seen || w.is_same(t);
    if (leaf[i] && t.requires_grad() && !seen) wrt.push_back(t);
  }
  if (roots.empty() || wrt.empty()) return o;
  try {
    o.grads = autograd::grad(roots, wrt, cot, std::nullopt, false, /*allow_unused=*/true);
  } catch (const std::exception& e) {
    o.bwd_threw = true;
    o.bwd_error = e.what();
  }
  return o;
}

void tolerance(DType t, bool grad, double& atol, double& rtol) {
  switch (t) {
    case DType::Float16:
      atol = rtol = 1e-2;
      break;
    case DType::BFloat16:
      atol = rtol = 5e-2;
      break;
    case DType::Float32:
      atol = rtol = 1e-4;
      break;
    case DType::Float64:
      atol = rtol = 1e-7;
      break;
    default:
      atol = rtol = 0;
      return;
  }
  if (grad) atol *= 10, rtol *= 10;
}

// Empty when equal; else the first differences.
std::string compare(const TensorList& got, const TensorList& want, bool exact, bool grad, const char* what) {
  std::ostringstream o;
  if (got.size() != want.size()) {
    o << what << ": " << got.size() << " tensors, eager " << want.size();
    return o.str();
  }
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].defined() != want[k].defined()) {
      o << what << " " << k << ": " << (got[k].defined() ? "defined" : "undefined") << ", eager's is not";
      return o.str();
    }
    if (!want[k].defined()) continue;
    if (got[k].sizes().vec() != want[k].sizes().vec() || got[k].dtype() != want[k].dtype()) {
      o << what << " " << k << ": " << shape_str(got[k]) << ", eager " << shape_str(want[k]);
      return o.str();
    }
    double atol, rtol;
    tolerance(want[k].dtype(), grad, atol, rtol);
    auto g = got[k].detach().to_vector<double>(), w = want[k].detach().to_vector<double>();
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i];
      double d = std::abs(g[i] - w[i]);
      if (same || (!exact && d <= atol + rtol * std::abs(w[i]))) continue;
      if (bad++ < 3) o << what << " " << k << " element " << i << ": got " << g[i] << ", eager " << w[i] << "\n";
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
    if (bad) {
      o << what << " " << k << ": " << bad << " of " << g.size() << " elements differ (max " << worst << ")";
      return o.str();
    }
  }
  return "";
}

std::optional<Mismatch> compare(const Outcome& got, const Outcome& want, bool exact, const std::string& variant,
                                const char* call) {
  auto mm = [&](const char* kind, const std::string& d) {
    return Mismatch{variant, kind, std::string(call) + ": " + d, std::string(call) != "first call"};
  };
  if (got.threw != want.threw)
    return mm("error", got.threw ? "compiled threw '" + got.error + "'; eager did not"
                                 : "eager threw '" + want.error + "'; compiled did not");
  if (want.threw) return std::nullopt;
  if (auto d = compare(got.outs, want.outs, exact, false, "output"); !d.empty()) return mm("output", d);
  if (auto d = compare(got.inputs_after, want.inputs_after, exact, false, "input after the call"); !d.empty())
    return mm("input", d);
  if (got.bwd_threw != want.bwd_threw)
    return mm("backward error", got.bwd_threw ? "compiled backward threw '" + got.bwd_error + "'; eager's did not"
                                              : "eager backward threw '" + want.bwd_error + "'; compiled's did not");
  if (auto d = compare(got.grads, want.grads, exact, true, "gradient of input"); !d.empty()) return mm("gradient", d);
  return std::nullopt;
}

}  // namespace

std::vector<Variant> all_variants() {
  auto make = [](const char* name, const char* backend, bool pure, bool exact) {
    Variant v;
    v.name = name;
    v.options.backend = backend;
    v.options.assume_pure = pure;
    v.options.background = false;  // the generated kernels are what inductor is fuzzed for
    v.exact = exact;
    return v;
  };
  return {make("eager", "eager", false, true), make("aot_eager", "aot_eager", false, false),
          make("aot_eager+pure", "aot_eager", true, false), make("inductor", "inductor", false, false)};
}

std::string known_class(const Program& p, const Mismatch& m, const Switches& s) {
  auto has = [&](const char* text) { return m.detail.find(text) != std::string::npos; };
  bool breaks = false, data_dependent = false, copies = false, ties = false;
  for (const Step& st : p.steps) {
    if (!st.enabled) continue;
    OpId op = st.kind == StepKind::Op ? sample_pool()[st.sample].op : OpId::copy_;
    // Indexing with a bool mask is data-dependent too, though the op (index) is not marked so.
    bool mask = false;
    if (st.kind == StepKind::Op && !op_info(op).has(POINTWISE))
      for (const Tensor& t : sample_pool()[st.sample].sample.inputs) mask = mask || (t.defined() && t.dtype() == kBool);
    data_dependent = data_dependent || (st.kind == StepKind::Op && (op_info(op).has(DATA_DEPENDENT) || mask));
    breaks = breaks || data_dependent || st.kind == StepKind::BranchValue;  // more than one graph
    ties = ties || (st.kind == StepKind::Op && (op == OpId::median || op == OpId::nanmedian));
    copies = copies || (st.kind == StepKind::Op && op == OpId::copy_) ||
             (st.kind == StepKind::Inplace && st.variant % 5 == 3);  // apply_inplace's copy_
  }
  // Either way round: what kiln's eager saves and what a compiled backward saves differ (eager
  // saves operands PyTorch does not; a prim backward saves an input eager's composite does not).
  if (!s.saved_tensor_versions && m.kind == "backward error" && has("modified by an in-place operation"))
    return "saved_tensor_versions";
  if (!s.view_strides && m.kind == "error" && has("compiled threw") && has("is not compatible with input tensor"))
    return "view_strides";
  if (!s.reads_after_break && m.kind == "error" && has("compiled threw") && has("without storage"))
    return "reads_after_break";
  if (!s.pure_detach_constant && m.variant == "aot_eager+pure" && m.second_call) return "pure_detach_constant";
  if (!s.symbols_after_data_dependent && m.kind == "error" && m.second_call && has("compiled threw") && data_dependent)
    return "symbols_after_data_dependent";
  if (!s.copy_aliases_source && (m.kind == "output" || m.kind == "input") && copies) return "copy_aliases_source";
  if (!s.empty_reduction_grad && m.kind == "gradient" && has("gradient of input: 0 tensors"))
    return "empty_reduction_grad";
  if (!s.ties_in_full_reductions && m.kind == "gradient" && ties) return "ties_in_full_reductions";
  if (!s.zero_vs_undefined_grads && m.kind == "gradient" && has("defined, eager's is not"))
    return "zero_vs_undefined_grads";
  if (!s.grads_across_breaks && m.kind == "gradient" && breaks) return "grads_across_breaks";
  if (!s.written_aliased_grad_inputs && m.kind == "error" && has("compiled threw") &&
      has("an input that requires grad shares its storage with another input"))
    return "written_aliased_grad_inputs";
  if (!s.as_strided_overlap && m.kind == "error" && has("compiled threw") && has("as_strided: not supported yet"))
    return "as_strided_overlap";
  return "";
}

std::optional<Mismatch> check(const Program& p, const std::vector<Variant>& variants) {
  const bool random = uses_random(p);
  Fn run = [&p](const TensorList& in) { return run_program(p, in); };
  const Outcome ea = execute(run, p, 1.0, random), eb = execute(run, p, 0.5, random);
  for (const Variant& v : variants) {
    auto f = compile(run, v.options);
    Fn call = [&f](const TensorList& in) { return f(in); };
    if (auto m = compare(execute(call, p, 1.0, random), ea, v.exact, v.name, "first call")) return m;
    if (auto m = compare(execute(call, p, 0.5, random), eb, v.exact, v.name, "second call, other values")) return m;
  }
  return std::nullopt;
}

Program shrink(Program p, const Variant& variant, const std::function<bool(const Program&, const Mismatch&)>& same,
               int budget) {
  auto still = [&](const Program& q) {
    if (budget-- <= 0) return false;
    std::optional<Mismatch> m;
    try {
      m = check(q, {variant});
    } catch (const std::exception&) {
      return false;  // eager itself failed outside the compared calls (a bad shrink)
    }
    return m && same(q, *m);
  };
  auto attempt = [&](const std::function<bool(Program&)>& edit) {
    Program q = p;
    if (edit(q) && still(q)) {
      p = std::move(q);
      return true;
    }
    return false;
  };
  for (bool changed = true; changed && budget > 0;) {
    changed = false;
    for (size_t k = p.steps.size(); k-- > 0;)
      changed |= attempt([k](Program& q) { return std::exchange(q.steps[k].enabled, false); });
    for (size_t k = 0; k < p.steps.size(); ++k) {
      if (!p.steps[k].enabled) continue;
      changed |= attempt([k](Program& q) { return std::exchange(q.steps[k].no_grad, false); });
      for (size_t i = 0; i < p.steps[k].args.size(); ++i) {
        changed |= attempt([k, i](Program& q) { return std::exchange(q.steps[k].args[i].value, -1) != -1; });
        changed |= attempt([k, i](Program& q) { return std::exchange(q.steps[k].args[i].alias_of, -1) != -1; });
        changed |= attempt([k, i](Program& q) {
          return std::exchange(q.steps[k].args[i].layout, Layout::Contiguous) != Layout::Contiguous;
        });
        changed |= attempt([k, i](Program& q) { return std::exchange(q.steps[k].args[i].requires_grad, false); });
      }
      if (p.steps[k].kind != StepKind::Op) continue;
      // A smaller sample of the same op with as many inputs (input slots stay where they were).
      const auto& pool = sample_pool();
      const PoolEntry& cur = pool[p.steps[k].sample];
      std::vector<size_t> smaller;
      for (size_t j : samples_of(cur.op))
        if (pool[j].numel < cur.numel && pool[j].sample.inputs.size() == cur.sample.inputs.size()) smaller.push_back(j);
      std::sort(smaller.begin(), smaller.end(), [&](size_t a, size_t b) { return pool[a].numel < pool[b].numel; });
      for (size_t t = 0; t < smaller.size() && t < 3; ++t)
        if (attempt([&, k, t](Program& q) {
              q.steps[k].sample = smaller[t];
              return true;
            })) {
          changed = true;
          break;
        }
    }
  }
  return p;
}

}  // namespace kiln::fuzz
