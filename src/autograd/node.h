// The autograd graph: a Node per recorded op, edges to the nodes that
// produced its inputs, and AccumulateGrad nodes for leaves.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "ops/registry.h"

namespace kiln::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;  // which output of the forward op `fn` this gradient belongs to
  bool valid() const { return fn != nullptr; }
};

// Note [Saved tensors]
// A node keeps what its VJP reads. Inputs are kept as they are; outputs are
// kept without their grad_fn (which is this node: keeping it would make a
// cycle) and get it back, through a weak pointer, when unpacked for a
// create_graph backward. The version at save time is recorded so an in-place
// change before backward is detected (Note [Version counter]).
// Note [Saved tracer versions]: while a compiled call is recorded, every tracer an autograd
// node saves is noted with its version; a graph in which one was written later keeps eager's
// autograd (its backward then raises eager's "modified by an in-place operation"), since the
// functionalized AOT backward would read the value from before the write.
using SavedTracerLog = std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>>;
// Installs this thread's log (null: none); returns the previous one.
SavedTracerLog* set_saved_tracer_log(SavedTracerLog* log);
// Per entry of the log: the tracer value of the first output of the op node that saved it (the
// graph node whose gradient runs that node's VJP), or -1 (Note [Versions eager would check]).
using SavedProducerLog = std::vector<int64_t>;
SavedProducerLog* set_saved_producer_log(SavedProducerLog* log);

class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner);
  // Saved later than the op ran (Note [Deferred tracer autograd]): `version` is t's then.
  SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner, uint32_t version);
  bool defined() const { return defined_; }
  // Returns the tensor, checking it was not modified in place since it was saved.
  Tensor unpack(const char* op_name, const std::shared_ptr<Node>& owner) const;
  void release();

 private:
  Tensor data_;
  bool defined_ = false;
  bool is_output_ = false;
  bool released_ = false;
  bool requires_grad_ = false;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
};

struct Node : std::enable_shared_from_this<Node> {
  Node();
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  // grads: one per output of the forward op (undefined where none flowed).
  // Returns one gradient per next edge (undefined where not needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual void release_saved() {}

  std::vector<Edge> next_edges;        // one per forward input
  std::vector<TensorMeta> output_meta;  // forward outputs: to fill missing grads with zeros
  // Hooks on the gradient w.r.t. forward output k (Tensor::register_hook on a non-leaf).
  std::map<uint32_t, std::vector<std::pair<int64_t, Tensor::Hook>>> pre_hooks;
  // Non-leaf outputs that asked to retain their gradient.
  std::map<uint32_t, std::weak_ptr<TensorImpl>> retained;
  uint64_t sequence_nr;  // later nodes run first when several are ready
  // Set by the engine before apply: release_saved() follows it (no retain_graph), so apply
  // may consume what it saved (the compiled backward frees saved tensors as it goes).
  bool releases_after_apply = false;
};

// The node for an op of the table: calls its VJP rule.
struct OpNode : Node {
  OpId op;
  Attrs attrs;
  std::vector<SavedTensor> saved_inputs;
  std::vector<SavedTensor> saved_outputs;
  std::vector<TensorMeta> input_meta;
  bool released = false;

  std::string name() const override;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override;
};

// Accumulates the incoming gradient into a leaf's .grad.
struct AccumulateGrad : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> v) : variable(std::move(v)) {}
  std::shared_ptr<TensorImpl> variable;
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
};

// Next edge for an input tensor: its grad_fn, its AccumulateGrad, or none.
struct AutogradMeta;
// Remakes a view's history from its base's after a write (Note [View rebase] in node.cpp).
void rebase_view(const Tensor& t, AutogradMeta& m);
// Whether a view's history is its base's, so that a write rebases it (Note [View rebase]).
bool view_follows_base(const TensorImpl* t);
Edge gradient_edge(const Tensor& t);
// Zeros (or undefined grads expanded) matching a TensorMeta.
Tensor zeros_for(const TensorMeta& m);
TensorMeta meta_of(const Tensor& t);
// Records `node` as the producer of `outputs` (sets grad_fn / output_nr).
void set_history(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node);
// The OpNode of an op that ran on `inputs` giving `outputs`, which become its outputs; attrs
// are moved into it. Versions (null: the tensors' current ones) are those when the op ran.
std::shared_ptr<OpNode> make_op_node(OpId op, const std::vector<Tensor>& inputs, Attrs&& attrs,
                                     std::vector<Tensor>& outputs, const uint32_t* input_versions = nullptr,
                                     const uint32_t* output_versions = nullptr);

}  // namespace kiln::autograd
