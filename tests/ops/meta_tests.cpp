// The generated meta tests: every op's meta function against eager, on the op
// samples (Note [Op samples]). Per sample:
//  1. Direct: while the sample runs eagerly, each call of the op is also given
//     to its meta function; sizes, dtypes and devices must match the outputs,
//     and strides and offsets too wherever the meta reports them (views, and
//     Note [Meta strides of reshape-like ops]).
//  2. Meta device: the sample runs on storage-less copies of its inputs (same
//     sizes, strides, offset, dtype) on the meta device, factory ops made on
//     it too; the outputs must be meta tensors with eager's sizes and dtypes,
//     and for VIEW ops eager's strides and offsets. Non-VIEW outputs on the
//     meta device are always contiguous (backend_call), so their strides say
//     nothing about the op.
// For VIEW ops eager itself makes the alias from the meta (backend_call), so
// check 1 agrees by construction there; the op tests' reference values are
// what catch a wrong stride or offset in a view's meta.
// An op without a meta function, without samples, or whose samples never
// call it fails; DATA_DEPENDENT ops (masked_select, nonzero) have no meta
// function by design, and the only other exceptions are kMetaDeviceSkips.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const Device kMeta(DeviceType::Meta);

// The samples that cannot run on the meta device, and why (check 2 only;
// check 1 still runs them eagerly against the meta function). Keep it short:
// an entry needs a reason no sample could avoid, and one that matches no
// sample fails, so the list cannot go stale.
struct MetaDeviceSkip {
  OpId op;
  const char* sample;  // a substring of the sample names it covers
  const char* reason;
};
const MetaDeviceSkip kMetaDeviceSkips[] = {
    {OpId::index, "mask", "a bool mask index is nonzero(mask), whose shape depends on the mask's values"},
    {OpId::index_put, "bool mask", "a bool mask index is nonzero(mask), whose shape depends on the mask's values"},
    {OpId::one_hot, "inferred classes", "num_classes = -1 reads the largest index value"},
};
const MetaDeviceSkip* meta_device_skip(OpId op, const std::string& sample) {
  for (const MetaDeviceSkip& s : kMetaDeviceSkips)
    if (s.op == op && sample.find(s.sample) != std::string::npos) return &s;
  return nullptr;
}

// The index of the Device attr in a factory op's signature (-1: none).
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

// A storage-less copy of t on the meta device.
Tensor to_meta(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor m = make_meta_tensor(t.sizes(), t.strides(), t.dtype(), kMeta);
  m.unsafe_impl()->storage_offset = t.storage_offset();
  m.unsafe_impl()->is_wrapped_number = t.unsafe_impl()->is_wrapped_number;
  return m;
}

std::string meta_str(const TensorMeta& m) {
  std::ostringstream o;
  o << shape_str(m.sizes) << " " << m.dtype << " " << m.device;
  if (!m.strides.empty()) o << " strides " << shape_str(m.strides) << " offset " << m.storage_offset;
  return o.str();
}

// Check 1: gives every eager call of `op` to its meta function as well. Only
// calls made by the sample itself reach a mode (not those inside other ops),
// and under a mode in-place ops on tensors that require grad keep no history
// (call_op_inplace leaves them to the mode), so a sample must not rely on it.
struct MetaCheckMode : DispatchMode {
  OpId op;
  int calls = 0;
  explicit MetaCheckMode(OpId o) : op(o) {}
  std::vector<Tensor> call(OpId o, std::vector<Tensor>& inputs, Attrs& attrs) override {
    if (o != op) return call_op(o, inputs, attrs);
    const OpInfo& info = op_info(o);
    std::vector<TensorMeta> metas = info.meta(OpCall{o, inputs, attrs});
    std::vector<Tensor> outs = call_op(o, inputs, attrs);
    ++calls;
    EXPECT_EQ(metas.size(), outs.size()) << "meta function: number of outputs";
    for (size_t k = 0; k < std::min(metas.size(), outs.size()); ++k) {
      const TensorMeta& m = metas[k];
      const Tensor& t = outs[k];
      if (!t.defined()) continue;
      SCOPED_TRACE("output " + std::to_string(k) + ": meta " + meta_str(m));
      EXPECT_EQ(m.sizes, t.sizes().vec()) << "sizes";
      EXPECT_EQ(m.dtype, t.dtype()) << "dtype";
      EXPECT_EQ(m.device, t.device()) << "device";
      if (info.has(VIEW) || !m.strides.empty()) {
        EXPECT_EQ(m.strides, t.strides().vec()) << "strides";
        EXPECT_EQ(m.storage_offset, t.storage_offset()) << "storage offset";
      }
    }
    return outs;
  }
};

// Check 2's factory ops: their Device attr becomes the meta device.
struct FactoryOnMetaMode : DispatchMode {
  std::vector<Tensor> call(OpId o, std::vector<Tensor>& inputs, Attrs& attrs) override {
    const OpInfo& info = op_info(o);
    int k = info.has(FACTORY) ? device_attr(info) : -1;
    if (k >= 0 && static_cast<size_t>(k) < attrs.size()) {
      std::vector<AttrValue> v = attrs.values();
      v[k] = kMeta;
      attrs = Attrs(std::move(v));
    }
    return call_op(o, inputs, attrs);
  }
};

struct ModeGuard {
  explicit ModeGuard(DispatchMode* m) { push_dispatch_mode(m); }
  ~ModeGuard() { pop_dispatch_mode(); }
};

void expect_same_meta(const TensorList& got, const TensorList& want, bool view) {
  ASSERT_EQ(got.size(), want.size()) << "meta device: number of outputs";
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE("meta device output " + std::to_string(k));
    ASSERT_EQ(got[k].defined(), want[k].defined()) << "defined";
    if (!got[k].defined()) continue;
    EXPECT_EQ(got[k].device(), kMeta) << "device";
    EXPECT_FALSE(got[k].has_storage()) << "storage";
    EXPECT_EQ(got[k].sizes().vec(), want[k].sizes().vec()) << "sizes";
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << "dtype";
    if (view) {
      EXPECT_EQ(got[k].strides().vec(), want[k].strides().vec()) << "strides";
      EXPECT_EQ(got[k].storage_offset(), want[k].storage_offset()) << "storage offset";
    }
  }
}

class MetaTest : public ::testing::TestWithParam<int> {};

TEST_P(MetaTest, Samples) {
  OpId op = static_cast<OpId>(GetParam());
  const OpInfo& info = op_info(op);
  if (info.has(DATA_DEPENDENT)) {
    EXPECT_EQ(info.meta, nullptr) << "a DATA_DEPENDENT op's output shape comes from its values, not a meta function";
    GTEST_SKIP() << info.name << " is DATA_DEPENDENT: its output shape depends on the input's values";
  }
  ASSERT_NE(info.meta, nullptr) << "op '" << info.name << "' has no meta function";
  std::vector<OpSample> samples = op_samples(op);
  ASSERT_FALSE(samples.empty()) << "op '" << info.name << "' has no test samples";
  int calls = 0;
  std::vector<const MetaDeviceSkip*> skipped;
  for (const OpSample& s : samples) {
    SCOPED_TRACE(std::string(info.name) + ": " + s.name);
    TensorList eager;
    try {
      MetaCheckMode mode(op);
      ModeGuard guard(&mode);
      eager = s.fn(s.inputs);
      calls += mode.calls;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "eager run with the meta check threw: " << e.what();
      continue;
    }
    if (const MetaDeviceSkip* skip = meta_device_skip(op, s.name)) {
      skipped.push_back(skip);
      continue;
    }
    TensorList in;
    for (const Tensor& t : s.inputs) in.push_back(to_meta(t));
    try {
      FactoryOnMetaMode mode;
      ModeGuard guard(&mode);
      expect_same_meta(s.fn(in), eager, info.has(VIEW));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "meta device run threw: " << e.what();
    }
  }
  EXPECT_GT(calls, 0) << "no sample calls " << info.name << ", so its meta function is never checked";
  for (const MetaDeviceSkip& s : kMetaDeviceSkips) {
    if (s.op != op) continue;
    EXPECT_NE(std::find(skipped.begin(), skipped.end(), &s), skipped.end())
        << "kMetaDeviceSkips entry '" << s.sample << "' matches no sample of " << info.name;
  }
}

std::string meta_test_name(const ::testing::TestParamInfo<int>& p) { return op_name(static_cast<OpId>(p.param)); }
INSTANTIATE_TEST_SUITE_P(Ops, MetaTest, ::testing::Range(0, kNumOps), meta_test_name);

}  // namespace
}  // namespace kiln::test
