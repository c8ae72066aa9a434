// kiln::autocast: Note [Autocast].
#include "dispatch/autocast.h"

#include <unordered_map>

#include "core/tensor_impl.h"
#include "dispatch/dispatch.h"
#include "kiln/autocast.h"
#include "kiln/autograd.h"

namespace kiln {
namespace detail {

thread_local bool tls_autocast_on = false;

namespace {

struct AutocastState {
  bool enabled[kNumDeviceTypes] = {};
  DType dtype[kNumDeviceTypes] = {DType::BFloat16, DType::Float16, DType::BFloat16};
  bool cache = true;
  int nesting = 0;   // live autocast guards, enabling or not: the cache lives while any does
  int excluded = 0;  // live AutocastExcludeGuards
};
thread_local AutocastState tls_state;

void refresh() {
  bool any = false;
  for (bool e : tls_state.enabled) any |= e;
  tls_autocast_on = any && tls_state.excluded == 0;
}

// torch's autocast cache: a parameter (a float32 leaf that requires grad) is cast to the low
// dtype once per region rather than at every use. Keyed by its version as well, so an in-place
// update (an optimizer step inside the region) casts it again.
struct CachedCast {
  uint32_t version;
  Tensor cast;
  Tensor source;  // keeps the key's impl alive, so its address is not reused
};
thread_local std::unordered_map<const TensorImpl*, CachedCast> tls_cache;

bool cacheable(const Tensor& t, DType to) {
  return tls_state.cache && to == tls_state.dtype[static_cast<int>(t.device().type)] && t.dtype() == DType::Float32 &&
         t.requires_grad() && t.is_leaf() && !t.is_view() && current_record_layer() == nullptr;
}

Tensor cast(const Tensor& t, DType to) {
  if (!cacheable(t, to)) return t.to(to);
  auto [it, fresh] = tls_cache.try_emplace(t.unsafe_impl());
  if (fresh || it->second.version != t._version() || it->second.cast.dtype() != to) {
    it->second = CachedCast{t._version(), t.to(to), t};
  }
  return it->second.cast;
}

bool eligible(const Tensor& t, DeviceType device) {
  return t.defined() && t.device().type == device && is_floating_point(t.dtype()) && t.dtype() != DType::Float64;
}

}  // namespace

bool autocast_inputs(OpId op, std::vector<Tensor>& inputs, Attrs& attrs) {
  const uint32_t policy = op_info(op).flags & kAutocastFlags;
  if (!policy) return false;
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      first = &t;
      break;
    }
  if (!first) return false;
  const DeviceType device = first->device().type;
  if (!tls_state.enabled[static_cast<int>(device)]) return false;
  if (policy & AUTOCAST_FP32_DTYPE) {
    // torch's fp32_set_opt_dtype: only where the first input is eligible and no dtype was given.
    if (!eligible(*first, device) || attrs.size() == 0 || !attrs.none(attrs.size() - 1)) return false;
    std::vector<AttrValue> v = attrs.symbolic_values();
    v.back() = DType::Float32;
    attrs = Attrs(std::move(v));
    return true;
  }
  DType to = DType::Float32;
  if (policy & AUTOCAST_LOW) {
    to = tls_state.dtype[static_cast<int>(device)];
  } else if (policy & AUTOCAST_FP32) {
    to = DType::Float32;
  } else if (policy & AUTOCAST_FP32_CUDA) {
    if (device != DeviceType::CUDA) return false;
    to = DType::Float32;
  } else {  // AUTOCAST_PROMOTE
    bool found = false;
    for (const Tensor& t : inputs)
      if (eligible(t, device)) {
        to = found ? promote_types(to, t.dtype()) : t.dtype();
        found = true;
      }
    if (!found) return false;
  }
  for (Tensor& t : inputs)
    if (eligible(t, device) && t.dtype() != to) t = cast(t, to);
  return true;
}

AutocastExcludeGuard::AutocastExcludeGuard() {
  ++tls_state.excluded;
  tls_autocast_on = false;
}
AutocastExcludeGuard::~AutocastExcludeGuard() {
  --tls_state.excluded;
  refresh();
}

}  // namespace detail

using detail::tls_state;

autocast::autocast(Device device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_(device.type) {
  KILN_CHECK(device_ == DeviceType::CPU || device_ == DeviceType::CUDA, "autocast: device_type must be cpu or cuda, got ",
             device.str());
  const int d = static_cast<int>(device_);
  const DType want = dtype.value_or(device_ == DeviceType::CUDA ? DType::Float16 : DType::BFloat16);
  KILN_CHECK(want == DType::BFloat16 || want == DType::Float16, "autocast: in ", device_type_name(device_),
             " autocast, the supported dtypes are bfloat16 and float16; got ", want);
  prev_enabled_ = tls_state.enabled[d];
  prev_dtype_ = tls_state.dtype[d];
  prev_cache_ = tls_state.cache;
  tls_state.enabled[d] = enabled;
  tls_state.dtype[d] = want;
  tls_state.cache = cache_enabled;
  ++tls_state.nesting;
  detail::refresh();
}

autocast::~autocast() {
  const int d = static_cast<int>(device_);
  tls_state.enabled[d] = prev_enabled_;
  tls_state.dtype[d] = prev_dtype_;
  tls_state.cache = prev_cache_;
  if (--tls_state.nesting == 0) detail::tls_cache.clear();
  detail::refresh();
}

bool is_autocast_enabled(DeviceType device) { return tls_state.enabled[static_cast<int>(device)]; }
DType get_autocast_dtype(DeviceType device) { return tls_state.dtype[static_cast<int>(device)]; }
void clear_autocast_cache() { detail::tls_cache.clear(); }

}  // namespace kiln
