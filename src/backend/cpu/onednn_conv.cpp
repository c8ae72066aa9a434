// oneDNN convolutions (onednn_conv.h) and kiln::backends::onednn. Primitives are built once
// per shape, pass, memory format and thread count and kept in a bounded LRU map: models call
// the same convolutions every step, and building a primitive costs far more than a small conv.
#include "backend/cpu/onednn_conv.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/backends.h"

#ifdef KILN_HAVE_ONEDNN
#include <algorithm>
#include <array>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/onednn_common.h"
#endif

namespace kiln::backends::onednn {
namespace {
std::atomic<bool>& switch_flag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("KILN_ONEDNN");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}
}  // namespace

#ifdef KILN_HAVE_ONEDNN
bool is_available() { return true; }
std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}
std::string isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "all";
  }
}
#else
bool is_available() { return false; }
std::string version() { return ""; }
std::string isa() { return ""; }
#endif

bool enabled() { return is_available() && switch_flag().load(std::memory_order_relaxed); }
void set_enabled(bool on) { switch_flag().store(on, std::memory_order_relaxed); }

}  // namespace kiln::backends::onednn

namespace kiln::cpu::onednn {

namespace {
std::atomic<int64_t> g_executions{0};
// The pass as an int, for run()'s one signature with and without oneDNN.
enum Pass { Forward, BackwardData, BackwardWeights };
}  // namespace
int64_t executions() { return g_executions.load(); }

#ifndef KILN_HAVE_ONEDNN
bool bf16_supported() { return false; }
namespace {
bool run(const ConvDesc&, int, const void*, const void*, void*, void*) { return false; }
}  // namespace
#else
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

}  // namespace

bool bf16_supported() {
  static const bool ok = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return ok;
}

namespace {

// Where a pass runs: oneDNN on its blocked layouts ("any": nChw16c and friends, reordered
// from and to kiln's plain NCHW on each call), oneDNN on the plain layouts, or kiln's kernels.
// Chosen from per-pass timings on an AVX-512 machine (the zoo's resnet18/mobilenet_v2 convs):
// blocked wins for most shapes, 2-3x for depthwise, where plain layouts get oneDNN's slow
// reference kernel; channel counts off the 16-lane blocks (the resnet stem's 3 input channels,
// mobilenet's 24) pay for the padding in 1x1 convs and in backward-data, which run plain; the
// backward passes of a depthwise conv over 4 or fewer output pixels are faster in kiln's loops.
// Where oneDNN would run a pass with its gemm-based implementation (im2col and a GEMM per
// sample: what it falls back to when no JIT kernel takes the shape), kiln's own kernels run it:
// for ResNet's last stage at 64x64 inputs (a 512->512 3x3 conv on [8, 512, 2, 2]) oneDNN's AVX2
// JIT refuses the weight gradient and the gemm fallback took 13 ms, where kiln's samples
// batched into one GEMM (Note [Small planes batch samples], conv_kernels.cpp) take 3 ms. Below
// AVX-512, the other passes of a dense conv with a spatial kernel over 4 or fewer output pixels
// run in kiln too: 3.6 -> 2.3 ms for that conv's forward (2-core AVX2 EPYC; not measured on
// AVX-512, where oneDNN's blocks are 16 wide).
// KILN_ONEDNN_FORMAT=plain|any forces one layout (for measuring); read once.
enum class Route { Kiln, Plain, Blocked };
int64_t out_plane(const ConvDesc& d) {
  int64_t plane = 1;
  for (int i = 0; i < d.nd; ++i) plane *= d.out[i];
  return plane;
}
// Whether kiln's kernel for d batches its samples: 1-D and 2-D dense convs over small planes.
bool kiln_batches(const ConvDesc& d, int64_t max_plane) {
  return d.nd <= 2 && d.groups != d.C_in && out_plane(d) <= max_plane;
}
Route route(const ConvDesc& d, int pass) {
  static const char* env = std::getenv("KILN_ONEDNN_FORMAT");
  if (env && std::strcmp(env, "plain") == 0) return Route::Plain;
  if (env && std::strcmp(env, "any") == 0) return Route::Blocked;
  const int64_t plane = out_plane(d);
  bool one_by_one = true;
  for (int i = 0; i < d.nd; ++i) one_by_one = one_by_one && d.k[i] == 1;
  if (d.groups > 1 && d.groups == d.C_in) return pass != Forward && plane <= 4 ? Route::Kiln : Route::Blocked;
  static const bool below_avx512 = dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_mic;
  if (below_avx512 && kiln_batches(d, 4) && !one_by_one) return Route::Kiln;
  const bool off_block = (d.C_in / d.groups) % 16 != 0 || (d.C_out / d.groups) % 16 != 0;
  if (off_block && (one_by_one || pass == BackwardData)) return Route::Plain;
  return Route::Blocked;
}

memory::data_type dtype_of(const ConvDesc& d) { return d.bf16 ? memory::data_type::bf16 : memory::data_type::f32; }

memory::dims dims_of(int64_t a, int64_t b, const std::array<int64_t, 3>& sp, int nd) {
  memory::dims d{a, b};
  for (int i = 0; i < nd; ++i) d.push_back(sp[i]);
  return d;
}
Tag act_tag(int nd) { return nd == 1 ? Tag::ncw : nd == 2 ? Tag::nchw : Tag::ncdhw; }

memory::desc src_md(const ConvDesc& d) { return {dims_of(d.N, d.C_in, d.in, d.nd), dtype_of(d), act_tag(d.nd)}; }
memory::desc dst_md(const ConvDesc& d) { return {dims_of(d.N, d.C_out, d.out, d.nd), dtype_of(d), act_tag(d.nd)}; }
memory::desc weights_md(const ConvDesc& d) {
  if (d.groups == 1) {
    const Tag t = d.nd == 1 ? Tag::oiw : d.nd == 2 ? Tag::oihw : Tag::oidhw;
    return {dims_of(d.C_out, d.C_in, d.k, d.nd), dtype_of(d), t};
  }
  memory::dims w{d.groups, d.C_out / d.groups, d.C_in / d.groups};
  for (int i = 0; i < d.nd; ++i) w.push_back(d.k[i]);
  const Tag t = d.nd == 1 ? Tag::goiw : d.nd == 2 ? Tag::goihw : Tag::goidhw;
  return {w, dtype_of(d), t};
}
memory::desc bias_md(const ConvDesc& d) { return {{d.C_out}, dtype_of(d), Tag::x}; }
memory::desc any_like(const memory::desc& m, bool blocked) {
  return blocked ? memory::desc(m.dims(), m.data_type(), Tag::any) : m;
}

// One memory argument of a primitive: kiln's plain layout and the primitive's, with the
// reorder between them when they differ.
struct Arg {
  int id = 0;
  memory::desc user, want;
  dnnl::reorder to_want, to_user;
  bool differs = false;
};
Arg make_arg(int id, const memory::desc& user, const memory::desc& want, bool is_output) {
  Arg a{id, user, want, {}, {}, want != user};
  if (a.differs) {
    if (is_output)
      a.to_user = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), want, engine(), user));
    else
      a.to_want = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user, engine(), want));
  }
  return a;
}

struct Entry {
  bool ok = false;  // false: oneDNN refused the case; kiln's kernels run it
  dnnl::primitive prim;
  Arg in0, in1, out, bias;  // bias.id == 0: none
  memory::desc scratch;
};

struct Params {
  memory::dims strides, dil, pad_l, pad_r;
};
Params params_of(const ConvDesc& d) {
  Params p;
  for (int i = 0; i < d.nd; ++i) {
    p.strides.push_back(d.stride[i]);
    p.dil.push_back(d.dil[i] - 1);  // oneDNN counts the gaps between taps
    p.pad_l.push_back(d.pad[i]);
    p.pad_r.push_back(d.pad[i]);
  }
  return p;
}

Entry build(const ConvDesc& d, int pass, bool with_bias, bool blocked) {
  using namespace dnnl;
  Entry e;
  const Params p = params_of(d);
  const memory::desc x = src_md(d), w = weights_md(d), y = dst_md(d), b = bias_md(d);
  const memory::desc xa = any_like(x, blocked), wa = any_like(w, blocked), ya = any_like(y, blocked);
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  const bool fwd_bias = pass == Forward && with_bias;
  auto fwd_desc = fwd_bias ? convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, xa,
                                                       wa, b, ya, p.strides, p.dil, p.pad_l, p.pad_r)
                           : convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, xa,
                                                       wa, ya, p.strides, p.dil, p.pad_l, p.pad_r);
  convolution_forward::primitive_desc fwd(fwd_desc, attr, engine());
  if (pass == Forward) {
    e.prim = convolution_forward(fwd);
    e.in0 = make_arg(DNNL_ARG_SRC, x, fwd.src_desc(), false);
    e.in1 = make_arg(DNNL_ARG_WEIGHTS, w, fwd.weights_desc(), false);
    e.out = make_arg(DNNL_ARG_DST, y, fwd.dst_desc(), true);
    if (with_bias) e.bias = make_arg(DNNL_ARG_BIAS, b, b, false);
    e.scratch = fwd.scratchpad_desc();
  } else if (pass == BackwardData) {
    convolution_backward_data::desc bd(algorithm::convolution_direct, xa, wa, ya, p.strides, p.dil, p.pad_l, p.pad_r);
    convolution_backward_data::primitive_desc pd(bd, attr, engine(), fwd);
    e.prim = convolution_backward_data(pd);
    e.in0 = make_arg(DNNL_ARG_DIFF_DST, y, pd.diff_dst_desc(), false);
    e.in1 = make_arg(DNNL_ARG_WEIGHTS, w, pd.weights_desc(), false);
    e.out = make_arg(DNNL_ARG_DIFF_SRC, x, pd.diff_src_desc(), true);
    e.scratch = pd.scratchpad_desc();
  } else {
    auto bd = with_bias ? convolution_backward_weights::desc(algorithm::convolution_direct, xa, wa, b, ya, p.strides,
                                                             p.dil, p.pad_l, p.pad_r)
                        : convolution_backward_weights::desc(algorithm::convolution_direct, xa, wa, ya, p.strides,
                                                             p.dil, p.pad_l, p.pad_r);
    convolution_backward_weights::primitive_desc pd(bd, attr, engine(), fwd);
    // The gemm fallback on a small plane: kiln's batched kernel runs it (see route()).
    if (kiln_batches(d, kBatchedConvMaxPlane) && std::strstr(pd.impl_info_str(), "gemm")) return e;
    e.prim = convolution_backward_weights(pd);
    e.in0 = make_arg(DNNL_ARG_SRC, x, pd.src_desc(), false);
    e.in1 = make_arg(DNNL_ARG_DIFF_DST, y, pd.diff_dst_desc(), false);
    e.out = make_arg(DNNL_ARG_DIFF_WEIGHTS, w, pd.diff_weights_desc(), true);
    if (with_bias) e.bias = make_arg(DNNL_ARG_DIFF_BIAS, b, pd.diff_bias_desc(), true);
    e.scratch = pd.scratchpad_desc();
  }
  e.ok = true;
  return e;
}

// Everything a primitive depends on: the shape, the pass, bias, layout and thread count
// (oneDNN splits the work for the thread count it was built under).
using Key = std::array<int64_t, 28>;
Key key_of(const ConvDesc& d, int pass, bool with_bias, bool blocked, int threads) {
  Key k{d.nd, d.N, d.C_in, d.C_out, d.groups, pass, with_bias, blocked, threads, d.bf16};
  size_t i = 10;
  for (const auto* a : {&d.in, &d.out, &d.k, &d.stride, &d.pad, &d.dil})
    for (int j = 0; j < 3; ++j) k[i++] = j < d.nd ? (*a)[j] : 0;
  return k;
}

// resnet18 training builds 32 convolutions' primitives; a model's GEMMs are as few.
PrimitiveCache<Key, Entry>& cache() {
  static PrimitiveCache<Key, Entry> c;
  return c;
}

// The temporaries (blocked copies, scratchpad) in per-thread buffers that only grow: fresh
// pages fault in one by one (kiln's allocator hands blocks under 1 MiB to malloc), which cost
// more than the convolution at the zoo's sizes. Slots: 0, 1 inputs, 2 output, 3 scratchpad.
memory scratch_memory(const memory::desc& md, int slot) {
  struct Buffer {
    void* p = nullptr;
    size_t n = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local std::array<Buffer, 4> buffers;
  Buffer& b = buffers[slot];
  const size_t bytes = std::max<size_t>(md.get_size(), 64);
  if (bytes > b.n) {
    std::free(b.p);
    b.n = (bytes + 4095) / 4096 * 4096;
    b.p = std::aligned_alloc(4096, b.n);
    if (!b.p) throw std::bad_alloc();
  }
  return memory(md, engine(), b.p);
}

// Runs `pass` on kiln's plain buffers, reordering to and from the primitive's layouts.
bool run(const ConvDesc& d, int pass, const void* in0, const void* in1, void* out, void* bias_io) {
  if (!backends::onednn::enabled() || (d.bf16 && !bf16_supported())) return false;
  const int nt = onednn_threads();
  OmpThreads scope(nt);
  const Route r = route(d, pass);
  if (r == Route::Kiln) return false;
  const bool blocked = r == Route::Blocked;
  const bool with_bias = bias_io != nullptr;
  auto e = cache().get(key_of(d, pass, with_bias, blocked, nt), [&] { return build(d, pass, with_bias, blocked); });
  if (!e->ok) return false;
  try {
    dnnl::engine& eng = engine();
    dnnl::stream s(eng);
    std::unordered_map<int, memory> args;
    auto input = [&](const Arg& a, const void* p, int slot) {
      memory user(a.user, eng, const_cast<void*>(p));
      if (!a.differs) {
        args.emplace(a.id, user);
        return;
      }
      memory m = scratch_memory(a.want, slot);
      a.to_want.execute(s, user, m);
      args.emplace(a.id, m);
    };
    input(e->in0, in0, 0);
    input(e->in1, in1, 1);
    memory out_user(e->out.user, eng, out);
    memory out_mem = e->out.differs ? scratch_memory(e->out.want, 2) : out_user;
    args.emplace(e->out.id, out_mem);
    if (e->bias.id) args.emplace(e->bias.id, memory(e->bias.user, eng, bias_io));
    args.emplace(DNNL_ARG_SCRATCHPAD, scratch_memory(e->scratch, 3));
    e->prim.execute(s, args);
    if (e->out.differs) e->out.to_user.execute(s, out_mem, out_user);
    s.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  g_executions.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

#endif

bool conv_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  return !d.bf16 && run(d, Forward, x, w, y, const_cast<float*>(b));
}
bool conv_backward_data(const ConvDesc& d, const float* gy, const float* w, float* gx) {
  return !d.bf16 && run(d, BackwardData, gy, w, gx, nullptr);
}
bool conv_backward_weights(const ConvDesc& d, const float* x, const float* gy, float* gw, float* gb) {
  return !d.bf16 && run(d, BackwardWeights, x, gy, gw, gb);
}
bool conv_forward(const ConvDesc& d, const BFloat16* x, const BFloat16* w, const BFloat16* b, BFloat16* y) {
  return d.bf16 && run(d, Forward, x, w, y, const_cast<BFloat16*>(b));
}
bool conv_backward_data(const ConvDesc& d, const BFloat16* gy, const BFloat16* w, BFloat16* gx) {
  return d.bf16 && run(d, BackwardData, gy, w, gx, nullptr);
}
bool conv_backward_weights(const ConvDesc& d, const BFloat16* x, const BFloat16* gy, BFloat16* gw, BFloat16* gb) {
  return d.bf16 && run(d, BackwardWeights, x, gy, gw, gb);
}

}  // namespace kiln::cpu::onednn
