// The generated op tests: one test per op in ops.def (Note [Op samples]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {

namespace {
// Tolerances like torch.testing.assert_close, by dtype.
void default_tol(DType t, double& atol, double& rtol) {
  switch (t) {
    case DType::Float16: atol = 1e-5; rtol = 1e-3; break;
    case DType::BFloat16: atol = 1e-5; rtol = 1.6e-2; break;
    case DType::Float32: atol = 1e-5; rtol = 1.3e-6; break;
    case DType::Float64: atol = 1e-7; rtol = 1e-7; break;
    default: atol = 0; rtol = 0; break;
  }
}

void expect_close(const Tensor& got, const Tensor& want, const OpSample& s, size_t k, const char* what,
                  bool values = true) {
  ASSERT_TRUE(got.defined()) << what << " output " << k << " is undefined";
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " output " << k << " shape";
  ASSERT_EQ(got.dtype(), want.dtype()) << what << " output " << k << " dtype";
  if (!s.compare_values || !values) return;
  double atol = s.atol, rtol = s.rtol;
  double da, dr;
  default_tol(got.dtype(), da, dr);
  atol = std::max(atol, da);
  rtol = std::max(rtol, dr);
  auto g = got.to_vector<double>();
  auto w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << " output " << k << " element " << i << ": got " << g[i] << ", expected " << w[i]
                    << " (atol " << atol << ", rtol " << rtol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ";
}

// Double backward (create_graph through the VJP) is checked for every
// differentiable op except these: prod/cumprod build their zero-safe gradients
// with masks (first order only for now), and convolution_backward, whose VJP is
// the convolutions' second order (checked through them); its own would be their
// third, minutes of finite differences on 2 cores.
bool second_order_supported(OpId op) {
  return op != OpId::prod && op != OpId::cumprod && op != OpId::convolution_backward &&
         op != OpId::_scaled_dot_product_flash_attention;  // its backward raises (Note [Flash attention])
}

// RAII for the dispatcher's test hooks (src/dispatch/dispatch.h), so a
// sample that throws leaves them off.
struct ForceDecomposition {
  explicit ForceDecomposition(OpId op) { set_force_decomposition(static_cast<int>(op)); }
  ~ForceDecomposition() { set_force_decomposition(-1); }
};
struct CountOpCalls {
  std::vector<uint32_t> counts = std::vector<uint32_t>(kNumOps, 0);
  CountOpCalls() { set_op_call_counts(&counts); }
  ~CountOpCalls() { set_op_call_counts(nullptr); }
};

// A composite's decomposition is what the compiler runs and what eager falls
// back to on a device without a kernel; where the CPU has a kernel it would
// otherwise never run in these tests.
bool has_kernel_and_decomp(const OpInfo& info) {
  return info.kind == OpKind::Composite && info.decomp && info.kernels[static_cast<int>(DeviceType::CPU)];
}

class OpTest : public ::testing::TestWithParam<int> {};

TEST_P(OpTest, Samples) {
  OpId op = static_cast<OpId>(GetParam());
  const OpInfo& info = op_info(op);
  std::vector<OpSample> samples = op_samples(op);
  ASSERT_FALSE(samples.empty()) << "op '" << info.name << "' has no test samples";
  for (const OpSample& s : samples) {
    SCOPED_TRACE(std::string(info.name) + ": " + s.name);
    TensorList got, want;
    try {
      CountOpCalls calls;
      got = s.fn(s.inputs);
      // A sample filed under an op must exercise it (not only ops around it).
      EXPECT_GT(calls.counts[static_cast<size_t>(op)], 0u) << "the sample never calls " << info.name;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    if (s.reference) {
      want = s.reference(s.inputs);
      ASSERT_EQ(got.size(), want.size()) << "number of outputs";
      for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], s, k, "eager");
    }
    if (s.check) s.check(got);
    if (has_kernel_and_decomp(info)) {
      TensorList dec;
      bool ran = false;
      try {
        ForceDecomposition force(op);
        dec = s.fn(s.inputs);
        ran = true;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "decomposition threw: " << e.what();
      }
      if (ran) {
        EXPECT_EQ(dec.size(), got.size()) << "decomposition: number of outputs";
        for (size_t k = 0; k < std::min(dec.size(), got.size()); ++k)
          expect_close(dec[k], got[k], s, k, "decomposition", !info.has(RANDOM));
        if (s.check) s.check(dec);
      }
    }
    // Gradients against finite differences, in float64.
    if (s.check_grad && info.differentiable()) {
      TensorList in;
      bool any = false;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const Tensor& t = s.inputs[i];
        bool want_grad = t.defined() && is_floating_point(t.dtype()) &&
                         (s.grad_inputs.empty() ||
                          std::find(s.grad_inputs.begin(), s.grad_inputs.end(), i) != s.grad_inputs.end());
        if (want_grad) {
          in.push_back(t.detach().to(kFloat64, true).requires_grad_(true));
          any = true;
        } else {
          in.push_back(t.defined() && is_floating_point(t.dtype()) ? t.to(kFloat64) : t);
        }
      }
      if (any) {
        try {
          GradcheckOptions o;
          o.check_backward_twice = second_order_supported(op);
          EXPECT_TRUE(gradcheck(s.fn, in, o));
        } catch (const std::exception& e) {
          ADD_FAILURE() << "gradcheck: " << e.what();
        }
      }
    }
  }
  for (const ErrorSample& e : op_error_samples(op)) {
    SCOPED_TRACE(std::string(info.name) + " bad input: " + e.name);
    try {
      e.call();
      ADD_FAILURE() << "expected kiln::Error containing '" << e.expect << "'";
    } catch (const kiln::Error& err) {
      EXPECT_NE(std::string(err.what()).find(e.expect), std::string::npos)
          << "message '" << err.what() << "' lacks '" << e.expect << "'";
    } catch (const std::exception& err) {
      ADD_FAILURE() << "threw a non-kiln exception: " << err.what();
    }
  }
}

std::string op_test_name(const ::testing::TestParamInfo<int>& p) { return op_name(static_cast<OpId>(p.param)); }
INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::Range(0, kNumOps), op_test_name);

}  // namespace

}  // namespace kiln::test
