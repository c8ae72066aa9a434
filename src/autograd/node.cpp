#include "autograd/node.h"

#include <optional>

#include "autograd/autograd_meta.h"
#include "autograd/deferred.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "ops/save_rule.h"

namespace kiln::autograd {

namespace {
std::atomic<uint64_t> g_sequence_nr{0};
}

Node::Node() : sequence_nr(g_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

AutogradMeta& autograd_meta(const Tensor& t) {
  TensorImpl* impl = t.unsafe_impl();
  if (!impl->autograd) impl->autograd = std::make_unique<AutogradMeta>();
  // The only AutogradMetaInterface there is: these two functions make every one.
  return static_cast<AutogradMeta&>(*impl->autograd);
}
AutogradMeta* autograd_meta_or_null(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.unsafe_impl()->autograd.get()) : nullptr;
}

// Note [Version counter]
// Every in-place write bumps the counter shared by a tensor and its views.
// SavedTensor remembers the value when saved; a mismatch at backward means the
// VJP would read a modified value, which is an error rather than a wrong gradient.
SavedTensor::SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner)
    : SavedTensor(t, is_output, owner, t.defined() ? t._version() : 0) {}

namespace {
thread_local SavedTracerLog* tls_saved_tracer_log = nullptr;
}  // namespace
SavedTracerLog* set_saved_tracer_log(SavedTracerLog* log) { return std::exchange(tls_saved_tracer_log, log); }
namespace {
thread_local SavedProducerLog* tls_saved_producer_log = nullptr;
}  // namespace
SavedProducerLog* set_saved_producer_log(SavedProducerLog* log) { return std::exchange(tls_saved_producer_log, log); }

SavedTensor::SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner, uint32_t version)
    : defined_(t.defined()), is_output_(is_output) {
  if (!defined_) return;
  version_ = version;
  if (tls_saved_tracer_log)  // Note [Saved tracer versions] (graph inputs too: a later write in the graph)
    tls_saved_tracer_log->emplace_back(t.unsafe_impl()->version, version);
  requires_grad_ = t.requires_grad();
  if (is_output && t.grad_fn() == owner) {
    // Keep a detached alias: the output's grad_fn is `owner` (Note [Saved tensors]).
    data_ = make_view(t, t.sizes(), t.strides(), t.storage_offset());
    data_.unsafe_impl()->view_base = t.unsafe_impl()->view_base;
    data_.unsafe_impl()->is_wrapped_number = t.unsafe_impl()->is_wrapped_number;
    output_nr_ = t.output_nr();
  } else {
    data_ = t;
    is_output_ = false;
  }
}

Tensor SavedTensor::unpack(const char* op_name, const std::shared_ptr<Node>& owner) const {
  if (!defined_) return {};
  KILN_CHECK(!released_, "Trying to backward through the graph a second time (or directly access saved tensors "
             "after they have already been freed) in ", op_name,
             ". Saved intermediate values of the graph are freed when you call backward(); pass "
             "retain_graph=true if you need to backward through the graph a second time.");
  KILN_CHECK(data_._version() == version_, "one of the tensors needed for gradient computation has been modified "
             "by an in-place operation: the ", (is_output_ ? "output" : "input"), " of ", op_name, " of shape ",
             shape_str(data_.sizes()), " is at version ", data_._version(), "; expected version ", version_,
             " instead.");
  if (is_output_ && requires_grad_) {
    // Give the alias back its history for create_graph backward passes.
    Tensor t = make_view(data_, data_.sizes(), data_.strides(), data_.storage_offset());
    t.unsafe_impl()->view_base = data_.unsafe_impl()->view_base;
    auto& m = autograd_meta(t);
    m.grad_fn = owner;
    m.output_nr = output_nr_;
    return t;
  }
  return data_;
}

void SavedTensor::release() {
  data_ = Tensor();
  released_ = true;
}

std::string OpNode::name() const { return std::string(op_name(op)) + "Backward"; }

void OpNode::release_saved() {
  for (auto& s : saved_inputs) s.release();
  for (auto& s : saved_outputs) s.release();
  released = true;
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>&& grads) {
  const OpInfo& info = op_info(op);
  VjpCall vc{op, attrs, {}, {}, {}, input_meta, {}};
  auto self = shared_from_this();
  vc.inputs.reserve(saved_inputs.size());
  for (auto& s : saved_inputs) vc.inputs.push_back(s.unpack(info.name, self));
  for (auto& s : saved_outputs) vc.outputs.push_back(s.unpack(info.name, self));
  vc.inputs.resize(input_meta.size());
  vc.outputs.resize(output_meta.size());
  if (!info.has(UNDEFINED_GRADS))
    for (size_t k = 0; k < grads.size(); ++k)
      if (!grads[k].defined() && is_floating_point(output_meta[k].dtype)) grads[k] = zeros_for(output_meta[k]);
  vc.grads = std::move(grads);
  vc.needs_grad.resize(next_edges.size());
  for (size_t i = 0; i < next_edges.size(); ++i) vc.needs_grad[i] = next_edges[i].valid();
  std::vector<Tensor> result = info.vjp(vc);
  result.resize(next_edges.size());
  for (size_t i = 0; i < result.size(); ++i) {
    if (!next_edges[i].valid()) {
      result[i] = Tensor();
      continue;
    }
    Tensor& g = result[i];
    if (!g.defined()) continue;
    const TensorMeta& m = input_meta[i];
    KILN_CHECK(g.sizes() == IntArrayRef(m.sizes), "internal: the VJP of ", info.name, " returned a gradient of shape ",
               shape_str(g.sizes()), " for input ", i, " of shape ", shape_str(m.sizes));
    if (g.dtype() != m.dtype) g = g.to(m.dtype);
  }
  return result;
}

// Note [Stealing the gradient]: a leaf's first gradient becomes its .grad without a copy (as
// PyTorch's AccumulateGrad) only when nothing else can observe the buffer, since later
// accumulations write .grad in place. The handle count alone is not enough: a hook may keep a
// detach()ed alias or a view of the gradient (another impl on the same storage), and a VJP's
// result is often a view (transpose, reshape of a reduction) whose base impl is otherwise dead.
// So the gradient is stolen when its impl has one owner, its storage is held only by it and by
// its view base (itself held only by the view), it is contiguous, and it spans all of its base
// (a slice would keep a larger buffer alive behind .grad). Tensors without storage (tracers)
// keep the handle rule: there is no buffer, and a view of a tracer stands for another value.
namespace {
bool can_steal_grad(const Tensor& g) {
  const TensorImpl* t = g.unsafe_impl();
  if (g.impl_ptr().use_count() != 1 || !t->is_contiguous) return false;
  if (!t->storage) return !g.is_view();
  const TensorImpl* base = t->view_base.get();
  if (!base) return t->storage.use_count() == 1;
  return t->view_base.use_count() == 1 && !base->view_base && t->storage.use_count() == 2 &&
         base->storage == t->storage && t->storage_offset == 0 && t->numel == base->numel &&
         t->dtype == base->dtype;
}
}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads.at(0));
  Tensor var(variable);
  auto& meta = autograd_meta(var);
  for (auto& [id, hook] : meta.hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  if (!g.defined()) return {};
  if (g.dtype() != var.dtype()) g = g.to(var.dtype());
  if (!meta.grad.defined()) {
    if (is_grad_enabled()) {
      meta.grad = g;  // create_graph: keep the graph of the gradient
    } else {
      // Steal a gradient nobody else can see; copy one that someone else may still hold.
      meta.grad = can_steal_grad(g) ? g.detach() : g.detach().clone();
    }
  } else if (is_grad_enabled()) {
    meta.grad = meta.grad + g;
  } else {
    meta.grad.add_(g);
  }
  return {};
}

// Note [View rebase]: the storage was written since the view's history was recorded; the
// write rebased the base, so the view is remade from the base's history now.
// PyTorch regenerates a view's grad_fn lazily, when its base's version changed, from the base's
// current grad_fn (as_strided of the base); a base without history that does not require grad
// gives a view that does not require grad either. kiln's zero_ (or a copy_ of a value without
// grad) leaves its tensor with no history, so a view of it taken before loses its history too:
// the gradient no longer flows into what the view showed before (seed 3314).
// Only views whose history is their base's are rebased (view_of_base is set when the base
// requires grad as the view is made): kiln's view_base is the storage's root, not an autograd
// base, and a leaf that requires grad may itself be a view of a root that does not (a detach()ed
// strided or expanded input); its views' history is the leaf's, which a write under no_grad
// keeps (seeds 2559, 2798, 4556).
bool view_follows_base(const TensorImpl* t) { return t->view_base && Tensor(t->view_base).requires_grad(); }

void rebase_view(const Tensor& t, AutogradMeta& m) {
  m.view_version = t._version();
  Tensor base(t.unsafe_impl()->view_base);
  if (!base.requires_grad()) {
    m.grad_fn = nullptr;  // the write left the base without history
    m.output_nr = 0;
    return;
  }
  EnableGradGuard grad_on;
  // A real tensor's history is eager's: remade while a compiled call is recorded (the view is
  // the input of a graph after a break), a recorded as_strided would give it a tracer's node,
  // deferred and then dropped with the graph's autograd. A tracer view's belongs to the graph.
  std::optional<RecordLayerGuard> eager;
  if (!t.unsafe_impl()->is_tracer()) eager.emplace(nullptr);
  Tensor v = call_op1(OpId::as_strided, {base}, {t.sizes().vec(), t.strides().vec(), t.storage_offset()});
  auto* vm = autograd_meta_or_null(v);
  if (!vm || !vm->grad_fn) return;
  m.grad_fn = vm->grad_fn;
  m.output_nr = vm->output_nr;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta_or_null(t);
  if (!m) return {};
  if (m->grad_fn == deferred_node()) [[unlikely]] {
    materialize_deferred();  // Note [Deferred tracer autograd]
    KILN_CHECK(m->grad_fn != deferred_node(),
               "compile: the autograd graph of a tensor traced by a compiled call that did not finish is gone");
  }
  if (m->view_of_base && m->grad_fn && m->view_version != t._version() && !materializing_deferred()) [[unlikely]]
    rebase_view(t, *m);
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  auto acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->output_meta = {meta_of(t)};
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

TensorMeta meta_of(const Tensor& t) {
  TensorMeta m;
  m.sizes.assign(t.sizes().begin(), t.sizes().end());
  m.dtype = t.dtype();
  m.device = t.device();
  return m;
}

Tensor zeros_for(const TensorMeta& m) { return zeros(m.sizes, TensorOptions(m.dtype).device(m.device)); }

void set_history(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& t = outputs[k];
    if (!t.defined() || !is_floating_point(t.dtype())) continue;
    auto& m = autograd_meta(t);
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(k);
    m.requires_grad = false;
  }
}

std::shared_ptr<OpNode> make_op_node(OpId op, const std::vector<Tensor>& inputs, Attrs&& attrs,
                                     std::vector<Tensor>& outputs, const uint32_t* input_versions,
                                     const uint32_t* output_versions) {
  const OpInfo& info = op_info(op);
  auto node = std::make_shared<OpNode>();
  node->op = op;
  node->attrs = std::move(attrs);
  node->next_edges.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
    node->input_meta.push_back(t.defined() ? meta_of(t) : TensorMeta{});
    // Note [Gradient in the operand's layout]: a VJP that gives a gradient in its input's layout
    // reads the strides here when the input itself was not saved; contiguous ones stay implied.
    if (t.defined() && !t.unsafe_impl()->is_contiguous)
      node->input_meta.back().strides.assign(t.strides().begin(), t.strides().end());
  }
  node->output_meta.reserve(outputs.size());  // each list allocated once (Note [Cheap dispatch])
  for (const Tensor& t : outputs) node->output_meta.push_back(meta_of(t));
  // Note [Saving what the VJP reads]: only what the VJP reads for the inputs needing a gradient.
  uint64_t needs = 0;
  for (size_t i = 0; i < node->next_edges.size() && i < 64; ++i)
    if (node->next_edges[i].valid()) needs |= uint64_t{1} << i;
  const SaveSet saves = save_set(op, needs, node->attrs);
  const size_t logged_before = tls_saved_tracer_log ? tls_saved_tracer_log->size() : 0;
  if (static_cast<uint8_t>(info.save) & static_cast<uint8_t>(SaveMask::SaveIn)) {
    node->saved_inputs.reserve(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& t = inputs[k];
      if (!saves_input(saves, k)) {
        node->saved_inputs.emplace_back();
      } else if (k < 64 && ((saves.geometry >> k) & 1u) && t.defined()) {
        Tensor layout = make_meta_tensor(t.sizes(), t.strides(), t.dtype(), t.device());
        layout.unsafe_impl()->storage_offset = t.storage_offset();
        node->saved_inputs.emplace_back(layout, false, node);
      } else if (input_versions && t.defined()) {
        node->saved_inputs.emplace_back(t, false, node, input_versions[k]);
      } else {
        node->saved_inputs.emplace_back(t, false, node);
      }
    }
  }
  set_history(outputs, node);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    if (!t.defined() || !is_floating_point(t.dtype()) || !view_follows_base(t.unsafe_impl())) continue;
    auto& m = autograd_meta(t);  // Note [View rebase]
    m.view_of_base = true;
    m.view_version = output_versions ? output_versions[k] : t._version();
  }
  if (static_cast<uint8_t>(info.save) & static_cast<uint8_t>(SaveMask::SaveOut)) {
    node->saved_outputs.reserve(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Tensor& t = outputs[k];
      if (!saves_output(op, saves, k))
        node->saved_outputs.emplace_back();
      else if (output_versions && t.defined())
        node->saved_outputs.emplace_back(t, true, node, output_versions[k]);
      else
        node->saved_outputs.emplace_back(t, true, node);
    }
  }
  if (tls_saved_tracer_log && tls_saved_producer_log) {  // Note [Versions eager would check]
    int64_t v = -1;
    for (const Tensor& t : outputs)
      if (t.defined() && t.unsafe_impl()->is_tracer()) {
        v = t.unsafe_impl()->tracer_value;
        break;
      }
    tls_saved_producer_log->resize(logged_before, -1);  // entries other savers logged: unknown
    tls_saved_producer_log->resize(tls_saved_tracer_log->size(), v);
  }
  return node;
}

}  // namespace kiln::autograd
