#include "core/tensor_impl.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/pool.h"

namespace kiln {

namespace {
template <class... A>
std::shared_ptr<TensorImpl> new_impl(A&&... a) {
  return std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::forward<A>(a)...);
}
}  // namespace

TensorImpl::TensorImpl() : version(std::allocate_shared<VersionCounter>(PoolAllocator<VersionCounter>())) {}
TensorImpl::TensorImpl(std::shared_ptr<VersionCounter> shared_version) : version(std::move(shared_version)) {}
TensorImpl::~TensorImpl() = default;

Shape contiguous_strides(IntArrayRef sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    // Wraps rather than overflowing (UB) for absurd sizes, which compute_numel then refuses.
    s = static_cast<int64_t>(static_cast<uint64_t>(s) * static_cast<uint64_t>(std::max<int64_t>(sizes[i], 1)));
  }
  return strides;
}

// Note [Size overflow]
// Element and byte counts are computed with overflow checks, here and in
// make_tensor_strided only: every tensor's numel passes compute_numel and every
// allocation's byte count storage_nbytes, so a size like {1 << 62, 4} raises
// instead of wrapping to a small (or zero) allocation that writes then overrun.
int64_t compute_numel(IntArrayRef sizes) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) overflow |= __builtin_mul_overflow(n, s, &n);
  // A zero anywhere makes the product 0, whatever overflowed before it.
  if (overflow)
    for (int64_t s : sizes)
      if (s == 0) return 0;
  KILN_CHECK(!overflow, "storage size calculation overflowed with sizes=", shape_str(sizes),
             ": the number of elements does not fit in int64");
  return n;
}

namespace {
// The bytes a strided tensor's storage needs: (the largest reachable element + 1) * itemsize.
size_t storage_nbytes(IntArrayRef sizes, IntArrayRef strides, int64_t numel, DType dtype) {
  if (numel == 0) return 0;
  int64_t extent = 1, step = 0;
  bool overflow = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    overflow |= __builtin_mul_overflow(sizes[i] - 1, strides[i], &step);
    overflow |= __builtin_add_overflow(extent, step, &extent);
  }
  int64_t bytes = 0;
  overflow |= __builtin_mul_overflow(extent, static_cast<int64_t>(itemsize(dtype)), &bytes);
  KILN_CHECK(!overflow, "storage size calculation overflowed with sizes=", shape_str(sizes), " and dtype ", dtype,
             ": the number of bytes does not fit in int64");
  return static_cast<size_t>(bytes);
}
}  // namespace

bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;  // any stride is fine for a size-1 dim
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

void TensorImpl::refresh_metadata() {
  numel = compute_numel(sizes);
  is_contiguous = compute_contiguous(sizes, strides);
}

namespace {
std::array<Allocator*, kNumDeviceTypes>& allocators() {
  static std::array<Allocator*, kNumDeviceTypes> a{};
  return a;
}
}  // namespace

void register_allocator(DeviceType type, Allocator* alloc) { allocators()[static_cast<int>(type)] = alloc; }

namespace {
Allocator*& pinned_slot() {
  static Allocator* a = nullptr;
  return a;
}
}  // namespace
void register_pinned_allocator(Allocator* alloc) { pinned_slot() = alloc; }
Allocator* pinned_allocator() { return pinned_slot(); }

Allocator* get_allocator(DeviceType type) {
  Allocator* a = allocators()[static_cast<int>(type)];
  KILN_CHECK(a, "no allocator for device type ", device_type_name(type),
             (type == DeviceType::CUDA ? " (kiln was built without CUDA, or no GPU is available)" : ""));
  return a;
}

Tensor make_tensor_strided(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device) {
  auto impl = new_impl();
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->dtype = dtype;
  impl->device = device;
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "negative dimension in size ", shape_str(sizes));
  impl->refresh_metadata();
  impl->storage = get_allocator(device.type)->allocate(storage_nbytes(sizes, strides, impl->numel, dtype), device);
  return Tensor(std::move(impl));
}

Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device) {
  return make_tensor_strided(sizes, contiguous_strides(sizes), dtype, device);
}

Tensor make_tensor_pinned(IntArrayRef sizes, DType dtype) {
  Allocator* a = pinned_allocator();
  KILN_CHECK(a, "pin_memory: needs CUDA (page-locked memory serves copies to a GPU): kiln was built without CUDA");
  auto impl = new_impl();
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->device = kCPU;
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "negative dimension in size ", shape_str(sizes));
  impl->refresh_metadata();
  impl->storage = a->allocate(storage_nbytes(sizes, impl->strides, impl->numel, dtype), kCPU);
  return Tensor(std::move(impl));
}

Tensor make_meta_tensor(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device,
                        std::shared_ptr<VersionCounter> version) {
  auto impl = version ? new_impl(std::move(version)) : new_impl();
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->dtype = dtype;
  impl->device = device;
  impl->refresh_metadata();
  return Tensor(std::move(impl));
}

namespace {
thread_local ValueReadHook tls_value_read_hook = nullptr;
thread_local TracerAliasHook tls_tracer_alias_hook = nullptr;
}  // namespace
void set_tracer_alias_hook(TracerAliasHook hook) { tls_tracer_alias_hook = hook; }
void notify_tracer_alias(const std::shared_ptr<TensorImpl>& alias) {
  if (tls_tracer_alias_hook) tls_tracer_alias_hook(alias);
}
void set_value_read_hook(ValueReadHook hook) { tls_value_read_hook = hook; }
void notify_value_read(const Tensor& t, const char* what) {
  if (tls_value_read_hook && t.defined()) tls_value_read_hook(t, what);
}

Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset) {
  const TensorImpl* b = base.unsafe_impl();
  auto impl = new_impl(b->version);
  impl->storage = b->storage;
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->storage_offset = storage_offset;
  impl->dtype = b->dtype;
  impl->device = b->device;
  impl->view_base = b->view_base ? b->view_base : base.impl_ptr();
  impl->refresh_metadata();
  if (b->is_tracer()) {
    impl->tracer_recording = b->tracer_recording;
    impl->tracer_value = b->tracer_value;
    notify_tracer_alias(impl);
  }
  return Tensor(std::move(impl));
}

Tensor wrap_scalar(const Scalar& s, Device device) {
  DType dt = s.dtype();
  Tensor t = make_tensor({}, dt, kCPU);
  switch (dt) {
    case DType::Bool:
      *static_cast<bool*>(t.data_ptr()) = s.to_bool();
      break;
    case DType::Int64:
      *static_cast<int64_t*>(t.data_ptr()) = s.to_long();
      break;
    default:
      *static_cast<double*>(t.data_ptr()) = s.to_double();
      break;
  }
  t.unsafe_impl()->is_wrapped_number = true;
  (void)device;  // wrapped numbers stay on the CPU; kernels read them as scalars
  return t;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  KILN_CHECK(dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
             "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::string shape_str(IntArrayRef sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << "]";
  return os.str();
}

}  // namespace kiln
