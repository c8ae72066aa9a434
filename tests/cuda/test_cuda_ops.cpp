// The generated CUDA op tests (issue 11): every op of ops.def runs its samples (Note [Op samples])
// on the CPU and on CUDA (inputs copied to the device with their strides, factory ops made there)
// and the results must agree: outputs within the accuracy rule's tolerances (exact for integers
// and bools), and first-order gradients of the differentiable float samples. Random ops compare
// values too: the CUDA factories draw the CPU's Philox numbers (random.cu; randperm via the CPU).
// A sample whose CUDA run throws fails, so an op without a CUDA path shows, except where the
// error is one of kKnownMissing's, a list that CudaOpTable.KnownMissingIsExact keeps exact.
// KILN_CUDA_OPS_DEVICE=cpu runs the same harness with the CPU as the device under test, so the
// harness itself can be checked on a machine without a GPU (every op must then pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "kiln/compile.h"
#include "kiln/cuda.h"
#include "tests/cuda/cuda_test.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {
// Generated CUDA is opt-in until verified on a GPU (Note [Kernel devices]): these tests verify it.
const bool kCudaCodegenOn = [] {
  setenv("KILN_CUDA_CODEGEN", "1", 0);
  return true;
}();


// Note [CUDA known-missing list]
// The CUDA errors a sample may raise without failing: `op` names the op whose message it is
// (the message starts with "<op>:"), `what` a substring of the message. Entries whose `what` is
// kNoKernel say the op has neither a CUDA kernel nor a decomposition; KnownMissingIsExact checks
// them against the op table in every CUDA build, so an op that gains a kernel must leave the list.
// The others are limits of an existing kernel (dtype, index forms). Shrink it as kernels land.
constexpr const char* kNoKernel = "not supported yet on cuda:0 (no kernel and no decomposition)";
struct KnownMissing {
  const char* op;
  const char* what;
};
const KnownMissing kKnownMissing[] = {
    // Limits of kernels that exist.
    {"index", "not supported yet on cuda with a"},  // a bool index reaching the op (kiln::index converts masks)
    {"index_put", "not supported yet on cuda with a"},
    {"scatter_add", "not supported yet on cuda for dtype"},
    {"mm", "not supported yet on cuda for dtype"},
    {"bmm", "not supported yet on cuda for dtype"},
    {"convolution", "not supported yet on cuda for dtype"},  // cuDNN: floating dtypes only
    {"convolution", "convolution needs cuDNN"},              // a build without cuDNN
    {"convolution_backward", "convolution needs cuDNN"},
};

const KnownMissing* known_missing(const std::string& message) {
  for (const KnownMissing& k : kKnownMissing) {
    std::string prefix = std::string(k.op) + ":";
    if (message.rfind(prefix, 0) == 0 && message.find(k.what) != std::string::npos) return &k;
  }
  return nullptr;
}

bool on_cpu_selftest() {
  const char* d = std::getenv("KILN_CUDA_OPS_DEVICE");
  return d && std::string(d) == "cpu";
}
Device device_under_test() { return on_cpu_selftest() ? kCPU : Device(DeviceType::CUDA); }

// t on `dev` with t's sizes, strides and storage offset, so strided kernels see the same layout.
Tensor to_device(const Tensor& t, Device dev) {
  if (!t.defined()) return t;
  Tensor src = t.detach();
  bool overlapping = false;
  int64_t extent = src.storage_offset() + 1;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (src.sizes()[d] == 0) extent = 0;
    if (src.strides()[d] == 0 && src.sizes()[d] > 1) overlapping = true;
    if (extent > 0) extent += (src.sizes()[d] - 1) * src.strides()[d];
  }
  Tensor out;
  if (src.is_contiguous() || overlapping || extent == 0) {
    out = src.to(dev, std::nullopt, /*non_blocking=*/false, /*copy=*/true);
  } else {
    Tensor base = zeros({extent}, TensorOptions(src.dtype()).device(dev));
    out = base.as_strided(src.sizes().vec(), src.strides().vec(), src.storage_offset());
    out.copy_(src);
  }
  out.unsafe_impl()->is_wrapped_number = t.unsafe_impl()->is_wrapped_number;
  return out;
}
TensorList to_device(const TensorList& in, Device dev) {
  TensorList out;
  for (const Tensor& t : in) out.push_back(to_device(t, dev));
  return out;
}

// The index of the Device attr in a factory op's signature (-1: none), as meta_tests.cpp.
int device_attr(const OpInfo& info) {
  std::string sig = info.signature;
  size_t semi = sig.find(';');
  if (semi == std::string::npos) return -1;
  std::stringstream attrs(sig.substr(semi + 1, sig.find(')', semi) - semi - 1));
  std::string a;
  for (int k = 0; std::getline(attrs, a, ','); ++k)
    if (a.find("Device") != std::string::npos) return k;
  return -1;
}

// Factory ops called by a sample make their tensors on the device under test. Under a mode,
// in-place ops on tensors that require grad keep no history (meta_tests.cpp), so gradients run
// under it only for the samples that made a factory call.
struct FactoryOnDeviceMode : DispatchMode {
  Device dev;
  int rewrites = 0;
  explicit FactoryOnDeviceMode(Device d) : dev(d) {}
  std::vector<Tensor> call(OpId o, std::vector<Tensor>& inputs, Attrs& attrs) override {
    const OpInfo& info = op_info(o);
    int k = info.has(FACTORY) ? device_attr(info) : -1;
    if (k >= 0 && static_cast<size_t>(k) < attrs.size()) {
      std::vector<AttrValue> v = attrs.values();
      v[k] = dev;
      attrs = Attrs(std::move(v));
      ++rewrites;
    }
    return call_op(o, inputs, attrs);
  }
};
struct ModeGuard {
  explicit ModeGuard(DispatchMode* m) { push_dispatch_mode(m); }
  ~ModeGuard() { pop_dispatch_mode(); }
};

// CUDA outputs against CPU ones; values only when `values`.
void expect_match(const TensorList& got, const TensorList& want, Device dev, bool values, double s_atol, double s_rtol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what << ": number of outputs";
  for (size_t k = 0; k < got.size(); ++k) {
    if (!want[k].defined()) {
      EXPECT_FALSE(got[k].defined()) << what << " output " << k;
      continue;
    }
    ASSERT_TRUE(got[k].defined()) << what << " output " << k << " is undefined";
    EXPECT_EQ(got[k].device(), want[k].device() == kCPU ? dev : want[k].device()) << what << " output " << k;
    ASSERT_EQ(got[k].sizes().vec(), want[k].sizes().vec()) << what << " output " << k << " shape";
    ASSERT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k << " dtype";
    if (!values) continue;
    double atol, rtol;
    accuracy_tolerance(want[k].dtype(), atol, rtol);
    atol = std::max(atol, s_atol);
    rtol = std::max(rtol, s_rtol);
    Tensor host = got[k].cpu();
    if (std::getenv("KILN_CUDA_OPS_TRACE"))
      std::fprintf(stderr, "  %s output %zu: got %s on %s -> %s, want on %s\n", what, k, shape_str(got[k].sizes()).c_str(),
                   got[k].device().str().c_str(), host.device().str().c_str(), want[k].device().str().c_str());
    auto g = host.to_vector<double>(), w = want[k].to_vector<double>();
    int bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                (is_floating_point(want[k].dtype()) && std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]));
      if (!ok && bad++ < 3)
        ADD_FAILURE() << what << " output " << k << " element " << i << ": cuda " << g[i] << ", cpu " << w[i];
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ";
  }
}

// Float64 leaves on `dev` that require grad, for the inputs the op tests differentiate.
TensorList grad_inputs(const OpSample& s, Device dev) {
  TensorList in;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const Tensor& t = s.inputs[i];
    if (!t.defined() || !is_floating_point(t.dtype())) {
      in.push_back(to_device(t, dev));
      continue;
    }
    bool want =
        s.grad_inputs.empty() || std::find(s.grad_inputs.begin(), s.grad_inputs.end(), i) != s.grad_inputs.end();
    Tensor c = to_device(t.detach().to(kFloat64, true), dev);
    in.push_back(want ? c.requires_grad_(true) : c);
  }
  return in;
}

// Gradients of sum_k <out_k, w_k> with fixed weights, with respect to every input requiring grad.
// `mode` (if any) is active while fn runs, not while the cotangents are made.
TensorList grads_of(const OpFn& fn, const TensorList& in, DispatchMode* mode = nullptr) {
  TensorList outs, roots, cot, wrt;
  {
    std::optional<ModeGuard> guard;
    if (mode) guard.emplace(mode);
    outs = fn(in);
  }
  for (const Tensor& o : outs)
    if (o.defined() && o.requires_grad()) {
      roots.push_back(o);
      cot.push_back(to_device(make_input(o.sizes().vec(), o.dtype(), 99), o.device()));
    }
  for (const Tensor& t : in)
    if (t.defined() && t.requires_grad()) wrt.push_back(t);
  if (roots.empty() || wrt.empty()) return {};
  return autograd::grad(roots, wrt, cot, std::nullopt, false, /*allow_unused=*/true);
}

// Runs `body`; a known-missing CUDA error is noted in `missing` and returns false, another
// exception fails the test and returns false.
template <class F>
bool run_on_device(const char* what, std::vector<std::string>& missing, F&& body) {
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    if (known_missing(e.what())) {
      missing.push_back(e.what());
      return false;
    }
    ADD_FAILURE() << what << " threw: " << e.what();
    return false;
  }
}

class CudaOpTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaOpTest, MatchesCpu) {
  if (!on_cpu_selftest()) KILN_REQUIRE_CUDA();
  const Device dev = device_under_test();
  OpId op = static_cast<OpId>(GetParam());
  const OpInfo& info = op_info(op);
  std::vector<OpSample> samples = op_samples(op);
  ASSERT_FALSE(samples.empty()) << "op '" << info.name << "' has no samples";
  int ran = 0;
  std::vector<std::string> missing;
  for (const OpSample& s : samples) {
    SCOPED_TRACE(std::string(info.name) + ": " + s.name);
    if (std::getenv("KILN_CUDA_OPS_TRACE")) std::fprintf(stderr, "sample %s: %s\n", info.name, s.name.c_str());
    TensorList want;
    manual_seed(1234);
    try {
      want = s.fn(to_device(s.inputs, kCPU));
    } catch (const Error&) {
      continue;  // a sample about the CPU's own errors
    }
    TensorList got;
    FactoryOnDeviceMode mode(dev);
    bool ok = run_on_device("cuda forward", missing, [&] {
      // The copies to the device are made before the mode: it counts the sample's factory calls.
      TensorList din = to_device(s.inputs, dev);
      ModeGuard guard(&mode);
      manual_seed(1234);
      got = s.fn(din);
    });
    if (!ok) continue;
    ++ran;
    // Random ops compare values too (the compile tests hold decompositions to the same numbers).
    expect_match(got, want, dev, s.compare_values || info.has(RANDOM), s.atol, s.rtol, "forward");
    // A check validates what cannot be compared; others look at aliasing with the CPU inputs.
    if (s.check && !s.compare_values) {
      TensorList host;
      for (const Tensor& t : got) host.push_back(t.defined() ? t.cpu() : t);
      s.check(host);
    }
    if (!s.check_grad || !info.differentiable()) continue;
    TensorList gin = grad_inputs(s, kCPU);
    bool any = false;
    for (const Tensor& t : gin) any = any || (t.defined() && t.requires_grad());
    if (!any) continue;
    TensorList gw, gg;
    try {
      manual_seed(1234);
      gw = grads_of(s.fn, gin);
    } catch (const std::exception& e) {
      continue;  // a sample without gradients on the CPU either (the op tests cover it)
    }
    bool grads_ok = run_on_device("cuda gradients", missing, [&] {
      TensorList gdin = grad_inputs(s, dev);
      FactoryOnDeviceMode grad_mode(dev);
      manual_seed(1234);
      gg = grads_of(s.fn, gdin, mode.rewrites > 0 ? &grad_mode : nullptr);
    });
    // Outside the mode: the copies back to the host are factory calls it would send to the device.
    if (grads_ok) expect_match(gg, gw, dev, true, std::max(s.atol, 1e-8), std::max(s.rtol, 1e-5), "gradient");
  }
  if (ran == 0 && !missing.empty())
    GTEST_SKIP() << info.name << ": known missing on cuda (Note [CUDA known-missing list]): " << missing[0];
}

std::string test_name(const ::testing::TestParamInfo<int>& p) { return op_name(static_cast<OpId>(p.param)); }
INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTest, ::testing::Range(0, kNumOps), test_name);

// Every op's samples compiled with "inductor" on the device against eager on the device: the
// generated CUDA kernels (Note [Generated CUDA]) and the extern calls between them give eager's
// outputs and gradients within the op's tolerances. As in the CPU compile tests, the first two
// samples of each input dtype; samples that make tensors with factory ops are left to the test
// above (the graph would make them where the sample says: the CPU).
class CudaCompileOpTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaCompileOpTest, MatchesEager) {
  if (!on_cpu_selftest()) KILN_REQUIRE_CUDA();
  const Device dev = device_under_test();
  OpId op = static_cast<OpId>(GetParam());
  const OpInfo& info = op_info(op);
  const std::vector<OpSample> samples = op_samples(op);
  const std::vector<bool> run = first_two_of_each_dtype(samples);
  for (size_t si = 0; si < samples.size(); ++si) {
    if (!run[si]) continue;
    const OpSample& s = samples[si];
    SCOPED_TRACE(std::string(info.name) + ": " + s.name);
    TensorList want;
    FactoryOnDeviceMode mode(dev);
    try {
      TensorList din = to_device(s.inputs, dev);
      ModeGuard guard(&mode);
      manual_seed(1234);
      want = s.fn(din);
    } catch (const std::exception&) {
      continue;  // eager's own errors, and what the test above reports
    }
    if (mode.rewrites > 0) continue;
    for (Tensor& t : want) t = t.defined() ? t.cpu() : t;
    auto f = compile(s.fn, {.backend = "inductor", .background = false});
    TensorList got;
    try {
      manual_seed(1234);
      got = f(to_device(s.inputs, dev));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "compiled run threw: " << e.what();
      continue;
    }
    expect_match(got, want, dev, s.compare_values || info.has(RANDOM), s.atol, s.rtol, "compiled forward");
    if (!s.check_grad || !info.differentiable()) continue;
    TensorList gw, gg;
    try {
      manual_seed(1234);
      gw = grads_of(s.fn, grad_inputs(s, dev));
    } catch (const std::exception&) {
      continue;
    }
    if (gw.empty()) continue;
    for (Tensor& t : gw) t = t.defined() ? t.cpu() : t;
    try {
      manual_seed(1234);
      gg = grads_of([&](const TensorList& in) { return f(in); }, grad_inputs(s, dev));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "compiled gradients threw: " << e.what();
      continue;
    }
    expect_match(gg, gw, dev, true, std::max(s.atol, 1e-8), std::max(s.rtol, 1e-5), "compiled gradient");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaCompileOpTest, ::testing::Range(0, kNumOps), test_name);

// Note [CUDA known-missing list]: the kNoKernel entries are exactly the ops with neither a CUDA
// kernel nor a decomposition. Runs without a device (kernels register at load time).
TEST(CudaOpTable, KnownMissingIsExact) {
  if (!cuda::is_built()) GTEST_SKIP() << "kiln was built without CUDA";
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<OpId>(i));
    // Views and copy_ are the dispatcher's own, on every device.
    bool lacking = !info.kernels[static_cast<int>(DeviceType::CUDA)] && !info.decomp && !info.has(VIEW) &&
                   info.name != std::string("copy_");
    bool listed = false;
    for (const KnownMissing& k : kKnownMissing)
      listed = listed || (info.name == std::string(k.op) && k.what == kNoKernel);
    if (lacking && !listed) ADD_FAILURE() << info.name << " has no CUDA path: give it one, or list it in kKnownMissing";
    if (!lacking && listed) ADD_FAILURE() << info.name << " now has a CUDA path: remove it from kKnownMissing";
  }
  for (const KnownMissing& k : kKnownMissing) {
    bool found = false;
    for (int i = 0; i < kNumOps; ++i) found = found || op_info(static_cast<OpId>(i)).name == std::string(k.op);
    EXPECT_TRUE(found) << "kKnownMissing names '" << k.op << "', which is not in ops.def";
  }
}

}  // namespace
}  // namespace kiln::test
