// Tensor's autograd methods and the autograd::grad / autograd::backward entry points.
#include <atomic>

#include "autograd/autograd_meta.h"
#include "autograd/deferred.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"

namespace kiln {

using autograd::autograd_meta;
using autograd::autograd_meta_or_null;

namespace {
std::atomic<int64_t> g_hook_id{1};
// A hook or a retained gradient on a tracer lives on eager's autograd graph, which the
// graph being recorded then keeps (an AOT backend's backward has no place for them).
void keep_eager_autograd(const Tensor& t) {
  if (t.unsafe_impl()->is_tracer())
    if (RecordLayer* rec = current_record_layer()) rec->keep_eager_autograd();
}
// Note [Deferred tracer autograd]: what reads a node builds the deferred ones first.
void resolve_deferred(const Tensor& t) {
  auto* m = autograd_meta_or_null(t);
  if (m && m->grad_fn == autograd::deferred_node()) autograd::materialize_deferred();
}
const Tensor& undefined_tensor() {
  static const Tensor t;
  return t;
}
}  // namespace

bool Tensor::requires_grad() const {
  auto* m = autograd_meta_or_null(*this);
  if (!m) return false;
  if (m->requires_grad) return true;
  if (!m->grad_fn) return false;
  // Note [View rebase]: a view written since its history was recorded has its base's history,
  // none where the base has none (the rebase itself waits for the next grad_fn()).
  if (m->view_of_base && m->view_version != _version() && !autograd::materializing_deferred()) [[unlikely]]
    return Tensor(unsafe_impl()->view_base).requires_grad();
  return true;
}

Tensor& Tensor::requires_grad_(bool r) {
  KILN_CHECK(defined(), "requires_grad_: undefined tensor");
  if (!r && !requires_grad()) return *this;
  KILN_CHECK(is_leaf(), "requires_grad_: you can only change requires_grad flags of leaf tensors; use detach() to "
             "get a tensor that does not require grad");
  KILN_CHECK(!r || kiln::is_floating_point(dtype()), "requires_grad_: only tensors of floating point dtype can require "
             "gradients, got ", dtype());
  // The deferred nodes of ops that read this tensor take the history it had then (Note
  // [Deferred tracer autograd]): `x * c` before `c.requires_grad_()` has no edge to c.
  if (r != requires_grad()) autograd::materialize_deferred();
  autograd_meta(*this).requires_grad = r;
  return *this;
}

const Tensor& Tensor::grad() const {
  auto* m = autograd_meta_or_null(*this);
  return m ? m->grad : undefined_tensor();
}
Tensor& Tensor::mutable_grad() { return autograd_meta(*this).grad; }
void Tensor::set_grad(const Tensor& g) {
  KILN_CHECK(!g.defined() || g.sizes() == sizes(), "set_grad: assigned grad has shape ", shape_str(g.sizes()),
             " but the tensor has shape ", shape_str(sizes()));
  autograd_meta(*this).grad = g;
}
bool Tensor::is_leaf() const {
  auto* m = autograd_meta_or_null(*this);
  return !m || !m->grad_fn;
}
std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  resolve_deferred(*this);
  auto* m = autograd_meta_or_null(*this);
  if (m && m->view_of_base && m->grad_fn && m->view_version != _version() && !autograd::materializing_deferred())
    autograd::rebase_view(*this, *m);
  return m ? m->grad_fn : nullptr;
}
uint32_t Tensor::output_nr() const {
  auto* m = autograd_meta_or_null(*this);
  return m ? m->output_nr : 0;
}

Tensor Tensor::detach() const {
  Tensor t = make_view(*this, sizes(), strides(), storage_offset());
  t.unsafe_impl()->is_wrapped_number = unsafe_impl()->is_wrapped_number;
  // Not a view for autograd (PyTorch's non-differentiable view): an in-place op with grad on the
  // alias gives the alias a history of its own and leaves its source's alone (seed 6503346). The
  // storage is still shared, so writes show through and aliasing is still found.
  t.unsafe_impl()->view_base = nullptr;
  return t;
}

void Tensor::set_data(const Tensor& src) {
  KILN_CHECK(defined() && src.defined(), "set_data: both tensors must be defined");
  KILN_CHECK(is_leaf(), "set_data: only leaf tensors can have their data replaced");
  KILN_CHECK(!requires_grad() || kiln::is_floating_point(src.dtype()), "set_data: a tensor that requires grad ",
             "needs floating point data, got ", dtype_name(src.dtype()));
  // While compiling, a tracer's data becomes real first (Note [Value reads]).
  notify_value_read(src, "set_data");
  TensorImpl* d = unsafe_impl();
  const TensorImpl* s = src.unsafe_impl();
  d->storage = s->storage;
  d->sizes = s->sizes;
  d->strides = s->strides;
  d->storage_offset = s->storage_offset;
  d->dtype = s->dtype;
  d->device = s->device;
  d->view_base = s->view_base;
  d->version = s->version;  // aliases src from now on, as torch's set_data
  d->refresh_metadata();
}

Tensor& Tensor::detach_() {
  KILN_CHECK(!is_view() || !_base().requires_grad(), "detach_: can't detach a view of a tensor that requires grad "
             "in place; use detach()");
  if (auto* m = autograd_meta_or_null(*this)) {
    if (m->grad_fn || m->requires_grad) autograd::materialize_deferred();  // as in requires_grad_
    m->grad_fn = nullptr;
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return *this;
}

void Tensor::retain_grad() const {
  KILN_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that doesn't require grad");
  if (is_leaf()) return;  // leaves keep .grad anyway
  keep_eager_autograd(*this);
  resolve_deferred(*this);
  auto& m = autograd_meta(*this);
  if (m.retains_grad) return;
  m.retains_grad = true;
  m.grad_fn->retained[m.output_nr] = impl_ptr();
}
bool Tensor::retains_grad() const {
  auto* m = autograd_meta_or_null(*this);
  return m && m->retains_grad;
}

int64_t Tensor::register_hook(Hook hook) const {
  KILN_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  int64_t id = g_hook_id.fetch_add(1);
  keep_eager_autograd(*this);
  resolve_deferred(*this);
  auto& m = autograd_meta(*this);
  if (m.grad_fn) m.grad_fn->pre_hooks[m.output_nr].emplace_back(id, std::move(hook));
  else m.hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(int64_t handle) const {
  resolve_deferred(*this);
  auto& m = autograd_meta(*this);
  auto drop = [handle](auto& v) { std::erase_if(v, [handle](const auto& p) { return p.first == handle; }); };
  drop(m.hooks);
  if (m.grad_fn)
    for (auto& [k, hooks] : m.grad_fn->pre_hooks) drop(hooks);
}

namespace autograd {
namespace {
std::vector<Tensor> make_root_grads(const std::vector<Tensor>& outputs, const std::vector<Tensor>& given,
                                    const char* fn) {
  KILN_CHECK(given.empty() || given.size() == outputs.size(), fn, ": got ", given.size(), " gradients for ",
             outputs.size(), " outputs");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.defined(), fn, ": output ", i, " is undefined");
    KILN_CHECK(out.requires_grad(), fn, ": element ", i, " of tensors does not require grad and does not have a "
               "grad_fn");
    if (!given.empty() && given[i].defined()) {
      KILN_CHECK(given[i].sizes() == out.sizes(), fn, ": mismatch in shape: grad_output[", i, "] has a shape of ",
                 shape_str(given[i].sizes()), " and output[", i, "] has a shape of ", shape_str(out.sizes()));
      grads.push_back(given[i]);
    } else {
      KILN_CHECK(out.numel() == 1, fn, ": grad can be implicitly created only for scalar outputs, but output ", i,
                 " has shape ", shape_str(out.sizes()));
      grads.push_back(ones_like(out));
    }
  }
  return grads;
}

std::vector<Edge> root_edges(const std::vector<Tensor>& outputs) {
  std::vector<Edge> roots;
  for (const Tensor& t : outputs) roots.push_back(gradient_edge(t));
  return roots;
}
}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  auto grads = make_root_grads(outputs, grad_outputs, "autograd::grad");
  std::vector<Edge> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad: input ", i,
               " does not require grad");
    captures.push_back(gradient_edge(inputs[i]));
  }
  auto result = run_backward(root_edges(outputs), grads, retain_graph.value_or(create_graph), create_graph,
                             captures);
  for (size_t i = 0; i < result.size(); ++i) {
    KILN_CHECK(result[i].defined() || allow_unused, "autograd::grad: one of the differentiated tensors (input ", i,
               ") appears to not have been used in the graph; pass allow_unused=true if this is desired");
    if (result[i].defined() && !create_graph) result[i] = result[i].detach();
  }
  return result;
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  auto grads = make_root_grads(tensors, grad_tensors, "backward");
  bool keep = retain_graph.value_or(create_graph);
  if (inputs.empty()) {
    run_backward(root_edges(tensors), grads, keep, create_graph);
    return;
  }
  // Only accumulate into the given inputs.
  std::vector<Edge> captures;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.requires_grad(), "backward: an input passed in `inputs` does not require grad");
    captures.push_back(gradient_edge(t));
  }
  auto result = run_backward(root_edges(tensors), grads, keep, create_graph, captures);
  GradModeGuard mode(create_graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!result[i].defined()) continue;
    auto& m = autograd_meta(inputs[i]);
    Tensor g = create_graph ? result[i] : result[i].detach();
    m.grad = m.grad.defined() ? m.grad + g : g.clone();
  }
}
}  // namespace autograd

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph,
                      const std::vector<Tensor>& inputs) const {
  autograd::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph, inputs);
}

}  // namespace kiln
