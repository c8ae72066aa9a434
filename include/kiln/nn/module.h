// nn::Module: the base of every layer and model, as torch.nn.Module.
//
//   struct Net : kiln::nn::Module {
//     std::shared_ptr<nn::Linear> fc1, fc2;
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
//     }
//     Tensor forward(const Tensor& x) override { return fc2->forward(fc1->forward(x).relu()); }
//   };
//
// Parameters, buffers and submodules are kept in registration order, so named_parameters()
// and state_dict() give torch's dotted names ("fc1.weight") in torch's order. A layer keeps
// its parameters as Tensor members too (the handle returned by register_parameter); Module::to
// converts them in place (Tensor::set_data) so those members stay valid.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/state_dict.h"
#include "kiln/tensor.h"

namespace kiln::nn {

// What load_state_dict(strict=false) did not match; strict=true throws when any is non-empty.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-tensor forward most layers have; modules with other signatures define their own
  // forward and leave this one throwing.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  const std::string& type_name() const { return type_name_; }
  // One line describing the layer's configuration ("in_features=784, out_features=10, bias=True").
  virtual std::string extra_repr() const { return {}; }
  std::string repr() const;  // the tree, as print(module) in torch

  // ---- registration ----
  // An undefined tensor registers an absent parameter (torch's `bias=None`): it has a name but
  // no entry in parameters() or state_dict(). Registering an existing name replaces it (tying).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_module_impl(name, m);
    return m;
  }

  // ---- traversal; names are dotted paths; tensors shared by several modules appear once ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module first (name ""), then every descendant depth-first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The same walks without names or vectors, for code that runs every step (a compiled module's
  // key): fn(module) for this module and then every descendant depth-first (a module registered
  // twice is visited twice); fn(tensor) for this module's own defined parameters, then buffers.
  template <class F>
  void for_each_module(F&& fn) const {
    fn(*this);
    for (const auto& [name, c] : children_)
      if (c) c->for_each_module(fn);
  }
  template <class F>
  void for_each_own_tensor(F&& fn) const {
    for (const Entry& e : params_)
      if (e.tensor.defined()) fn(e.tensor);
    for (const Entry& e : buffers_)
      if (e.tensor.defined()) fn(e.tensor);
  }
  // Direct lookups; throw naming the module when the name is not registered.
  Tensor& parameter(const std::string& name);
  Tensor& buffer(const std::string& name);
  std::shared_ptr<Module> child(const std::string& name) const;

  // ---- mode, placement, gradients ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves/casts parameters and buffers in place. Floating-point tensors take `dtype`; integer
  // buffers (e.g. num_batches_tracked) keep theirs, as torch's Module.to.
  void to(Device device, std::optional<DType> dtype = std::nullopt);
  void to(DType dtype);
  void zero_grad(bool set_to_none = true);
  void apply(const std::function<void(Module&)>& fn);  // children first, then this module

  // ---- state ----
  // Parameters and persistent buffers, keys as named_parameters but keeping every alias of a
  // shared tensor (torch keeps both "wte.weight" and "head.weight" for tied weights).
  StateDict state_dict() const;
  // Copies values in place (dtype converted, shapes must match). strict=true throws a kiln::Error
  // listing every missing, unexpected and mismatched key; strict=false returns what did not match
  // (shape mismatches always throw).
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

 protected:
  void register_module_impl(const std::string& name, std::shared_ptr<Module> m);

 private:
  struct Entry {
    std::string name;
    Tensor tensor;  // undefined = registered as None
    bool persistent = true;
  };
  void collect_state(const std::string& prefix, StateDict& out) const;
  void collect_named(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out, std::vector<const TensorImpl*>& seen) const;
  void repr_into(std::string& out, int indent) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<Entry> params_;
  std::vector<Entry> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace kiln::nn
