// nn::Module: registration, traversal, mode, placement and state_dict.
#include "kiln/nn/module.h"

#include <algorithm>

#include "core/tensor_impl.h"
#include "kiln/autograd.h"

namespace kiln::nn {

namespace {

bool valid_name(const std::string& name) {
  return !name.empty() && name.find('.') == std::string::npos;
}

template <class Entries>
auto find_entry(Entries& entries, const std::string& name) -> decltype(&entries[0]) {
  for (auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  KILN_FAIL(type_name_, ": this module has no single-tensor forward(x); call its own forward");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  KILN_CHECK(valid_name(name), type_name_, ".register_parameter: invalid name '", name,
             "' (must be non-empty and contain no '.')");
  KILN_CHECK(!find_entry(buffers_, name), type_name_, ".register_parameter: '", name, "' is already a buffer");
  if (t.defined()) {
    KILN_CHECK(t.is_leaf(), type_name_, ".register_parameter: '", name,
               "' must be a leaf tensor (use detach() on a computed value)");
    if (requires_grad && !t.requires_grad()) t.requires_grad_(true);
  }
  if (Entry* e = find_entry(params_, name)) {
    e->tensor = std::move(t);
    return e->tensor;
  }
  params_.push_back({name, std::move(t), true});
  return params_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  KILN_CHECK(valid_name(name), type_name_, ".register_buffer: invalid name '", name,
             "' (must be non-empty and contain no '.')");
  KILN_CHECK(!find_entry(params_, name), type_name_, ".register_buffer: '", name, "' is already a parameter");
  if (Entry* e = find_entry(buffers_, name)) {
    e->tensor = std::move(t);
    e->persistent = persistent;
    return e->tensor;
  }
  buffers_.push_back({name, std::move(t), persistent});
  return buffers_.back().tensor;
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> m) {
  KILN_CHECK(valid_name(name), type_name_, ".register_module: invalid name '", name,
             "' (must be non-empty and contain no '.')");
  KILN_CHECK(m != nullptr, type_name_, ".register_module: module '", name, "' is null");
  KILN_CHECK(m.get() != this, type_name_, ".register_module: a module cannot contain itself");
  for (auto& [n, c] : children_)
    if (n == name) {
      c = std::move(m);
      return;
    }
  children_.emplace_back(name, std::move(m));
}

void Module::collect_named(const std::string& prefix, bool params, bool recurse,
                           std::vector<std::pair<std::string, Tensor>>& out,
                           std::vector<const TensorImpl*>& seen) const {
  for (const Entry& e : params ? params_ : buffers_) {
    if (!e.tensor.defined()) continue;
    const TensorImpl* impl = e.tensor.unsafe_impl();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;  // tied: first name wins
    seen.push_back(impl);
    out.emplace_back(prefix + e.name, e.tensor);
  }
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect_named(prefix + n + ".", params, true, out, seen);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_named("", true, recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_named("", false, recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_)
    for (auto& [sub, m] : c->named_modules()) {
      if (std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.second == m; })) continue;
      out.emplace_back(sub.empty() ? n : n + "." + sub, m);
    }
  return out;
}

Tensor& Module::parameter(const std::string& name) {
  Entry* e = find_entry(params_, name);
  KILN_CHECK(e, type_name_, ": no parameter named '", name, "'");
  return e->tensor;
}

Tensor& Module::buffer(const std::string& name) {
  Entry* e = find_entry(buffers_, name);
  KILN_CHECK(e, type_name_, ": no buffer named '", name, "'");
  return e->tensor;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& [n, c] : children_)
    if (n == name) return c;
  KILN_FAIL(type_name_, ": no submodule named '", name, "'");
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::to(Device device, std::optional<DType> dtype) {
  KILN_CHECK(!dtype || is_floating_point(*dtype), type_name_, ".to: only floating point dtypes are accepted, got ",
             dtype_name(*dtype));
  NoGradGuard no_grad;
  auto convert = [&](Tensor& t) {
    if (!t.defined()) return;
    std::optional<DType> target = (dtype && t.is_floating_point()) ? dtype : std::nullopt;
    if (t.device() == device && (!target || *target == t.dtype())) return;
    t.set_data(t.to(device, target));
    if (t.grad().defined()) t.set_grad(t.grad().to(device, target));
  };
  // Tied tensors are the same impl: converting it once converts every alias.
  for (auto& [n, t] : named_parameters()) convert(t);
  for (auto& [n, t] : named_buffers()) convert(t);
}

void Module::to(DType dtype) {
  std::optional<Device> dev;
  for (auto& [n, t] : named_parameters()) {
    dev = t.device();
    break;
  }
  if (!dev)
    for (auto& [n, t] : named_buffers()) {
      dev = t.device();
      break;
    }
  to(dev.value_or(kCPU), dtype);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& [n, p] : named_parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      NoGradGuard no_grad;
      p.mutable_grad().zero_();
    }
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const Entry& e : params_)
    if (e.tensor.defined()) out.insert(prefix + e.name, e.tensor.detach());
  for (const Entry& e : buffers_)
    if (e.tensor.defined() && e.persistent) out.insert(prefix + e.name, e.tensor.detach());
  for (const auto& [n, c] : children_) c->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  // Targets: every key state_dict() would produce, with the live tensor behind it.
  std::vector<std::pair<std::string, Tensor>> targets;
  std::function<void(Module&, const std::string&)> walk = [&](Module& m, const std::string& prefix) {
    for (Entry& e : m.params_)
      if (e.tensor.defined()) targets.emplace_back(prefix + e.name, e.tensor);
    for (Entry& e : m.buffers_)
      if (e.tensor.defined() && e.persistent) targets.emplace_back(prefix + e.name, e.tensor);
    for (auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, "");

  LoadResult result;
  std::vector<std::string> mismatched;
  for (auto& [key, t] : targets) {
    const Tensor* src = state.find(key);
    if (!src) {
      result.missing_keys.push_back(key);
    } else if (!src->defined() || src->sizes() != t.sizes()) {
      mismatched.push_back(key + ": checkpoint " + (src->defined() ? shape_str(src->sizes()) : "undefined") +
                           " vs model " + shape_str(t.sizes()));
    }
  }
  for (const auto& [key, v] : state)
    if (std::none_of(targets.begin(), targets.end(), [&](const auto& p) { return p.first == key; }))
      result.unexpected_keys.push_back(key);

  bool fail = !mismatched.empty() || (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty()));
  if (fail) {
    std::string msg = type_name_ + ".load_state_dict: error(s) loading the state dict:";
    if (strict && !result.missing_keys.empty()) msg += "\n  missing keys: " + join(result.missing_keys);
    if (strict && !result.unexpected_keys.empty()) msg += "\n  unexpected keys: " + join(result.unexpected_keys);
    if (!mismatched.empty()) msg += "\n  size mismatch: " + join(mismatched);
    KILN_FAIL(msg);
  }
  NoGradGuard no_grad;
  for (auto& [key, t] : targets)
    if (const Tensor* src = state.find(key)) t.copy_(src->to(t.device(), t.dtype()));
  return result;
}

// As torch's Module.__repr__: a lone extra_repr stays on the type's line; with children, every
// extra_repr line and child goes on its own indented line.
void Module::repr_into(std::string& out, int indent) const {
  std::string extra = extra_repr();
  out += type_name_ + "(";
  if (children_.empty()) {
    out += extra + ")";
    return;
  }
  std::string pad(indent + 2, ' ');
  for (size_t start = 0; !extra.empty() && start <= extra.size();) {
    size_t end = extra.find('\n', start);
    if (end == std::string::npos) end = extra.size();
    out += "\n" + pad + extra.substr(start, end - start);
    start = end + 1;
  }
  for (const auto& [n, c] : children_) {
    out += "\n" + pad + "(" + n + "): ";
    c->repr_into(out, indent + 2);
  }
  out += "\n" + std::string(indent, ' ') + ")";
}

std::string Module::repr() const {
  std::string out;
  repr_into(out, 0);
  return out;
}

}  // namespace kiln::nn
