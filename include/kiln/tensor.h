// kiln::Tensor: a handle to a reference-counted TensorImpl (sizes, strides,
// storage offset, dtype, device, shared storage, autograd state). Copies share
// the impl, as torch::Tensor does. A tracer tensor (while compiling) is a
// Tensor whose impl has metadata but no storage; user code cannot tell.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/array_ref.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/scalar.h"
#include "kiln/symint.h"
#include "kiln/tensor_options.h"

namespace kiln {

struct TensorImpl;
namespace autograd {
struct Node;
}
namespace indexing {
class TensorIndex;
}

// Note [Tensor methods]
// For every op that ops.def flags METHOD, x.name(args...) is name(x, args...), as PyTorch's
// `variants: method`. One forwarding template per op, from a list generated out of ops.def
// (cmake/tensor_methods.cmake): the free function is found by argument-dependent lookup at the
// call, so each of its overloads and defaults is a method overload too, and a call it does not
// take is a compile error. A braced list cannot be deduced through a template, so the typed
// methods below take x.sum({0, 1}) and x.view({-1, 4}).
namespace method_detail {
#define KILN_TENSOR_METHOD(name)                                  \
  template <class... A>                                           \
  auto name##_(A&&... a)->decltype(name(std::forward<A>(a)...)) { \
    return name(std::forward<A>(a)...);                           \
  }
#include "kiln/tensor_methods.inc"
#undef KILN_TENSOR_METHOD
}  // namespace method_detail

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  int64_t dim() const;
  int64_t ndimension() const { return dim(); }
  SymInt size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  IntArrayRef sizes() const;
  IntArrayRef strides() const;
  SymIntArrayRef sym_sizes() const;  // symbolic while compiling with dynamic shapes
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const;
  bool is_floating_point() const { return kiln::is_floating_point(dtype()); }
  size_t element_size() const { return itemsize(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool has_storage() const;
  // Same storage (views of one base, or the same tensor).
  bool is_alias_of(const Tensor& o) const;

  // ---- data ----
  void* data_ptr() const;  // start of this tensor's elements (storage + offset)
  template <class T>
  T* data_ptr() const;     // checks that T matches dtype()
  template <class T>
  T item() const;          // one-element tensor to a C++ value
  Scalar item() const;
  // All elements in row-major order, converted to T (copies to the CPU).
  template <class T>
  std::vector<T> to_vector() const;
  std::string to_string() const;

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool r = true);
  Tensor& set_requires_grad(bool r) { return requires_grad_(r); }
  const Tensor& grad() const;  // undefined until a backward pass reaches this leaf
  Tensor& mutable_grad();
  void set_grad(const Tensor& g);
  bool is_leaf() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  uint32_t output_nr() const;
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, const std::vector<Tensor>& inputs = {}) const;
  Tensor detach() const;
  Tensor& detach_();
  // Makes this tensor hold `src`'s data, shape, dtype and device while keeping its identity and
  // autograd state (as torch's `param.data = src`); used by Module::to. Leaves only.
  void set_data(const Tensor& src);
  void retain_grad() const;
  bool retains_grad() const;
  // Hook on the gradient w.r.t. this tensor; may return a replacement (or undefined to keep).
  // Returns a handle for remove_hook.
  using Hook = std::function<Tensor(const Tensor&)>;
  int64_t register_hook(Hook hook) const;
  void remove_hook(int64_t handle) const;
  uint32_t _version() const;
  bool is_view() const;
  Tensor _base() const;  // the tensor this one is a view of (undefined if none)

  // ---- conversion and copies ----
  Tensor to(DType t, bool copy = false) const;
  // As torch's to(device, dtype, non_blocking, copy): with non_blocking, a copy between pinned host
  // memory (pin_memory()) and a GPU is queued on the stream and returns at once.
  Tensor to(Device d, std::optional<DType> t = std::nullopt, bool non_blocking = false, bool copy = false) const;
  Tensor to(const TensorOptions& o, bool copy = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(bool non_blocking = false) const { return to(Device(DeviceType::CUDA), std::nullopt, non_blocking); }
  // A copy in page-locked host memory (itself when it already is): copies from it to a GPU can be
  // asynchronous. Needs CUDA. is_pinned(): whether this tensor's memory is page-locked.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor float_() const { return to(kFloat32); }
  Tensor double_() const { return to(kFloat64); }
  Tensor long_() const { return to(kInt64); }
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& fill_(const Scalar& v);
  Tensor& zero_();
  Tensor& normal_(double mean = 0, double std = 1);
  Tensor& uniform_(double from = 0, double to = 1);

  // ---- views and shape ----
  Tensor view(SymIntArrayRef size) const;
  Tensor view(DType t) const = delete;  // bit reinterpretation: not supported
  Tensor reshape(SymIntArrayRef size) const;
  Tensor view_as(const Tensor& o) const;
  Tensor reshape_as(const Tensor& o) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, SymIntArrayRef sizes) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor swapaxes(int64_t axis0, int64_t axis1) const;  // aliases of transpose
  Tensor swapdims(int64_t dim0, int64_t dim1) const;
  // Aliases with no op of their own: div, linalg::inv, kiln::matrix_power, kiln::equal.
  Tensor true_divide(const Tensor& o) const;
  Tensor true_divide(const Scalar& o) const;
  Tensor inverse() const;
  Tensor matrix_power(int64_t n) const;
  bool equal(const Tensor& o) const;
  Tensor t() const;
  Tensor mT() const;
  Tensor expand(SymIntArrayRef size) const;
  Tensor expand_as(const Tensor& o) const;
  Tensor repeat(SymIntArrayRef repeats) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze(IntArrayRef dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor narrow(int64_t dim, SymInt start, SymInt length) const;
  Tensor select(int64_t dim, SymInt index) const;
  Tensor slice(int64_t dim = 0, std::optional<SymInt> start = std::nullopt,
               std::optional<SymInt> end = std::nullopt, SymInt step = 1) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor as_strided(SymIntArrayRef size, SymIntArrayRef stride,
                    std::optional<SymInt> storage_offset = std::nullopt) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // Every slice of `size` along dimension, `step` apart, as a new last dim: a view (as_strided).
  Tensor unfold(int64_t dimension, int64_t size, int64_t step) const;
  // Factories with this tensor's dtype and device unless `o` says otherwise (torch's new_*).
  Tensor new_empty(SymIntArrayRef size, const TensorOptions& o = {}) const;
  Tensor new_zeros(SymIntArrayRef size, const TensorOptions& o = {}) const;
  Tensor new_ones(SymIntArrayRef size, const TensorOptions& o = {}) const;
  Tensor new_full(SymIntArrayRef size, const Scalar& value, const TensorOptions& o = {}) const;
  // Python-style indexing (kiln/indexing.h): x.index({Slice(), 0}), x[idx], x.index_put_({mask}, v).
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor operator[](const Tensor& index) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value);
  std::vector<Tensor> split(SymInt split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(SymIntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  // Compositions of the ops above (src/ops/shape_compose.cpp).
  Tensor movedim(IntArrayRef source, IntArrayRef destination) const;
  Tensor movedim(int64_t source, int64_t destination) const;
  Tensor moveaxis(IntArrayRef source, IntArrayRef destination) const;
  Tensor moveaxis(int64_t source, int64_t destination) const;
  Tensor broadcast_to(SymIntArrayRef size) const;
  Tensor tile(IntArrayRef reps) const;
  Tensor diff(int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {}, const Tensor& append = {}) const;
  Tensor trace() const;
  Tensor diag(int64_t diagonal = 0) const;
  Tensor diag_embed(int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1) const;
  Tensor kron(const Tensor& other) const;
  Tensor rot90(int64_t k = 1, IntArrayRef dims = {0, 1}) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor cross(const Tensor& other, std::optional<int64_t> dim = std::nullopt) const;

  // ---- indexing ----
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor index_fill(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor index_fill(int64_t dim, const Tensor& index, const Tensor& value) const;
  Tensor index_copy(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = std::nullopt) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor& masked_scatter_(const Tensor& mask, const Tensor& source);
  // In-place forms (torch's names): self receives the out-of-place op's result.
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_(int64_t dim, const Tensor& index, const Scalar& value);
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                          bool include_self = true);
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
  Tensor& index_fill_(int64_t dim, const Tensor& index, const Scalar& value);
  Tensor& index_fill_(int64_t dim, const Tensor& index, const Tensor& value);
  Tensor& index_copy_(int64_t dim, const Tensor& index, const Tensor& source);
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;

  // ---- pointwise ----
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor square() const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(const Scalar& e) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor add(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(const Scalar& o) const;
  Tensor div(const Tensor& o, std::optional<std::string> rounding_mode = std::nullopt) const;
  Tensor div(const Scalar& o, std::optional<std::string> rounding_mode = std::nullopt) const;
  Tensor& add_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& o, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& o, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(const Scalar& o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(const Scalar& o);
  Tensor& true_divide_(const Tensor& o) { return div_(o); }
  Tensor& true_divide_(const Scalar& o) { return div_(o); }
  // self must be float64, the dtype float_power computes in (as torch).
  Tensor& float_power_(const Tensor& o);
  Tensor& float_power_(const Scalar& o);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& lerp_(const Tensor& end, const Scalar& weight);
  Tensor& addcmul_(const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
  Tensor& addcdiv_(const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
  Tensor& sqrt_();
  Tensor& exp_();
  Tensor& relu_();
  Tensor eq(const Tensor& o) const;
  Tensor eq(const Scalar& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(const Scalar& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(const Scalar& o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(const Scalar& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(const Scalar& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(const Scalar& o) const;
  Tensor logical_not() const;
  Tensor isnan() const;

  // ---- reductions ----
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor max(const Tensor& other) const;  // torch's overloads: maximum / minimum
  Tensor min(const Tensor& other) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntArrayRef dim = {}, std::optional<Scalar> correction = std::nullopt, bool keepdim = false) const;
  Tensor std(IntArrayRef dim = {}, std::optional<Scalar> correction = std::nullopt, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2, IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor all() const;
  Tensor any() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- linear algebra ----
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;

  // ---- every op flagged METHOD in ops.def (Note [Tensor methods]) ----
#define KILN_TENSOR_METHOD(name)                                                                                      \
  template <class... A>                                                                                               \
  auto name(A&&... a) const->decltype(method_detail::name##_(std::declval<const Tensor&>(), std::forward<A>(a)...)) { \
    return method_detail::name##_(*this, std::forward<A>(a)...);                                                      \
  }
#include "kiln/tensor_methods.inc"
#undef KILN_TENSOR_METHOD

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Arithmetic operators, as in libtorch.
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);

}  // namespace kiln

#include "kiln/indexing.h"  // TensorIndex, for Tensor::index
