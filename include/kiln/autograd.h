// Reverse-mode automatic differentiation: grad-mode guards, autograd::grad,
// custom functions, and gradcheck.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// RAII guards, as torch.no_grad() / torch.enable_grad() / torch.inference_mode().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};
// Like NoGradGuard; tensors made inside are never recorded by autograd. (kiln
// keeps no separate inference-tensor type, so this is NoGradGuard by another name.)
class InferenceModeGuard : public NoGradGuard {};

namespace autograd {

// d(outputs)/d(inputs) · grad_outputs, without touching .grad. Unreachable
// inputs give an error unless allow_unused (then an undefined tensor).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

// backward() over several roots at once.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});

// Custom autograd function, as torch.autograd.Function:
//   struct MyExp : kiln::autograd::Function<MyExp> {
//     static Tensor forward(AutogradContext* ctx, Tensor x) {
//       auto y = x.exp(); ctx->save_for_backward({y}); return y; }
//     static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
//       return {g[0] * ctx->get_saved_variables()[0]}; }
//   };
//   Tensor y = MyExp::apply(x);
// forward runs with grad mode off; backward's ops are recorded when create_graph is set.
class AutogradContext {
 public:
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> get_saved_variables() const;
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  // Free-form state for backward (like ctx.saved_data).
  std::vector<double> saved_data;

 private:
  friend struct CustomFunctionAccess;
  std::shared_ptr<struct CustomState> state_;  // saved tensors and the node (src/autograd)
  std::vector<bool> needs_input_grad_;
  std::vector<TensorImpl*> non_differentiable_;
};

using CustomForward = std::function<std::vector<Tensor>(AutogradContext*, const std::vector<Tensor>&)>;
using CustomBackward = std::function<std::vector<Tensor>(AutogradContext*, const std::vector<Tensor>&)>;
// The untyped core of Function<T>::apply.
std::vector<Tensor> apply_custom_function(const std::string& name, const std::vector<Tensor>& inputs,
                                          CustomForward forward, CustomBackward backward);

template <class Derived>
struct Function {
  template <class... Args>
  static Tensor apply(Args&&... args) {
    std::vector<Tensor> inputs{Tensor(args)...};
    auto outs = apply_custom_function(
        typeid(Derived).name(), inputs,
        [](AutogradContext* ctx, const std::vector<Tensor>& in) {
          return call_forward(ctx, in, std::make_index_sequence<sizeof...(Args)>{});
        },
        [](AutogradContext* ctx, const std::vector<Tensor>& grads) { return Derived::backward(ctx, grads); });
    return outs.at(0);
  }

 private:
  template <size_t... I>
  static std::vector<Tensor> call_forward(AutogradContext* ctx, const std::vector<Tensor>& in,
                                          std::index_sequence<I...>) {
    auto out = Derived::forward(ctx, in[I]...);
    if constexpr (std::is_same_v<decltype(out), Tensor>) return {out};
    else return out;
  }
};

}  // namespace autograd

// Checks analytical VJPs of fn against central finite differences in float64.
// Inputs must be float64 and the ones with requires_grad are perturbed. Returns
// true when all Jacobian entries agree within atol + rtol * |numerical|; on
// failure, throws kiln::Error naming the input and the worst entry if
// raise_exception, else returns false.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  bool raise_exception = true;
  bool check_backward_twice = false;  // second-order: also gradcheck the VJP itself
};
bool gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace kiln
