// The restricted unpickler behind kiln::pytorch: torch.save's data.pkl (pickle protocol 2, as
// torch writes it; the few protocol 3-5 opcodes of newer writers too) to named tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kiln/state_dict.h"

namespace kiln::io {

// The storage `key` of the archive as a 1-D CPU tensor of `numel` elements of `dtype`; called once
// per key. Throws a kiln::Error when the archive has no such storage or it has another size.
using StorageLoader = std::function<Tensor(const std::string& key, DType dtype, int64_t numel)>;

// Note [Restricted unpickling]
// As torch.load(weights_only=True): the only globals are collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the typed storages torch.FloatStorage,
// ...; any other global is refused when it is read, before it could be called, so nothing in the
// file can run code. Objects live in an arena owned by the unpickler and refer to each other by
// index, so a hostile pickle that builds cycles cannot leak. Every length and index read is
// checked against the bytes left, and the object count is capped.
//
// Runs `data` and flattens the result: a dict's tensors under their keys, nested dicts and lists
// joined with '.' ("model.conv1.weight", "layers.0.bias"); numbers, strings and None are skipped.
// Each tensor is an owned, contiguous copy of its view of a storage (offset, sizes, strides),
// except a view that covers its whole storage contiguously, which uses the storage's memory. Copies
// may total at most `max_copy_bytes` (views that overlap could otherwise ask for any amount).
StateDict unpickle_torch(const uint8_t* data, size_t n, const StorageLoader& storage, uint64_t max_copy_bytes,
                         const std::string& where);

}  // namespace kiln::io
