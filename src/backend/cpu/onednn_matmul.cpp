// oneDNN matmul with post-ops for _addmm_epilogue (onednn_matmul.h, Note [GEMM epilogues]).
// Primitives are built once per shape, strides, epilogue and thread count and kept in a
// bounded LRU map, as the convolutions' are (onednn_conv.cpp): a model runs the same few
// GEMMs every step, and building a primitive costs more than a small GEMM.
#include "backend/cpu/onednn_matmul.h"

#include <atomic>

#include "kiln/backends.h"

#ifdef KILN_HAVE_ONEDNN
#include <array>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/onednn_common.h"
#endif

namespace kiln::cpu::onednn {

namespace {
std::atomic<int64_t> g_matmuls{0};
}  // namespace
int64_t matmul_executions() { return g_matmuls.load(); }

#ifndef KILN_HAVE_ONEDNN
bool matmul_epilogue(const MatmulDesc&, const float*, const float*, const float*, const float*, float*) {
  return false;
}
#else
namespace {

using dnnl::memory;

struct Entry {
  bool ok = false;  // false: oneDNN refused the case; kiln's GEMM runs it
  dnnl::matmul prim;
  memory::desc a, b, bias, res, out;
};

dnnl::algorithm algorithm_of(Activation act) {
  switch (act) {
    case Activation::Relu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::Gelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::GeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::Silu:
      return dnnl::algorithm::eltwise_swish;  // x sigmoid(alpha x), alpha 1
    default:
      return dnnl::algorithm::undef;
  }
}

Entry build(const MatmulDesc& d) {
  const auto f32 = memory::data_type::f32;
  Entry e;
  e.a = memory::desc({d.m, d.k}, f32, {d.sa0, d.sa1});
  e.b = memory::desc({d.k, d.n}, f32, {d.sb0, d.sb1});
  e.bias = memory::desc({1, d.n}, f32, {d.n, 1});
  e.out = memory::desc({d.m, d.n}, f32, {d.n, 1});
  dnnl::post_ops po;
  if (d.act != Activation::None)
    po.append_eltwise(1.f, algorithm_of(d.act), d.act == Activation::Silu ? 1.f : 0.f, 0.f);
  if (d.residual) {
    e.res = memory::desc({d.m, d.n}, f32, {d.sr0, d.sr1});
    po.append_binary(dnnl::algorithm::binary_add, e.res);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  dnnl::matmul::desc md(e.a, e.b, e.bias, e.out);
  e.prim = dnnl::matmul(dnnl::matmul::primitive_desc(md, attr, engine()));
  e.ok = true;
  return e;
}

using Key = std::array<int64_t, 11>;

// resnet18 training builds 32 convolutions' primitives; a model's GEMMs are as few.
PrimitiveCache<Key, Entry>& cache() {
  static PrimitiveCache<Key, Entry> c;
  return c;
}

}  // namespace

bool matmul_epilogue(const MatmulDesc& d, const float* a, const float* b, const float* bias, const float* residual,
                     float* out) {
  if (!backends::onednn::enabled() || d.m <= 0 || d.n <= 0 || d.k <= 0) return false;
  const int nt = onednn_threads();
  OmpThreads scope(nt);
  // oneDNN splits the work for the thread count a primitive was built under.
  const Key key{d.m,
                d.k,
                d.n,
                d.sa0,
                d.sa1,
                d.sb0,
                d.sb1,
                d.residual ? d.sr0 : -1,
                d.residual ? d.sr1 : -1,
                static_cast<int64_t>(d.act),
                nt};
  auto e = cache().get(key, [&] { return build(d); });
  if (!e->ok) return false;
  try {
    dnnl::engine& eng = engine();
    dnnl::stream s(eng);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(e->a, eng, const_cast<float*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(e->b, eng, const_cast<float*>(b))},
                                         {DNNL_ARG_BIAS, memory(e->bias, eng, const_cast<float*>(bias))},
                                         {DNNL_ARG_DST, memory(e->out, eng, out)}};
    if (d.residual) {
      const int index = d.act != Activation::None ? 1 : 0;  // the binary post-op's position
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                   memory(e->res, eng, const_cast<float*>(residual)));
    }
    e->prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  g_matmuls.fetch_add(1, std::memory_order_relaxed);
  return true;
}
#endif

}  // namespace kiln::cpu::onednn
