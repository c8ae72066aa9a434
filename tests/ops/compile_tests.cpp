// The generated compile tests: every op's samples (Note [Op samples]) run
// through kiln::compile with the "eager", "aot_eager" and "inductor" backends and are
// compared with eager — outputs, and first-order gradients where the op is
// differentiable. "eager" runs eager's kernels in eager's order, so it must
// agree bit for bit; "aot_eager" (functionalized, its backward from the joint
// graph's partition), as it runs by default and decomposed to prims (as a
// code-generating backend receives the graph), within the op's tolerances;
// "inductor" (generated loop kernels for the pointwise prims and reductions) likewise.
// Random ops reseed before each run: a compiled graph draws eager's numbers.
// An op whose samples are never captured into a graph (or, for a
// data-dependent op, never end one) fails.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {


// Compares two runs' outputs; exact demands identical bits (NaNs equal).
void expect_match(const TensorList& got, const TensorList& want, bool exact, bool values, double s_atol, double s_rtol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what << ": number of outputs";
  for (size_t k = 0; k < got.size(); ++k) {
    if (!want[k].defined()) {
      EXPECT_FALSE(got[k].defined()) << what << " output " << k;
      continue;
    }
    ASSERT_TRUE(got[k].defined()) << what << " output " << k << " is undefined";
    ASSERT_TRUE(got[k].has_storage()) << what << " output " << k << " was never made real";
    ASSERT_EQ(got[k].sizes().vec(), want[k].sizes().vec()) << what << " output " << k << " shape";
    ASSERT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k << " dtype";
    if (!values) continue;
    double atol, rtol;
    accuracy_tolerance(want[k].dtype(), atol, rtol);
    atol = std::max(atol, s_atol);
    rtol = std::max(rtol, s_rtol);
    auto g = got[k].to_vector<double>(), w = want[k].to_vector<double>();
    int bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i];
      bool ok = same || (!exact && std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]));
      if (!ok && bad++ < 3)
        ADD_FAILURE() << what << " output " << k << " element " << i << ": got " << g[i] << ", eager " << w[i];
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ";
  }
}

// Copies of the sample's inputs, so that a sample writing an input in place sees fresh values each run.
TensorList fresh(const TensorList& in) {
  TensorList out;
  for (const Tensor& t : in) out.push_back(t.defined() ? t.detach().clone() : t);
  return out;
}

// Float64 leaves that require grad, for the inputs the op tests differentiate.
TensorList grad_inputs(const OpSample& s) {
  TensorList in;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const Tensor& t = s.inputs[i];
    bool want =
        t.defined() && is_floating_point(t.dtype()) &&
        (s.grad_inputs.empty() || std::find(s.grad_inputs.begin(), s.grad_inputs.end(), i) != s.grad_inputs.end());
    if (t.defined() && is_floating_point(t.dtype())) {
      Tensor c = t.detach().to(kFloat64, true);
      in.push_back(want ? c.requires_grad_(true) : c);
    } else {
      in.push_back(t);
    }
  }
  return in;
}

// Gradients of sum_k <out_k, w_k> with fixed weights, with respect to every input requiring grad.
TensorList grads_of(const OpFn& fn, const TensorList& in) {
  TensorList outs = fn(in), roots, cot, wrt;
  for (const Tensor& o : outs)
    if (o.defined() && o.requires_grad()) {
      roots.push_back(o);
      cot.push_back(make_input(o.sizes().vec(), o.dtype(), 99));
    }
  for (const Tensor& t : in)
    if (t.defined() && t.requires_grad()) wrt.push_back(t);
  if (roots.empty() || wrt.empty()) return {};
  return autograd::grad(roots, wrt, cot, std::nullopt, false, /*allow_unused=*/true);
}

class CompileTest : public ::testing::TestWithParam<int> {};

TEST_P(CompileTest, Samples) {
  OpId op = static_cast<OpId>(GetParam());
  const OpInfo& info = op_info(op);
  std::vector<OpSample> samples = op_samples(op);
  ASSERT_FALSE(samples.empty()) << "op '" << info.name << "' has no samples";
  const bool random = info.has(RANDOM);
  int captured = 0;
  // "inductor" compiles C++ for every graph: it runs first_two_of_each_dtype's samples, to keep
  // the table's compile count down.
  const std::vector<bool> inductor_samples = first_two_of_each_dtype(samples);
  for (size_t si = 0; si < samples.size(); ++si) {
    const OpSample& s = samples[si];
    const bool run_inductor = inductor_samples[si];
    SCOPED_TRACE(std::string(info.name) + ": " + s.name);
    manual_seed(1234);
    TensorList want;
    try {
      want = s.fn(fresh(s.inputs));
    } catch (const Error&) {
      continue;  // a sample about eager's own errors
    }
    for (const char* backend : {"eager", "aot_eager", "aot_eager+decompose", "inductor"}) {
      SCOPED_TRACE(backend);
      if (std::string(backend) == "inductor" && !run_inductor) continue;
      bool exact = std::string(backend) == "eager";
      CompileOptions o;
      o.background = false;  // inductor: the generated kernels from the first call
      o.backend = exact ? "eager" : std::string(backend) == "inductor" ? "inductor" : "aot_eager";
      if (std::string(backend) == "aot_eager+decompose") o.options["decompose"] = "true";
      auto f = compile(s.fn, o);
      TensorList got;
      manual_seed(1234);
      try {
        got = f(fresh(s.inputs));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "compiled run threw: " << e.what();
        continue;
      }
      // Random ops compare values too: the reseeded graph must draw eager's numbers.
      expect_match(got, want, exact, s.compare_values || random, s.atol, s.rtol, "forward");
      if (f.stats().graphs_compiled > 0 || !f.stats().breaks.empty()) ++captured;
      if (!s.check_grad || !info.differentiable()) continue;
      TensorList gin = grad_inputs(s);
      bool any = false;
      for (const Tensor& t : gin) any = any || (t.defined() && t.requires_grad());
      if (!any) continue;
      TensorList gw, gg;
      try {
        manual_seed(1234);
        gw = grads_of(s.fn, gin);
        manual_seed(1234);
        gg = grads_of([&](const TensorList& in) { return f(in); }, grad_inputs(s));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "gradients threw: " << e.what();
        continue;
      }
      // Gradients go through other formulas under aot_eager (the prims' VJPs, not the composite's).
      expect_match(gg, gw, exact, true, std::max(s.atol, 1e-8), std::max(s.rtol, 1e-5), "gradient");
    }
  }
  EXPECT_GT(captured, 0) << "no sample of '" << info.name << "' was captured into a graph";
}

std::string test_name(const ::testing::TestParamInfo<int>& p) { return op_name(static_cast<OpId>(p.param)); }
INSTANTIATE_TEST_SUITE_P(Ops, CompileTest, ::testing::Range(0, kNumOps), test_name);

}  // namespace
}  // namespace kiln::test
