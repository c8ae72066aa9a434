#include "models/zoo.h"

#include <algorithm>

#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "models/dlrm.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "models/mobilenet_v2.h"
#include "models/resnet.h"

namespace kiln::models {

const std::vector<std::string>& names() {
  static const std::vector<std::string> all{"mlp", "gpt_nano", "gpt2", "resnet18", "mobilenet_v2", "dlrm"};
  return all;
}

namespace {

[[noreturn]] void unknown(const std::string& where, const std::string& name) {
  std::string list;
  for (const auto& n : names()) list += (list.empty() ? "" : ", ") + n;
  KILN_FAIL(where, ": unknown model '", name, "' (expected one of: ", list, ")");
}

// Single-input models call forward(x) through the Module interface.
Tensor forward_one(nn::Module& m, const std::vector<Tensor>& inputs) {
  KILN_CHECK(inputs.size() == 1, m.type_name(), ": expected 1 input, got ", inputs.size());
  return m.forward(inputs[0]);
}

}  // namespace

std::shared_ptr<nn::Module> create(const std::string& name) {
  if (name == "mlp") return std::make_shared<MLP>();
  if (name == "gpt_nano") return std::make_shared<GPT>(gpt_nano_config());
  if (name == "gpt2") return std::make_shared<GPT>(gpt2_config());
  if (name == "resnet18") return resnet18();
  if (name == "mobilenet_v2") return mobilenet_v2();
  if (name == "dlrm") return std::make_shared<DLRM>();
  unknown("models::create", name);
}

Workload make_workload(const std::string& name, Device device, bool cpu_sizes, uint64_t seed) {
  if (std::find(names().begin(), names().end(), name) == names().end()) unknown("models::make_workload", name);
  manual_seed(seed);
  Workload w;
  w.name = name;
  w.module = create(name);
  w.module->to(device);
  w.module->train();
  // The batch is drawn on the CPU from the generator that made the weights, then moved: every
  // device gets the same model and the same batch, so their losses and gradients compare.
  const TensorOptions f32 = TensorOptions(kFloat32);
  const TensorOptions i64 = TensorOptions(kInt64);
  auto on = [device](const Tensor& t) { return t.to(device); };
  std::shared_ptr<nn::Module> m = w.module;
  w.forward = [m](const std::vector<Tensor>& in) { return forward_one(*m, in); };

  if (name == "mlp") {
    const int64_t B = cpu_sizes ? 64 : 512;
    w.inputs = {on(randn({B, 784}, f32))};
    Tensor y = on(randint(0, 10, {B}, i64));
    w.loss = [y](const Tensor& out) { return cross_entropy(out, y); };
    w.batch_size = B;
  } else if (name == "gpt_nano" || name == "gpt2") {
    const bool nano = name == "gpt_nano";
    const int64_t B = cpu_sizes ? (nano ? 4 : 1) : (nano ? 32 : 8);
    const int64_t T = cpu_sizes ? 128 : (nano ? 256 : 1024);
    const int64_t V = std::static_pointer_cast<GPT>(m)->config.vocab_size;
    w.inputs = {on(randint(0, V, {B, T}, i64))};
    Tensor tgt = on(randint(0, V, {B, T}, i64));
    w.loss = [tgt, V](const Tensor& out) { return cross_entropy(out.view({-1, V}), tgt.view({-1})); };
    w.batch_size = B;
  } else if (name == "resnet18" || name == "mobilenet_v2") {
    const int64_t B = cpu_sizes ? 8 : 64, R = cpu_sizes ? 64 : 224;
    w.inputs = {on(randn({B, 3, R, R}, f32))};
    Tensor y = on(randint(0, 1000, {B}, i64));
    w.loss = [y](const Tensor& out) { return cross_entropy(out, y); };
    w.batch_size = B;
  } else {  // dlrm
    auto dlrm = std::static_pointer_cast<DLRM>(m);
    const int64_t B = cpu_sizes ? 256 : 2048;
    w.inputs = {on(randn({B, dlrm->dense_features}, f32)), on(randint(0, dlrm->rows, {B, dlrm->n_tables, 4}, i64))};
    Tensor y = on(rand({B, 1}, f32));
    w.forward = [dlrm](const std::vector<Tensor>& in) {
      KILN_CHECK(in.size() == 2, "DLRM: expected 2 inputs (dense, sparse), got ", in.size());
      return dlrm->forward(in[0], in[1]);
    };
    w.loss = [y](const Tensor& out) { return binary_cross_entropy_with_logits(out, y); };
    w.batch_size = B;
  }
  return w;
}

int64_t num_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace kiln::models
