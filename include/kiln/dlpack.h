// DLPack 1.x import and export, zero-copy: hand a kiln tensor to another framework
// (NumPy, PyTorch, JAX, CuPy, ... through their C/C++ DLPack entry points) and back.
//
// The struct is only declared here, under its DLPack name, so this header can be
// included next to the official dlpack/dlpack.h (which defines it) without clashes;
// include that header to read its fields.
#pragma once
#include "kiln/tensor.h"

struct DLManagedTensorVersioned;

namespace kiln {

// Exports `t` without copying: the result views t's memory (strides in elements) and keeps
// t's storage alive until the consumer calls its deleter, exactly once. CPU tensors only; a
// tensor that requires grad must be detached first, as in torch.utils.dlpack.to_dlpack.
DLManagedTensorVersioned* to_dlpack(const Tensor& t);

// Imports a DLPack 1.x tensor without copying. On success kiln owns `m`: its deleter runs
// when the last kiln tensor (or view) using the memory dies. On failure (a kiln::Error: a
// version other than 1.x, a non-CPU device, a dtype kiln lacks, negative strides, a
// read-only tensor) nothing is consumed and the caller still owns `m`.
Tensor from_dlpack(DLManagedTensorVersioned* m);

}  // namespace kiln
