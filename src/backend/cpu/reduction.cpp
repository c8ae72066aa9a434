// CPU kernels for reductions.
#include "backend/cpu/loops.h"
#include "core/scalar_math.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln::cpu {
namespace {

// Moves the reduced dims innermost and makes the data contiguous, so each
// output element reduces one contiguous run.
Tensor reduced_last(const Tensor& x, const std::vector<bool>& mask, int64_t& run) {
  std::vector<int64_t> perm;
  run = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!mask[i]) perm.push_back(i);
  for (int64_t i = 0; i < x.dim(); ++i)
    if (mask[i]) {
      perm.push_back(i);
      run *= x.sizes()[i];
    }
  Shape sizes, strides;
  for (int64_t d : perm) {
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  Tensor p = make_view(x, sizes, strides, x.storage_offset());
  if (p.is_contiguous()) return p;
  Tensor c = make_tensor(sizes, x.dtype(), x.device());
  copy_cpu(c, p);
  return c;
}

void sum_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  Tensor& out = outs[0];
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), "sum");
  int64_t run = 1;
  Tensor in = cast_to(reduced_last(x, mask, run), out.dtype());
  int64_t n_out = out.numel();
  visit_dtype(out.dtype(), [&]<class T>() {
    using Acc = std::conditional_t<std::is_floating_point_v<math::opmath_t<T>>, double, int64_t>;
    const T* src = static_cast<const T*>(in.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    parallel_for(0, n_out, std::max<int64_t>(1, 32768 / std::max<int64_t>(run, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        Acc acc = 0;
        const T* p = src + o * run;
        for (int64_t i = 0; i < run; ++i) acc += static_cast<Acc>(static_cast<math::opmath_t<T>>(p[i]));
        dst[o] = static_cast<T>(static_cast<math::opmath_t<T>>(acc));
      }
    });
  });
}
KILN_REGISTER_KERNEL(sum, CPU, sum_kernel);

}  // namespace
}  // namespace kiln::cpu
