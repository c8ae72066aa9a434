// The DLPack 1.x ABI (the C structs exchanged between frameworks), written from the
// specification. Declared at global scope with the spec's names and layout, so the
// DLManagedTensorVersioned that include/kiln/dlpack.h forward-declares is this type,
// and a pointer from kiln can be handed to any DLPack 1.x consumer (and back).
#pragma once
#include <cstdint>

#define KILN_DLPACK_MAJOR_VERSION 1
#define KILN_DLPACK_MINOR_VERSION 0

// Flags of DLManagedTensorVersioned::flags.
#define KILN_DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define KILN_DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

extern "C" {

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;    // a DLDataTypeCode
  uint8_t bits;    // bits per lane
  uint16_t lanes;  // 1 for scalars
};

struct DLTensor {
  void* data;  // base pointer; the first element is at data + byte_offset
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;    // ndim entries
  int64_t* strides;  // ndim entries, in elements; null means compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;  // the producer's; the consumer never touches it
  // Called by the consumer once it no longer needs the tensor; may be null.
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // extern "C"
