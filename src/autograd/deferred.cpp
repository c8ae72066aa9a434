#include "autograd/deferred.h"

#include <utility>

#include "autograd/autograd_meta.h"
#include "autograd/node.h"
#include "ops/save_rule.h"
#include "kiln/error.h"

namespace kiln::autograd {

namespace {
// Stands where a deferred node will be; never run.
struct DeferredNode final : Node {
  std::string name() const override { return "DeferredNode"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override {
    KILN_FAIL("internal: a deferred autograd node was run before it was built");
  }
};

// The recordings of this thread that defer, innermost last.
thread_local DeferredGraph* tls_deferred = nullptr;
thread_local DeferredCounts tls_counts;
thread_local int tls_materializing = 0;
}  // namespace

DeferredCounts deferred_counts() { return tls_counts; }

const std::shared_ptr<Node>& deferred_node() {
  static const std::shared_ptr<Node> node = std::make_shared<DeferredNode>();
  return node;
}

// Note [Recording buffers] (compile/capture/recording.cpp): a recording's deferred graph grows
// its lists op by op; the outermost one of a thread takes the lists an earlier one left
// empty, with their capacity, and gives them back cleared.
struct DeferredBuffers {
  std::vector<DeferredGraph::Entry> entries;
  std::vector<Tensor> outputs;
  std::vector<uint32_t> input_versions, output_versions;
  bool in_use = false;
};
thread_local DeferredBuffers tls_deferred_buffers;

DeferredGraph::DeferredGraph() : prev_(tls_deferred) {
  tls_deferred = this;
  if (!tls_deferred_buffers.in_use) {
    tls_deferred_buffers.in_use = owns_buffers_ = true;
    swap_buffers();
  }
}

DeferredGraph::~DeferredGraph() {
  // Destroyed in reverse order of creation (they live on the stack of nested calls).
  tls_deferred = prev_;
  if (owns_buffers_) {
    clear();
    swap_buffers();
    tls_deferred_buffers.in_use = false;
  }
}

void DeferredGraph::swap_buffers() {
  std::swap(entries_, tls_deferred_buffers.entries);
  std::swap(outputs_, tls_deferred_buffers.outputs);
  std::swap(input_versions_, tls_deferred_buffers.input_versions);
  std::swap(output_versions_, tls_deferred_buffers.output_versions);
}

void DeferredGraph::add(OpId op, std::vector<Tensor>&& inputs, Attrs&& attrs, std::vector<Tensor>& outputs) {
  ++tls_counts.deferred;
  // Note [View rebase] of an input, now: eager's node takes its edges as the op runs, and a view
  // written through its base since its history was recorded is remade from the base's history
  // then. Built later (materializing rebases no view), the node took the view's old history:
  // `w = v * 1; base.mul_(-1); v.masked_fill_(...)` on a view input after a graph break lost
  // the mul_ in v's gradient (fuzz seed 13005682). Real tensors only: a real view's history is
  // remade eagerly (rebase_view); a tracer view's would be a deferred as_strided's placeholder,
  // which building the nodes gives to that op's output, not to the view (seeds 12119315, 13117729).
  for (const Tensor& t : inputs)
    if (const AutogradMeta* m = t.defined() && !t.unsafe_impl()->is_tracer() ? autograd_meta_or_null(t) : nullptr)
      if (m->view_of_base && m->grad_fn && m->view_version != t._version()) (void)gradient_edge(t);
  for (const Tensor& t : inputs) input_versions_.push_back(t.defined() ? t._version() : 0);
  entries_.push_back(Entry{op, std::move(attrs), std::move(inputs), static_cast<uint32_t>(outputs_.size()),
                           static_cast<uint32_t>(outputs.size())});
  const std::shared_ptr<Node>& placeholder = deferred_node();
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    outputs_.push_back(t);
    output_versions_.push_back(t._version());
    if (!is_floating_point(t.dtype())) continue;  // as set_history
    auto& m = autograd_meta(t);
    m.grad_fn = placeholder;
    m.output_nr = static_cast<uint32_t>(k);
    m.requires_grad = false;
  }
}

void DeferredGraph::materialize() {
  if (entries_.empty()) return;
  KILN_CHECK(!materializing_, "internal: deferred autograd nodes built while they are being built");
  materializing_ = true;
  ++tls_materializing;
  // Take the lists first: building a node may ask for the graph again (gradient_edge).
  std::vector<Entry> entries = std::exchange(entries_, {});
  std::vector<Tensor> outputs = std::exchange(outputs_, {});
  std::vector<uint32_t> in_versions = std::exchange(input_versions_, {});
  std::vector<uint32_t> out_versions = std::exchange(output_versions_, {});
  try {
    size_t next_input = 0;
    std::vector<Tensor> outs;
    for (Entry& e : entries) {
      outs.assign(outputs.begin() + e.first_output, outputs.begin() + e.first_output + e.num_outputs);
      // An output whose history an in-place op replaced since (fill_ after the op) keeps it.
      struct Kept {
        size_t k;
        std::shared_ptr<Node> grad_fn;
        uint32_t output_nr;
        bool requires_grad;
      };
      std::vector<Kept> kept;
      for (size_t k = 0; k < outs.size(); ++k)
        if (AutogradMeta* m = outs[k].defined() ? autograd_meta_or_null(outs[k]) : nullptr)
          if (m->grad_fn != deferred_node()) kept.push_back({k, m->grad_fn, m->output_nr, m->requires_grad});
      // Note [View rebase] of a tracer view, as eager's node would have taken it when the op ran:
      // written since its history was recorded (`v = x.narrow(...)`, a no-grad `v.add_(1)`, then
      // `v * 2`), its history is remade as as_strided of its base (fuzz seed 22000735). Built here
      // without a kernel or a recording: only the node is needed.
      for (size_t k = 0; k < e.inputs.size(); ++k) {
        const Tensor& t = e.inputs[k];
        if (!t.defined() || !t.unsafe_impl()->is_tracer() || !t.unsafe_impl()->view_base) continue;
        AutogradMeta* m = autograd_meta_or_null(t);
        const uint32_t version = in_versions[next_input + k];
        if (!m || !m->view_of_base || !m->grad_fn || m->grad_fn == deferred_node() || m->view_version == version)
          continue;
        Tensor base(t.unsafe_impl()->view_base);
        if (base.requires_grad())
          set_as_strided_history(t, base);
        else
          m->grad_fn = nullptr;  // the base lost its history: so does the view (rebase_view)
        autograd_meta(t).view_version = version;
      }
      (void)make_op_node(e.op, e.inputs, std::move(e.attrs), outs, in_versions.data() + next_input,
                         out_versions.data() + e.first_output);
      for (const Kept& c : kept) {
        AutogradMeta& m = autograd_meta(outs[c.k]);
        m.grad_fn = c.grad_fn;
        m.output_nr = c.output_nr;
        m.requires_grad = c.requires_grad;
      }
      next_input += e.inputs.size();
      ++tls_counts.built;
    }
  } catch (...) {
    materializing_ = false;
    --tls_materializing;
    throw;
  }
  materializing_ = false;
  --tls_materializing;
}

void DeferredGraph::saved_versions(std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>>& out,
                                  std::vector<int64_t>* producers) const {
  size_t next_input = 0;
  for (const Entry& e : entries_) {
    // Note [Saving what the VJP reads]: what the node will save (its inputs' requires_grad
    // stands for its next edges).
    uint64_t needs = 0;
    for (size_t i = 0; i < e.inputs.size() && i < 64; ++i)
      if (e.inputs[i].defined() && e.inputs[i].requires_grad()) needs |= uint64_t{1} << i;
    const SaveSet saves = save_set(e.op, needs, e.attrs);
    for (size_t k = 0; k < e.inputs.size(); ++k)
      if (saves_input(e.op, saves, k) && !(k < 64 && ((saves.geometry >> k) & 1u)) && e.inputs[k].defined() &&
          e.inputs[k].unsafe_impl()->version)
        out.emplace_back(e.inputs[k].unsafe_impl()->version, input_versions_[next_input + k]);
    for (uint32_t k = e.first_output; k < e.first_output + e.num_outputs; ++k)
      if (saves_output(e.op, saves, k - e.first_output) && outputs_[k].defined() && outputs_[k].unsafe_impl()->version)
        out.emplace_back(outputs_[k].unsafe_impl()->version, output_versions_[k]);
    if (producers) {  // the tracer value of the node's first output (its graph node), or -1
      int64_t v = -1;
      for (uint32_t k = e.first_output; k < e.first_output + e.num_outputs && v < 0; ++k)
        if (outputs_[k].defined() && outputs_[k].unsafe_impl()->is_tracer()) v = outputs_[k].unsafe_impl()->tracer_value;
      producers->resize(out.size(), v);
    }
    next_input += e.inputs.size();
  }
}

bool DeferredGraph::saved_modified() const {
  std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>> saved;
  saved_versions(saved);
  for (const auto& [counter, version] : saved)
    if (counter->version.load() != version) return true;
  return false;
}

void DeferredGraph::clear() {
  entries_.clear();
  outputs_.clear();
  input_versions_.clear();
  output_versions_.clear();
}

void set_as_strided_history(const Tensor& view, const Tensor& base) {
  std::vector<Tensor> outs{view};
  (void)make_op_node(OpId::as_strided, {base},
                     Attrs{view.sizes().vec(), view.strides().vec(), static_cast<int64_t>(view.storage_offset())}, outs,
                     nullptr, nullptr);
  AutogradMeta& m = autograd_meta(view);  // Note [View rebase]: the history is current
  m.view_of_base = view_follows_base(view.unsafe_impl());
  m.view_version = view._version();
}

bool materializing_deferred() { return tls_materializing > 0; }

void materialize_deferred() {
  // Outer recordings first: an inner one's ops may use the outer one's tracers.
  std::vector<DeferredGraph*> stack;
  for (DeferredGraph* g = tls_deferred; g; g = g->prev()) stack.push_back(g);
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) (*it)->materialize();
}

}  // namespace kiln::autograd
