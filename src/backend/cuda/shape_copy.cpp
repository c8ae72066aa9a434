// CUDA kernels for the copying shape prims that are plain strided copies.
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// cat: each input is copied into its slot, a view of the output (as the CPU kernel).
void cat_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), "cat");
  int64_t offset = 0;
  for (const Tensor& x : c.inputs) {
    if (x.dim() == 1 && x.size(0) == 0 && out.dim() != 1) continue;  // legacy empty tensor
    int64_t len = x.size(dim);
    if (len == 0) continue;
    Shape sizes(out.sizes().begin(), out.sizes().end());
    sizes[static_cast<size_t>(dim)] = len;
    Tensor slot = make_view(out, sizes, out.strides(), out.storage_offset() + offset * out.stride(dim));
    copy_same_device(slot, x);
    offset += len;
  }
}
KILN_REGISTER_KERNEL(cat, CUDA, cat_kernel);

// _to_copy (Note [Device moves]): the output was made on the target device from the meta function;
// copy_ moves the elements (host to device, device to host or within a device) and converts the dtype.
void to_copy_kernel(const OpCall& c, std::vector<Tensor>& outs) { copy_into(outs[0], c.in(0)); }
KILN_REGISTER_KERNEL(_to_copy, CUDA, to_copy_kernel);

}  // namespace
}  // namespace kiln::cuda
