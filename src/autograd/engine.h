#pragma once
#include <vector>

#include "autograd/node.h"
#include "kiln/autograd.h"

namespace kiln::autograd {

// Sets grad mode for a scope (the engine runs VJPs with grad mode = create_graph).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};

// Runs backward from `roots` seeded with `root_grads`. Without captures,
// AccumulateGrad nodes write .grad; with captures, the gradients arriving at
// each captured edge are returned instead and .grad is left alone.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
                                 bool create_graph, const std::vector<Edge>& captures = {});

// How many backward passes this thread has started: a recording compares it
// before and after to learn that the code it captured ran a backward.
uint64_t backward_runs();

}  // namespace kiln::autograd
