// CPU kernels for mm and bmm: tensors wired to kiln::cpu::gemm (OpenBLAS or
// kiln's blocked GEMM). Float16/BFloat16 are computed in float32.
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "core/parallel.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

template <class T>
constexpr bool kHasGemm = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                          std::is_same_v<T, int32_t> || std::is_same_v<T, int16_t> || std::is_same_v<T, int8_t> ||
                          std::is_same_v<T, uint8_t>;


// C[M,N] (row-major, ldc) = A @ B for strided A and B.
template <class T>
void matmul_2d(int64_t M, int64_t N, int64_t K, const T* A, int64_t sa0, int64_t sa1, const T* B, int64_t sb0,
               int64_t sb1, T* C, int64_t ldc) {
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  if (as_blas_operand(M, K, sa0, sa1, ta, lda) && as_blas_operand(K, N, sb0, sb1, tb, ldb)) {
    gemm<T>(ta, tb, M, N, K, T(1), A, lda, B, ldb, T(0), C, ldc);
  } else {
    gemm_strided<T>(M, N, K, T(1), A, sa0, sa1, B, sb0, sb1, T(0), C, ldc, 1);
  }
}

// out[b] = a[b] @ b[b] for 3-D a, b (any strides, stride-0 batches included)
// and a contiguous 3-D out of the compute type T.
template <class T>
void bmm_impl(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = a.sizes()[0], M = a.sizes()[1], K = a.sizes()[2], N = b.sizes()[2];
  if (out.numel() == 0) return;
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  const int64_t sab = a.strides()[0], sa0 = a.strides()[1], sa1 = a.strides()[2];
  const int64_t sbb = b.strides()[0], sb0 = b.strides()[1], sb1 = b.strides()[2];
  auto one = [&](int64_t i) { matmul_2d<T>(M, N, K, pa + i * sab, sa0, sa1, pb + i * sbb, sb0, sb1, pc + i * M * N, N); };
  // Small products: one thread per batch (GEMM then runs single-threaded);
  // large ones: batches in turn, each GEMM threaded.
  constexpr int64_t kSmallGemm = int64_t(1) << 18;
  if (B > 1 && M * N * std::max<int64_t>(K, 1) < kSmallGemm) {
    const int64_t grain = std::max<int64_t>(1, kSmallGemm / std::max<int64_t>(1, M * N * std::max<int64_t>(K, 1)));
    parallel_for(0, B, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < B; ++i) one(i);
  }
}

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// 2-D operands are run as a batch of one (a stride-0 batch dim costs nothing).
Tensor as_batch(const Tensor& t) {
  Shape sizes{1}, strides{0};
  sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  strides.insert(strides.end(), t.strides().begin(), t.strides().end());
  return make_view(t, sizes, strides, t.storage_offset());
}

void bmm_dispatch(const Tensor& a, const Tensor& b, const Tensor& out) {
  const DType t = out.dtype();
  if (is_half(t)) {
    // Float16/BFloat16: float32 operands and accumulation, rounded once at the end.
    Tensor tmp = make_tensor(out.sizes(), DType::Float32, out.device());
    bmm_impl<float>(cast_to(a, DType::Float32), cast_to(b, DType::Float32), tmp);
    copy_cpu(out, tmp);
    return;
  }
  visit_dtype(t, [&]<class T>() {
    if constexpr (kHasGemm<T>) bmm_impl<T>(a, b, out);
    else KILN_FAIL("mm: not implemented for dtype ", t);
  });
}

void mm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  bmm_dispatch(as_batch(c.in(0)), as_batch(c.in(1)), as_batch(outs[0]));
}
KILN_REGISTER_KERNEL(mm, CPU, mm_kernel);

void bmm_kernel(const OpCall& c, std::vector<Tensor>& outs) { bmm_dispatch(c.in(0), c.in(1), outs[0]); }
KILN_REGISTER_KERNEL(bmm, CPU, bmm_kernel);

}  // namespace
}  // namespace kiln::cpu
