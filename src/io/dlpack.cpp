// DLPack export (to_dlpack) and import (from_dlpack), both zero-copy.
#include "kiln/dlpack.h"

#include <limits>
#include <memory>
#include <vector>

#include "core/tensor_impl.h"
#include "io/dlpack_abi.h"
#include "io/file_util.h"
#include "kiln/cuda.h"
#include "kiln/ops/creation.h"

namespace kiln {

namespace {

// What an exported DLManagedTensorVersioned points into: it keeps the tensor alive, and its
// storage too, in case the tensor is later given other data (Tensor::set_data).
struct ExportedTensor {
  Tensor tensor;
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensorVersioned managed{};
};

void delete_exported(DLManagedTensorVersioned* self) {
  if (self) delete static_cast<ExportedTensor*>(self->manager_ctx);
}

DLDataType to_dl_dtype(DType t) {
  switch (t) {
    case kBool:
      return {kDLBool, 8, 1};
    case kUInt8:
      return {kDLUInt, 8, 1};
    case kInt8:
      return {kDLInt, 8, 1};
    case kInt16:
      return {kDLInt, 16, 1};
    case kInt32:
      return {kDLInt, 32, 1};
    case kInt64:
      return {kDLInt, 64, 1};
    case kFloat16:
      return {kDLFloat, 16, 1};
    case kBFloat16:
      return {kDLBfloat, 16, 1};
    case kFloat32:
      return {kDLFloat, 32, 1};
    case kFloat64:
      return {kDLFloat, 64, 1};
  }
  KILN_FAIL("to_dlpack: unknown dtype");
}

DType from_dl_dtype(DLDataType d) {
  KILN_CHECK(d.lanes == 1, "from_dlpack: vector dtypes (lanes = ", d.lanes, ") are not supported");
  switch (d.code) {
    case kDLBool:
      if (d.bits == 8) return kBool;
      break;
    case kDLUInt:
      if (d.bits == 8) return kUInt8;
      break;
    case kDLInt:
      if (d.bits == 8) return kInt8;
      if (d.bits == 16) return kInt16;
      if (d.bits == 32) return kInt32;
      if (d.bits == 64) return kInt64;
      break;
    case kDLFloat:
      if (d.bits == 16) return kFloat16;
      if (d.bits == 32) return kFloat32;
      if (d.bits == 64) return kFloat64;
      break;
    case kDLBfloat:
      if (d.bits == 16) return kBFloat16;
      break;
    default:
      break;
  }
  KILN_FAIL("from_dlpack: dtype code ", int(d.code), " with ", int(d.bits), " bits has no kiln dtype");
}

}  // namespace

DLManagedTensorVersioned* to_dlpack(const Tensor& t) {
  KILN_CHECK(t.defined(), "to_dlpack: the tensor is undefined");
  KILN_CHECK(!t.requires_grad(), "to_dlpack: can't export a tensor that requires grad; use tensor.detach()");
  KILN_CHECK((t.is_cpu() || t.is_cuda()) && t.has_storage(), "to_dlpack: the tensor has no data (", t.device(),
             " device)");
  auto ctx = std::make_unique<ExportedTensor>();
  ctx->tensor = t;
  ctx->storage = t.unsafe_impl()->storage;
  ctx->shape = t.sizes().vec();
  ctx->strides = t.strides().vec();
  DLManagedTensorVersioned& m = ctx->managed;
  m.version = {KILN_DLPACK_MAJOR_VERSION, KILN_DLPACK_MINOR_VERSION};
  m.manager_ctx = ctx.get();
  m.deleter = delete_exported;
  m.flags = 0;
  // A CUDA tensor is exported as device memory; as torch's, the consumer orders its reads after the
  // work queued on kiln's current stream (kiln::cuda::synchronize() or an event).
  m.dl_tensor.data = t.unsafe_impl()->data();
  m.dl_tensor.device = t.is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(t.device().index)} : DLDevice{kDLCPU, 0};
  m.dl_tensor.ndim = static_cast<int32_t>(t.dim());
  m.dl_tensor.dtype = to_dl_dtype(t.dtype());
  m.dl_tensor.shape = ctx->shape.data();
  m.dl_tensor.strides = ctx->strides.data();
  m.dl_tensor.byte_offset = 0;
  return &ctx.release()->managed;
}

Tensor from_dlpack(DLManagedTensorVersioned* m) {
  KILN_CHECK(m != nullptr, "from_dlpack: the DLManagedTensorVersioned pointer is null");
  KILN_CHECK(m->version.major == KILN_DLPACK_MAJOR_VERSION, "from_dlpack: DLPack version ", m->version.major, ".",
             m->version.minor, " is not supported (kiln reads 1.x)");
  KILN_CHECK(!(m->flags & KILN_DLPACK_FLAG_BITMASK_READ_ONLY),
             "not supported yet: from_dlpack of a read-only tensor (kiln tensors are writable)");
  const DLTensor& dl = m->dl_tensor;
  const DLDeviceType dev = dl.device.device_type;
  KILN_CHECK(dev != kDLCUDAManaged, "not supported yet: from_dlpack of CUDA managed memory (device type ", int(dev),
             ")");
  KILN_CHECK(dev == kDLCPU || dev == kDLCUDA || dev == kDLCUDAHost, "from_dlpack: device type ", int(dev),
             " is not supported (kiln reads CPU and CUDA tensors)");
  // Page-locked host memory (kDLCUDAHost) is host memory to kiln.
  const Device device = dev == kDLCUDA ? Device(DeviceType::CUDA, dl.device.device_id) : kCPU;
  if (dev == kDLCUDA) {
    KILN_CHECK(cuda::is_available(), "from_dlpack: a CUDA tensor, and ",
               cuda::is_built() ? "no CUDA device is available" : "kiln was built without CUDA");
    KILN_CHECK(dl.device.device_id >= 0 && dl.device.device_id < cuda::device_count(), "from_dlpack: CUDA device ",
               dl.device.device_id, " does not exist (", cuda::device_count(), " devices)");
  }
  const DType dtype = from_dl_dtype(dl.dtype);
  KILN_CHECK(dl.ndim >= 0, "from_dlpack: ndim is negative (", dl.ndim, ")");
  KILN_CHECK(dl.ndim == 0 || dl.shape != nullptr, "from_dlpack: shape is null for ndim ", dl.ndim);
  Shape sizes(dl.shape, dl.shape + dl.ndim);
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "from_dlpack: negative size in shape ", shape_str(sizes));
  KILN_CHECK(io::shape_fits(sizes.data(), sizes.size(), itemsize(dtype)), "from_dlpack: shape ", shape_str(sizes),
             " is too large");
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  int64_t numel = compute_numel(sizes);
  // The bytes the view can reach, checked against overflow.
  uint64_t extent = numel > 0 ? 1 : 0;
  for (size_t i = 0; i < sizes.size() && numel > 0; ++i) {
    KILN_CHECK(strides[i] >= 0, "not supported yet: from_dlpack with negative strides ", shape_str(strides));
    uint64_t reach = 0;
    KILN_CHECK(io::checked_mul(static_cast<uint64_t>(sizes[i] - 1), static_cast<uint64_t>(strides[i]), &reach) &&
                   io::checked_add(extent, reach, &extent),
               "from_dlpack: strides ", shape_str(strides), " overflow for shape ", shape_str(sizes));
  }
  uint64_t extent_bytes = 0;
  KILN_CHECK(io::checked_mul(extent, itemsize(dtype), &extent_bytes) &&
                 extent_bytes <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
             "from_dlpack: strides ", shape_str(strides), " overflow for shape ", shape_str(sizes));
  KILN_CHECK(numel == 0 || dl.data != nullptr, "from_dlpack: data is null for a tensor of shape ", shape_str(sizes));
  char* data = dl.data ? static_cast<char*>(dl.data) + dl.byte_offset : nullptr;
  KILN_CHECK(reinterpret_cast<uintptr_t>(data) % itemsize(dtype) == 0,
             "from_dlpack: data + byte_offset is not aligned to ", itemsize(dtype), " bytes (", dtype, ")");
  // Nothing below throws once the storage owns `m`, so the deleter runs exactly once.
  return from_blob(data, sizes, strides, TensorOptions(dtype).device(device), [m](void*) {
    if (m->deleter) m->deleter(m);
  });
}

}  // namespace kiln
