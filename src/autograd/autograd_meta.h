// Per-tensor autograd state, allocated the first time autograd touches a tensor.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "core/pool.h"
#include "core/tensor_impl.h"
#include "kiln/tensor.h"

namespace kiln::autograd {

struct Node;

struct AutogradMeta final : AutogradMetaInterface {
  bool requires_grad = false;  // leaves only; non-leaves require grad through grad_fn
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: the AccumulateGrad node, made on demand
  // Hooks on the gradient w.r.t. a leaf, run before it is accumulated.
  std::vector<std::pair<int64_t, Tensor::Hook>> hooks;
  bool retains_grad = false;
  // Note [View rebase]: a view with history records the version it was made at; a later
  // write to its storage (through its base or another view) remakes its history from its
  // base's (as PyTorch's views regenerate their grad_fn), on the next read of its grad_fn.
  bool view_of_base = false;
  uint32_t view_version = 0;

  // Every floating tracer a recording makes gets one (Note [Deferred tracer autograd]), as
  // every TensorImpl is pooled: from the thread's free lists, not malloc. (The class is final:
  // whatever deletes one, through the interface too, gives back this size.)
  static void* operator new(size_t) { return PoolAllocator<AutogradMeta>().allocate(1); }
  static void operator delete(void* p) { PoolAllocator<AutogradMeta>().deallocate(static_cast<AutogradMeta*>(p), 1); }
};

AutogradMeta& autograd_meta(const Tensor& t);          // creates it when missing
AutogradMeta* autograd_meta_or_null(const Tensor& t);  // never creates

}  // namespace kiln::autograd
