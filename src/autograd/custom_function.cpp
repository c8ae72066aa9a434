// User-defined autograd functions (autograd::Function<T>).
#include "autograd/autograd_meta.h"
#include "autograd/node.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"

namespace kiln {
namespace autograd {

struct CustomState {
  std::vector<Tensor> pending;  // saved during forward, before the node exists
  std::vector<SavedTensor> saved;
  std::weak_ptr<Node> node;
  std::string name;
};

struct CustomFunctionAccess {
  static CustomState& state(AutogradContext& ctx) {
    if (!ctx.state_) ctx.state_ = std::make_shared<CustomState>();
    return *ctx.state_;
  }
  static std::vector<bool>& needs(AutogradContext& ctx) { return ctx.needs_input_grad_; }
  static const std::vector<TensorImpl*>& nondiff(AutogradContext& ctx) { return ctx.non_differentiable_; }
};

namespace {
struct CustomNode : Node {
  std::string fn_name;
  std::shared_ptr<AutogradContext> ctx;
  CustomBackward backward;
  std::vector<TensorMeta> input_meta;

  std::string name() const override { return fn_name + "Backward"; }
  void release_saved() override {
    for (auto& s : CustomFunctionAccess::state(*ctx).saved) s.release();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    for (size_t k = 0; k < grads.size(); ++k)
      if (!grads[k].defined() && k < output_meta.size() && is_floating_point(output_meta[k].dtype))
        grads[k] = zeros_for(output_meta[k]);
    std::vector<Tensor> r = backward(ctx.get(), grads);
    KILN_CHECK(r.size() >= next_edges.size(), fn_name, ".backward returned ", r.size(), " gradients, expected ",
               next_edges.size(), " (one per forward input)");
    r.resize(next_edges.size());
    for (size_t i = 0; i < r.size(); ++i) {
      if (!next_edges[i].valid()) {
        r[i] = Tensor();
        continue;
      }
      if (r[i].defined())
        KILN_CHECK(r[i].sizes() == IntArrayRef(input_meta[i].sizes), fn_name, ".backward returned a gradient of shape ",
                   shape_str(r[i].sizes()), " for input ", i, " of shape ", shape_str(input_meta[i].sizes));
    }
    return r;
  }
};
}  // namespace

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  CustomFunctionAccess::state(*this).pending = std::move(tensors);
}

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  auto& st = CustomFunctionAccess::state(const_cast<AutogradContext&>(*this));
  if (st.saved.empty()) return st.pending;  // no graph was recorded
  std::vector<Tensor> out;
  auto node = st.node.lock();
  for (const auto& s : st.saved) out.push_back(s.unpack(st.name.c_str(), node));
  return out;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.push_back(t.unsafe_impl());
}

std::vector<Tensor> apply_custom_function(const std::string& name, const std::vector<Tensor>& inputs,
                                          CustomForward forward, CustomBackward backward) {
  auto ctx = std::make_shared<AutogradContext>();
  bool record = false;
  auto& needs = CustomFunctionAccess::needs(*ctx);
  for (const Tensor& t : inputs) {
    bool r = is_grad_enabled() && t.defined() && t.requires_grad();
    needs.push_back(r);
    record = record || r;
  }
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = forward(ctx.get(), inputs);
  }
  if (!record) return outputs;
  // Compiled code: the graph cannot hold a user's backward, so this graph keeps eager's
  // autograd and the backward runs it (an AOT backend would differentiate the forward's ops).
  if (RecordLayer* rec = current_record_layer()) rec->keep_eager_autograd();
  auto node = std::make_shared<CustomNode>();
  node->fn_name = name;
  node->ctx = ctx;
  node->backward = std::move(backward);
  for (const Tensor& t : inputs) {
    node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
    node->input_meta.push_back(t.defined() ? meta_of(t) : TensorMeta{});
  }
  const auto& nondiff = CustomFunctionAccess::nondiff(*ctx);
  for (Tensor& out : outputs) {
    // An output that is an input returned as is must become a distinct tensor to get its own history.
    for (const Tensor& in : inputs)
      if (out.is_same(in)) out = out.detach();
    node->output_meta.push_back(meta_of(out));
  }
  std::vector<Tensor> diff_outputs(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k)
    if (std::find(nondiff.begin(), nondiff.end(), outputs[k].unsafe_impl()) == nondiff.end())
      diff_outputs[k] = outputs[k];
  set_history(diff_outputs, node);
  auto& st = CustomFunctionAccess::state(*ctx);
  st.node = node;
  st.name = name;
  for (const Tensor& t : st.pending) {
    bool is_out = false;
    for (const Tensor& o : outputs) is_out = is_out || o.is_same(t);
    st.saved.emplace_back(t, is_out, node);
  }
  st.pending.clear();
  return outputs;
}

}  // namespace autograd
}  // namespace kiln
