// _addmm_epilogue's CPU kernel (Note [GEMM epilogues]): act(a @ b + bias) + residual. Float32
// goes to oneDNN's matmul with post-ops where kiln has oneDNN (onednn_matmul.cpp); otherwise,
// and for float64, kiln's GEMM runs by blocks of rows, and each block's epilogue runs right
// after its GEMM, while the block is still in cache. Float16/BFloat16 compute in float32.
#include <algorithm>
#include <string>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/parallel.h"
#include "core/scalar_math.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

using onednn::Activation;

Activation activation_of(const std::string& s) {
  if (s == "relu") return Activation::Relu;
  if (s == "gelu") return Activation::Gelu;
  if (s == "gelu_tanh") return Activation::GeluTanh;
  if (s == "silu") return Activation::Silu;
  return Activation::None;  // "none" (the meta function refused anything else)
}

// Rows [lo, hi) of out: out = act(out + bias) + residual, with eager's functors and op order.
template <class T, class Act>
void epilogue_rows(T* out, int64_t n, int64_t lo, int64_t hi, const T* bias, const T* res, int64_t sr0, int64_t sr1,
                   Act act) {
  for (int64_t i = lo; i < hi; ++i) {
    T* row = out + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = act(T(row[j] + bias[j]));
    if (res)
      for (int64_t j = 0; j < n; ++j) row[j] = T(row[j] + res[i * sr0 + j * sr1]);
  }
}
template <class T>
void epilogue_rows(Activation act, T* out, int64_t n, int64_t lo, int64_t hi, const T* bias, const T* res, int64_t sr0,
                   int64_t sr1) {
  switch (act) {
    case Activation::Relu:
      return epilogue_rows(out, n, lo, hi, bias, res, sr0, sr1, math::Relu{});
    case Activation::Gelu:
      return epilogue_rows(out, n, lo, hi, bias, res, sr0, sr1, math::Gelu{});
    case Activation::GeluTanh:
      return epilogue_rows(out, n, lo, hi, bias, res, sr0, sr1, math::GeluTanh{});
    case Activation::Silu:
      return epilogue_rows(out, n, lo, hi, bias, res, sr0, sr1, math::Silu{});
    case Activation::None:
      return epilogue_rows(out, n, lo, hi, bias, res, sr0, sr1, [](T x) { return x; });
  }
}

// kiln's GEMM, then the epilogue: by blocks of rows of about 256 KiB of output each (one
// single-threaded GEMM and its epilogue per block, blocks across threads) when there are enough
// blocks to share among the threads; else one threaded GEMM and a threaded epilogue pass.
template <class T>
void gemm_then_epilogue(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& res, Activation act,
                        const Tensor& out) {
  const int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  const T* pbias = static_cast<const T*>(bias.data_ptr());
  const T* pr = res.defined() ? static_cast<const T*>(res.data_ptr()) : nullptr;
  const int64_t sr0 = res.defined() ? res.strides()[0] : 0, sr1 = res.defined() ? res.strides()[1] : 0;
  T* pc = static_cast<T*>(out.data_ptr());
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  const bool blas = as_blas_operand(m, k, a.strides()[0], a.strides()[1], ta, lda) &&
                    as_blas_operand(k, n, b.strides()[0], b.strides()[1], tb, ldb);
  const int64_t rows = std::clamp<int64_t>((int64_t(256) << 10) / std::max<int64_t>(1, n * int64_t(sizeof(T))), 8, 512);
  const int64_t blocks = (m + rows - 1) / rows;
  const int threads = in_parallel_region() ? 1 : get_num_threads();
  if (blas && (threads == 1 || blocks >= 2 * threads)) {
    parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t lo = blk * rows, hi = std::min(m, lo + rows);
        gemm<T>(ta, tb, hi - lo, n, k, T(1), pa + lo * a.strides()[0], lda, pb, ldb, T(0), pc + lo * n, n);
        epilogue_rows<T>(act, pc, n, lo, hi, pbias, pr, sr0, sr1);
      }
    });
    return;
  }
  gemm_strided<T>(m, n, k, T(1), pa, a.strides()[0], a.strides()[1], pb, b.strides()[0], b.strides()[1], T(0), pc, n,
                  1);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n));
  parallel_for(0, m, grain, [&](int64_t lo, int64_t hi) { epilogue_rows<T>(act, pc, n, lo, hi, pbias, pr, sr0, sr1); });
}

void run(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& res, Activation act, const Tensor& out) {
  const DType t = out.dtype();
  if (t == DType::Float16 || t == DType::BFloat16) {
    // Float32 operands and accumulation, rounded once at the end (as mm's kernel).
    Tensor tmp = make_tensor(out.sizes(), DType::Float32, out.device());
    run(cast_to(bias, DType::Float32), cast_to(a, DType::Float32), cast_to(b, DType::Float32),
        res.defined() ? cast_to(res, DType::Float32) : res, act, tmp);
    copy_cpu(out, tmp);
    return;
  }
  const Tensor bias_c = bias.is_contiguous() ? bias : bias.contiguous();
  if (t == DType::Float32) {
    onednn::MatmulDesc d{a.sizes()[0],   a.sizes()[1],   b.sizes()[1],  a.strides()[0],
                         a.strides()[1], b.strides()[0], b.strides()[1]};
    d.act = act;
    d.residual = res.defined();
    if (d.residual) d.sr0 = res.strides()[0], d.sr1 = res.strides()[1];
    if (onednn::matmul_epilogue(d, static_cast<const float*>(a.data_ptr()), static_cast<const float*>(b.data_ptr()),
                                static_cast<const float*>(bias_c.data_ptr()),
                                d.residual ? static_cast<const float*>(res.data_ptr()) : nullptr,
                                static_cast<float*>(out.data_ptr())))
      return;
    gemm_then_epilogue<float>(a, b, bias_c, res, act, out);
  } else {
    KILN_CHECK(t == DType::Float64, "_addmm_epilogue: not implemented for dtype ", t);
    gemm_then_epilogue<double>(a, b, bias_c, res, act, out);
  }
}

void addmm_epilogue_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  KILN_CHECK(out.is_contiguous(), "internal: _addmm_epilogue writes a contiguous output");
  run(c.in(0), c.in(1), c.in(2), c.in(3), activation_of(c.attrs.str(0)), out);
}
KILN_REGISTER_KERNEL(_addmm_epilogue, CPU, addmm_epilogue_kernel);

}  // namespace
}  // namespace kiln::cpu
