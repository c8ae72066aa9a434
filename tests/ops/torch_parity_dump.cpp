// Note [Torch parity fixture]
// Every op's test samples also run through PyTorch. Three steps:
//  1. KILN_DUMP_OP_CALLS=FILE kiln_op_tests --gtest_filter=TorchParityDump.*  writes, for each op,
//     the op calls its first few small samples (and error samples) make at the dispatcher:
//     the inputs as tensors, the attrs encoded as text (encode_attrs below).
//  2. tests/fixtures/make_torch_ops_fixture.py runs each call through PyTorch 1.13 and writes
//     tests/fixtures/torch_ops.safetensors: the calls, torch's outputs and gradients, or that it raised.
//  3. Ops/TorchParity (torch_parity.cpp) replays each call in kiln and compares.
// The fixture is committed, so CI needs no PyTorch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"
#include "tests/ops/torch_parity.h"

namespace kiln::test {
namespace {

// Sees every op call above autograd; keeps the first call of `target` and runs everything on.
struct FirstCall : DispatchMode {
  explicit FirstCall(OpId target) : target(target) { push_dispatch_mode(this); }
  ~FirstCall() override { pop_dispatch_mode(); }
  std::vector<Tensor> call(OpId op, std::vector<Tensor>& inputs, Attrs& attrs) override {
    if (op == target && !seen) {
      seen = true;
      for (const Tensor& t : inputs) this->inputs.push_back(t.defined() ? t.detach().clone() : Tensor());
      for (const Tensor& t : inputs) wrapped.push_back(t.defined() && t.unsafe_impl()->is_wrapped_number);
      this->attrs = attrs;
      input_storage_plain = !inputs.empty() && inputs[0].defined() && !inputs[0].is_view() &&
                            inputs[0].is_contiguous() && inputs[0].storage_offset() == 0;
    }
    return call_op(op, inputs, attrs);
  }
  OpId target;
  bool seen = false;
  std::vector<Tensor> inputs;
  std::vector<bool> wrapped;
  Attrs attrs;
  bool input_storage_plain = false;  // input 0 is its storage, as the fixture's copy will be
};

int64_t numel_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.defined() ? t.numel() : 0;
  return n;
}

TEST(TorchParityDump, Write) {
  const char* path = std::getenv("KILN_DUMP_OP_CALLS");
  if (!path) GTEST_SKIP() << "set KILN_DUMP_OP_CALLS=FILE to write the op calls for the PyTorch fixture";
  StateDict tensors;
  std::map<std::string, std::string> meta;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    const std::string name = op_info(op).name;
    int k = 0;
    std::map<std::string, int> per_dtype;  // a few cases of each input dtype, not 20 of one
    auto keep = [&](FirstCall& c, const std::string& sample, bool error) {
      if (!c.seen || numel_of(c.inputs) > kMaxParityNumel) return;
      // as_strided reads the storage under its input, which the fixture (contiguous copies) does not keep.
      if (op == OpId::as_strided && !(c.input_storage_plain)) return;
      const std::string dt =
          c.inputs.empty() || !c.inputs[0].defined() ? "-" : std::string(dtype_name(c.inputs[0].dtype()));
      if (per_dtype[dt + (error ? "e" : "")]++ >= 2 || k >= kMaxParityCases) return;
      const std::string key = name + "." + std::to_string(k++);
      std::string undef, wrapped;
      for (size_t j = 0; j < c.inputs.size(); ++j) {
        if (c.inputs[j].defined())
          tensors.insert(key + ".in" + std::to_string(j), c.inputs[j].contiguous());
        else
          undef += (undef.empty() ? "" : ",") + std::to_string(j);
        if (c.wrapped[j]) wrapped += (wrapped.empty() ? "" : ",") + std::to_string(j);
      }
      meta[key + ".sample"] = sample;
      meta[key + ".ninputs"] = std::to_string(c.inputs.size());
      meta[key + ".undefined"] = undef;
      meta[key + ".wrapped"] = wrapped;
      meta[key + ".attrs"] = encode_attrs(c.attrs);
      meta[key + ".error"] = error ? "1" : "0";
    };
    for (const OpSample& s : op_samples(op)) {
      if (op_info(op).has(RANDOM)) break;  // torch draws other numbers
      FirstCall c(op);
      try {
        (void)s.fn(s.inputs);
      } catch (const std::exception&) {
      }
      keep(c, s.name, false);
    }
    for (const ErrorSample& e : op_error_samples(op)) {
      FirstCall c(op);
      try {
        e.call();
      } catch (const std::exception&) {
      }
      keep(c, e.name, true);
    }
    meta[name + ".cases"] = std::to_string(k);
  }
  safetensors::save_file(tensors, path, meta);
  std::printf("wrote %zu tensors for %d ops to %s\n", tensors.size(), kNumOps, path);
}

}  // namespace
}  // namespace kiln::test
