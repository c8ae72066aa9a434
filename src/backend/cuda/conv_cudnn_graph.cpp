// Convolutions through cuDNN's graph (backend) API, the path PyTorch's cuDNN v8+ convolutions
// take. The legacy API (cudnnConvolutionForward with an algorithm enum, conv_cudnn.cpp) does not
// reach cuDNN's newest engines: on an H100, resnet18's bfloat16 convolutions ran about twice as
// long as PyTorch's sm90 kernels (kiln bench zoo --profile against bench/cuda/torch_profile.py);
// through this path resnet18's bfloat16 training step went from 1.01x PyTorch's time to 0.65x
// (bench/results/gpu-eager-h100-2026-12-06-s6.md). conv_cudnn.cpp tries this path first and
// keeps the legacy one when no engine here works.
#include "backend/cuda/conv_cudnn_graph.h"

#ifdef KILN_HAVE_CUDNN
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"
#include "ops/conv_util.h"

namespace kiln::cuda {
namespace {

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { ok_ = cudnnBackendCreateDescriptor(type, &d_) == CUDNN_STATUS_SUCCESS; }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  bool ok() const { return ok_; }
  template <class T>
  bool set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t n) {
    ok_ = ok_ && cudnnBackendSetAttribute(d_, name, type, n, values) == CUDNN_STATUS_SUCCESS;
    return ok_;
  }
  bool set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o, 1);
  }
  bool finalize() {
    ok_ = ok_ && cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS;
    return ok_;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  bool ok_ = false;
};

// A finalized execution plan and the workspace it needs.
struct Plan {
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
};

std::mutex g_plans_mu;
// Per key: the plan, or null where no engine worked (the legacy path runs).
std::unordered_map<std::string, std::shared_ptr<Plan>> g_plans;

constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';
constexpr int64_t kMaxWorkspace = int64_t(1) << 30;

bool make_tensor_desc(Desc& t, int64_t uid, cudnnDataType_t type, const std::vector<int64_t>& dims, int64_t align,
                      bool channels_last) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  if (channels_last && dims.size() == 4) {
    const Shape cl = channels_last_strides(IntArrayRef(dims));
    strides.assign(cl.begin(), cl.end());
  }
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), static_cast<int64_t>(dims.size()));
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), static_cast<int64_t>(strides.size()));
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align, 1);
  return t.finalize();
}

// Whether an engine's numerical notes allow it: no nondeterminism where determinism is asked
// for, no TF32 or down-converted inputs for float32 without TF32.
bool allowed(cudnnBackendDescriptor_t cfg, const GraphConv& g) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count; ++i) {
    if (g.deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
    if (g.no_tf32 && (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
      return false;
    if (g.type == CUDNN_DATA_DOUBLE && notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
  }
  return true;
}

std::shared_ptr<Plan> build_plan(cudnnHandle_t h, const GraphConv& g) {
  Desc x(CUDNN_BACKEND_TENSOR_DESCRIPTOR), w(CUDNN_BACKEND_TENSOR_DESCRIPTOR), y(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const bool cl = g.channels_last;
  if (!make_tensor_desc(x, kUidX, g.type, g.x, g.align, cl) || !make_tensor_desc(w, kUidW, g.type, g.w, g.align, cl) ||
      !make_tensor_desc(y, kUidY, g.type, g.y, g.align, cl))
    return nullptr;
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = static_cast<int64_t>(g.pad.size());
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &g.compute, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, g.dil.data(), spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, g.stride.data(), spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, g.pad.data(), spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, g.pad.data(), spatial);
  if (!conv.finalize()) return nullptr;
  const double alpha_d = 1.0, beta_d = 0.0;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const bool dbl = g.type == CUDNN_DATA_DOUBLE;
  auto scale = [&](Desc& op, cudnnBackendAttributeName_t a, cudnnBackendAttributeName_t b) {
    if (dbl) {
      op.set(a, CUDNN_TYPE_DOUBLE, &alpha_d, 1);
      op.set(b, CUDNN_TYPE_DOUBLE, &beta_d, 1);
    } else {
      op.set(a, CUDNN_TYPE_FLOAT, &alpha_f, 1);
      op.set(b, CUDNN_TYPE_FLOAT, &beta_f, 1);
    }
  };
  std::unique_ptr<Desc> op;
  if (g.kind == GraphConv::Forward) {
    op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
    scale(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA);
  } else if (g.kind == GraphConv::BackwardData) {
    op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, x);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, y);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
    scale(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA);
  } else {
    op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, y);
    op->set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
    scale(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA);
  }
  if (!op->finalize()) return nullptr;
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t ops = op->get();
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &ops, 1);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &h, 1);
  if (!graph.finalize()) return nullptr;
  // Heuristics mode A ranks the engines; the fallback list covers shapes it has none for.
  for (cudnnBackendHeurMode_t heur_mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &heur_mode, 1);
    if (!heur.finalize()) continue;
    int64_t available = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available,
                                 nullptr) != CUDNN_STATUS_SUCCESS ||
        available <= 0)
      continue;
    std::vector<std::unique_ptr<Desc>> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < available; ++i) {
      cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(cfgs.back()->get());
    }
    int64_t got = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, available,
                                 &got, raw.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    // The first engine, in the heuristics' order, that is allowed and builds: a shape's choice
    // is the same run to run.
    for (int64_t i = 0; i < got; ++i) {
      if (!allowed(raw[static_cast<size_t>(i)], g)) continue;
      auto plan = std::make_shared<Plan>();
      plan->plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h, 1);
      plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      &raw[static_cast<size_t>(i)], 1);
      if (!plan->plan->finalize()) continue;
      int64_t n = 0;
      if (cudnnBackendGetAttribute(plan->plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                   &n, &plan->workspace) != CUDNN_STATUS_SUCCESS ||
          plan->workspace > kMaxWorkspace)
        continue;
      return plan;
    }
  }
  return nullptr;
}

// KILN_CUDNN_API=legacy turns it off (the legacy API for every convolution).
bool graph_api_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_CUDNN_API");
    return !(e && std::string(e) == "legacy");
  }();
  return on;
}

}  // namespace

bool run_graph_conv(cudnnHandle_t h, const GraphConv& g, void* x, void* w, void* y,
                    const std::function<void*(int64_t)>& workspace) {
  if (!graph_api_enabled()) return false;
  std::string key = g.key + (g.deterministic ? "D" : "N") + "a" + std::to_string(g.align) + "k" +
                    std::to_string(static_cast<int>(g.kind)) + "h" + std::to_string(reinterpret_cast<uintptr_t>(h));
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(g_plans_mu);
    auto it = g_plans.find(key);
    if (it != g_plans.end()) {
      plan = it->second;
      if (!plan) return false;
    }
  }
  if (!plan) {
    plan = build_plan(h, g);
    std::lock_guard<std::mutex> lock(g_plans_mu);
    g_plans.emplace(key, plan);
    if (!plan) return false;
  }
  void* ws = plan->workspace > 0 ? workspace(plan->workspace) : nullptr;
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {x, w, y};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs, 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws, 1);
  KILN_CHECK(pack.finalize(), "convolution: cuDNN variant pack could not be built");
  const cudnnStatus_t st = cudnnBackendExecute(h, plan->plan->get(), pack.get());
  KILN_CHECK(st == CUDNN_STATUS_SUCCESS, "CUDA: cudnnBackendExecute (convolution) failed: ", cudnnGetErrorString(st));
  return true;
}

}  // namespace kiln::cuda
#endif  // KILN_HAVE_CUDNN
