// Tensor's metadata accessors (everything that needs no op).
#include "core/half.h"
#include "core/tensor_impl.h"

namespace kiln {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& p, const char* what) {
  KILN_CHECK(p, what, ": called on an undefined tensor");
  return *p;
}
}  // namespace

int64_t Tensor::dim() const { return static_cast<int64_t>(checked(impl_, "dim").sizes.size()); }
SymInt Tensor::size(int64_t d) const {
  const auto& i = checked(impl_, "size");
  int64_t k = wrap_dim(d, static_cast<int64_t>(i.sizes.size()), "size");
  return i.sym_sizes ? SymInt::from_raw((*i.sym_sizes)[k]) : SymInt(i.sizes[k]);
}
SymIntArrayRef Tensor::sym_sizes() const {
  const auto& i = checked(impl_, "sym_sizes");
  return i.sym_sizes ? SymIntArrayRef(*i.sym_sizes) : SymIntArrayRef(i.sizes);
}
int64_t Tensor::stride(int64_t d) const {
  const auto& i = checked(impl_, "stride");
  return i.strides[wrap_dim(d, static_cast<int64_t>(i.sizes.size()), "stride")];
}
IntArrayRef Tensor::sizes() const { return checked(impl_, "sizes").sizes; }
IntArrayRef Tensor::strides() const { return checked(impl_, "strides").strides; }
int64_t Tensor::numel() const { return checked(impl_, "numel").numel; }
int64_t Tensor::storage_offset() const { return checked(impl_, "storage_offset").storage_offset; }
DType Tensor::dtype() const { return checked(impl_, "dtype").dtype; }
Device Tensor::device() const { return checked(impl_, "device").device; }
bool Tensor::is_contiguous() const { return checked(impl_, "is_contiguous").is_contiguous; }
bool Tensor::has_storage() const { return impl_ && impl_->storage; }
bool Tensor::is_alias_of(const Tensor& o) const {
  if (!impl_ || !o.impl_) return false;
  // Tensors without storage (tracers) alias when they share a version counter, as views do.
  if (!impl_->storage && !o.impl_->storage) return impl_->is_tracer() && impl_->version == o.impl_->version;
  return impl_->storage && impl_->storage == o.impl_->storage;
}
uint32_t Tensor::_version() const { return checked(impl_, "_version").version->version.load(); }
bool Tensor::is_view() const { return impl_ && impl_->view_base != nullptr; }
Tensor Tensor::_base() const { return impl_ && impl_->view_base ? Tensor(impl_->view_base) : Tensor(); }

void* Tensor::data_ptr() const {
  const auto& i = checked(impl_, "data_ptr");
  notify_value_read(*this, "data_ptr");
  KILN_CHECK(i.storage, "data_ptr: tensor has no storage (a tracer or meta tensor)");
  return i.data();
}

template <class T>
static constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::Int8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::Int16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BFloat16;
  else if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else
    return DType::Float64;
}

template <class T>
T* Tensor::data_ptr() const {
  KILN_CHECK(dtype() == dtype_for<T>(), "data_ptr<", dtype_for<T>(), ">: the tensor's dtype is ", dtype());
  return static_cast<T*>(data_ptr());
}

#define KILN_INSTANTIATE_DATA_PTR(T) template T* Tensor::data_ptr<T>() const;
KILN_INSTANTIATE_DATA_PTR(bool)
KILN_INSTANTIATE_DATA_PTR(uint8_t)
KILN_INSTANTIATE_DATA_PTR(int8_t)
KILN_INSTANTIATE_DATA_PTR(int16_t)
KILN_INSTANTIATE_DATA_PTR(int32_t)
KILN_INSTANTIATE_DATA_PTR(int64_t)
KILN_INSTANTIATE_DATA_PTR(Half)
KILN_INSTANTIATE_DATA_PTR(BFloat16)
KILN_INSTANTIATE_DATA_PTR(float)
KILN_INSTANTIATE_DATA_PTR(double)
#undef KILN_INSTANTIATE_DATA_PTR

}  // namespace kiln
