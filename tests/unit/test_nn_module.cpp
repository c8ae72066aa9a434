// nn::Module behaviour users rely on: registration, dotted names and order, tied parameters,
// buffers, train/eval, to(dtype), zero_grad, apply, state_dict round trips and errors,
// containers and repr.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

// An own parameter, an own buffer, a Linear child and a Sequential of layers.
struct Net : nn::Module {
  Tensor scale, steps;
  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Sequential> block;
  Net() : Module("Net") {
    scale = register_parameter("scale", ones({3}));
    steps = register_buffer("steps", zeros({1}));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    block = register_module("block", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                                         std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::ReLU>(),
                                         std::make_shared<nn::Linear>(5, 2, /*bias=*/false)}));
  }
  Tensor forward(const Tensor& x) override { return block->forward(fc1->forward(x) * scale); }
};

TEST(NnModule, RegistrationErrors) {
  nn::Module m("Custom");
  expect_error([&] { m.register_parameter("a.b", ones({1})); }, {"Custom", "invalid name 'a.b'"});
  expect_error([&] { m.register_parameter("", ones({1})); }, {"invalid name"});
  m.register_buffer("buf", zeros({2}));
  expect_error([&] { m.register_parameter("buf", ones({1})); }, {"'buf' is already a buffer"});
  m.register_parameter("p", ones({1}));
  expect_error([&] { m.register_buffer("p", ones({1})); }, {"'p' is already a parameter"});
  Tensor leaf = ones({2}).requires_grad_();
  expect_error([&] { m.register_parameter("q", leaf * 2.0); }, {"leaf"});
  expect_error([&] { m.register_module("child", std::shared_ptr<nn::Linear>()); }, {"null"});
  expect_error([&] { m.parameter("nope"); }, {"no parameter named 'nope'"});
  expect_error([&] { m.child("nope"); }, {"no submodule named 'nope'"});
  // A registered parameter requires grad; requires_grad=false keeps it frozen.
  EXPECT_TRUE(m.parameter("p").requires_grad());
  EXPECT_FALSE(m.register_parameter("frozen", ones({1}), false).requires_grad());
}

TEST(NnModule, NamedParametersHaveDottedNamesInTorchOrder) {
  Net net;
  EXPECT_EQ(names_of(net.named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias",
                                      "block.2.weight"}));
  EXPECT_EQ(names_of(net.named_parameters(/*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(net.parameters().size(), 6u);
  EXPECT_TRUE(net.parameters()[1].is_same(net.fc1->weight));  // the member handle is the parameter
  EXPECT_EQ(names_of(net.named_buffers()), (std::vector<std::string>{"steps"}));
  std::vector<std::string> children;
  for (auto& [n, c] : net.named_children()) children.push_back(n + ":" + c->type_name());
  EXPECT_EQ(children, (std::vector<std::string>{"fc1:Linear", "block:Sequential"}));
  std::vector<std::string> mods;
  for (auto& [n, m] : net.named_modules()) mods.push_back(n);
  EXPECT_EQ(mods, (std::vector<std::string>{"", "fc1", "block", "block.0", "block.1", "block.2"}));
  EXPECT_EQ(net.state_dict().keys(), (std::vector<std::string>{"scale", "steps", "fc1.weight", "fc1.bias",
                                                               "block.0.weight", "block.0.bias", "block.2.weight"}));
}

TEST(NnModule, TiedParametersAppearOnceButKeepBothStateDictKeys) {
  struct Tied : nn::Module {
    std::shared_ptr<nn::Embedding> wte;
    std::shared_ptr<nn::Linear> head;
    Tied() : Module("Tied") {
      wte = register_module("wte", std::make_shared<nn::Embedding>(10, 4));
      head = register_module("head", std::make_shared<nn::Linear>(4, 10, false));
      head->weight = head->register_parameter("weight", wte->weight);
    }
  } m;
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"wte.weight"}));
  EXPECT_EQ(m.parameters().size(), 1u);
  StateDict sd = m.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"wte.weight", "head.weight"}));
  // Both entries carry the same values, and a gradient through either reaches the one tensor.
  Tensor idx = tensor<int64_t>({1, 2});
  (m.head->forward(m.wte->forward(idx)).sum()).backward();
  EXPECT_TRUE(m.wte->weight.grad().defined());
  EXPECT_TRUE(m.head->weight.grad().is_same(m.wte->weight.grad()));
}

TEST(NnModule, NonPersistentBuffersStayOutOfStateDict) {
  nn::Module m("Bufs");
  m.register_buffer("kept", ones({2}));
  m.register_buffer("cache", zeros({3}), /*persistent=*/false);
  m.register_buffer("absent", Tensor());
  EXPECT_EQ(names_of(m.named_buffers()), (std::vector<std::string>{"kept", "cache"}));
  EXPECT_EQ(m.state_dict().keys(), (std::vector<std::string>{"kept"}));
  EXPECT_TRUE(m.parameters().empty());
  // Loading back needs only the persistent one.
  StateDict sd;
  sd.insert("kept", full({2}, 7.0));
  EXPECT_TRUE(m.load_state_dict(sd).missing_keys.empty());
  EXPECT_EQ(m.buffer("kept").to_vector<double>(), (std::vector<double>{7, 7}));
}

TEST(NnModule, TrainEvalPropagatesToEveryDescendant) {
  Net net;
  auto drop = std::make_shared<nn::Dropout>(0.5);
  net.block->push_back(drop);
  EXPECT_TRUE(drop->is_training());
  net.eval();
  for (auto& [n, m] : net.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  Tensor x = randn({4, 2});
  EXPECT_TRUE(drop->forward(x).is_same(x));  // identity in eval mode
  net.train();
  for (auto& [n, m] : net.named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(NnModule, ToFloat64KeepsHandlesAndConvertsGrads) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4)});
  auto lin = std::dynamic_pointer_cast<nn::Linear>((*model)[0]);
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm1d>((*model)[1]);
  Tensor w = lin->weight;
  model->forward(randn({5, 3})).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  std::vector<double> before = w.to_vector<double>();
  model->to(kFloat64);
  EXPECT_TRUE(w.is_same(lin->weight));
  EXPECT_EQ(lin->weight.dtype(), kFloat64);
  EXPECT_EQ(lin->weight.grad().dtype(), kFloat64);
  EXPECT_EQ(bn->running_mean.dtype(), kFloat64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);  // integer buffers keep their dtype
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_TRUE(lin->weight.is_leaf());
  EXPECT_EQ(lin->weight.to_vector<double>(), before);  // float32 → float64 is exact
  Tensor y = model->forward(randn({5, 3}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  y.sum().backward();  // gradients accumulate into the converted grads
  EXPECT_EQ(model->parameters()[0].grad().dtype(), kFloat64);
}

TEST(NnModule, ZeroGradToNoneOrZeros) {
  nn::Linear lin(3, 2);
  lin.forward(ones({1, 3})).sum().backward();
  ASSERT_TRUE(lin.weight.grad().defined());
  lin.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(lin.weight.grad().to_vector<double>(), std::vector<double>(6, 0.0));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
}

TEST(NnModule, ApplyVisitsChildrenFirst) {
  Net net;
  std::vector<std::string> order;
  net.apply([&](nn::Module& m) {
    order.push_back(m.type_name());
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) nn::init::zeros_(lin->weight);
  });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "Linear", "ReLU", "Linear", "Sequential", "Net"}));
  EXPECT_EQ(net.fc1->weight.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(net.fc1->weight.is_leaf());
}

TEST(NnModule, StateDictRoundTripCopiesValues) {
  manual_seed(1);
  Net a;
  manual_seed(2);
  Net b;
  ASSERT_NE(a.fc1->weight.to_vector<double>(), b.fc1->weight.to_vector<double>());
  Tensor handle = b.fc1->weight;
  nn::LoadResult r = b.load_state_dict(a.state_dict());
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_TRUE(handle.is_same(b.fc1->weight));  // loaded in place
  EXPECT_EQ(b.fc1->weight.to_vector<double>(), a.fc1->weight.to_vector<double>());
  Tensor x = randn({2, 4});
  EXPECT_EQ(a.forward(x).to_vector<double>(), b.forward(x).to_vector<double>());
  // state_dict tensors are detached snapshots of the live ones (same values, no grad).
  EXPECT_FALSE(a.state_dict().at("fc1.weight").requires_grad());
  // A float64 checkpoint loads into a float32 model (converted).
  StateDict sd = a.state_dict();
  sd.insert("scale", full({3}, 0.25, kFloat64));
  b.load_state_dict(sd);
  EXPECT_EQ(b.scale.dtype(), kFloat32);
  EXPECT_EQ(b.scale.to_vector<double>(), (std::vector<double>{0.25, 0.25, 0.25}));
}

TEST(NnModule, LoadStateDictStrictListsEveryProblem) {
  Net net;
  StateDict sd = net.state_dict();
  StateDict bad;
  for (const auto& [k, v] : sd)
    if (k != "fc1.bias" && k != "block.0.weight") bad.insert(k, v);
  bad.insert("block.0.weight", zeros({7, 3}));
  bad.insert("extra.weight", zeros({1}));
  expect_error([&] { net.load_state_dict(bad); },
               {"Net.load_state_dict", "missing keys: fc1.bias", "unexpected keys: extra.weight",
                "size mismatch: block.0.weight: checkpoint [7, 3] vs model [5, 3]"});
  // strict=false still refuses shape mismatches...
  expect_error([&] { net.load_state_dict(bad, false); }, {"size mismatch: block.0.weight"});
  // ...and otherwise reports what did not match.
  bad.insert("block.0.weight", zeros({5, 3}));
  nn::LoadResult r = net.load_state_dict(bad, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc1.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra.weight"}));
  EXPECT_EQ(net.block->parameters()[0].abs().sum().item<double>(), 0.0);  // the matching keys were loaded
}

TEST(NnModule, Containers) {
  auto l1 = std::make_shared<nn::Linear>(2, 3), l2 = std::make_shared<nn::Linear>(3, 1);
  nn::Sequential seq{l1, std::make_shared<nn::Tanh>(), l2};
  Tensor x = randn({4, 2});
  EXPECT_EQ(seq.forward(x).to_vector<double>(), l2->forward(tanh(l1->forward(x))).to_vector<double>());
  EXPECT_EQ(seq.size(), 3u);
  expect_error([&] { seq[3]; }, {"Sequential", "index 3 out of range"});
  // Negative indices count from the end, as torch's layers[-1].
  EXPECT_TRUE(seq[-1] == l2);
  EXPECT_TRUE(seq.at<nn::Linear>(-3) == l1);
  expect_error([&] { seq[-4]; }, {"Sequential", "index -4 out of range for 3 modules"});

  nn::ModuleList list;
  list.push_back(l1);
  list.push_back(std::make_shared<nn::ReLU>());
  EXPECT_TRUE(list.at<nn::Linear>(0) == l1);
  EXPECT_TRUE(list.at<nn::Linear>(-2) == l1);
  expect_error([&] { list[-3]; }, {"ModuleList", "index -3 out of range for 2 modules"});
  expect_error([&] { list.at<nn::Linear>(1); }, {"module 1 is a ReLU"});
  EXPECT_EQ(names_of(list.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  expect_error([&] { list.forward(x); }, {"ModuleList", "no single-tensor forward"});

  nn::ModuleDict dict({{"enc", l1}, {"act", std::make_shared<nn::ReLU>()}});
  dict.insert("dec", l2);
  dict.insert("act", std::make_shared<nn::SiLU>());  // replaces, keeping the position
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"enc", "act", "dec"}));
  EXPECT_EQ(dict["act"]->type_name(), "SiLU");
  EXPECT_TRUE(dict.contains("dec"));
  EXPECT_FALSE(dict.contains("x"));
  expect_error([&] { dict["x"]; }, {"no module with key 'x'"});
  EXPECT_EQ(names_of(dict.named_parameters()),
            (std::vector<std::string>{"enc.weight", "enc.bias", "dec.weight", "dec.bias"}));
}

TEST(NnModule, ReprPrintsTheTreeAsTorch) {
  nn::Sequential seq{std::make_shared<nn::Conv2d>(3, 8, 3, 2, 1, 1, 1, false),
                     std::make_shared<nn::BatchNorm2d>(8),
                     std::make_shared<nn::ReLU>(true),
                     std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(8, 10),
                     std::make_shared<nn::Dropout>(0.25)};
  EXPECT_EQ(seq.repr(),
            "Sequential(\n"
            "  (0): Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)\n"
            "  (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
            "  (2): ReLU(inplace=True)\n"
            "  (3): Flatten(start_dim=1, end_dim=-1)\n"
            "  (4): Linear(in_features=8, out_features=10, bias=True)\n"
            "  (5): Dropout(p=0.25, inplace=False)\n"
            ")");
  nn::TransformerEncoderLayer layer(8, 2, 16);
  EXPECT_EQ(layer.repr(),
            "TransformerEncoderLayer(\n"
            "  (self_attn): MultiheadAttention(\n"
            "    (out_proj): Linear(in_features=8, out_features=8, bias=True)\n"
            "  )\n"
            "  (linear1): Linear(in_features=8, out_features=16, bias=True)\n"
            "  (dropout): Dropout(p=0.1, inplace=False)\n"
            "  (linear2): Linear(in_features=16, out_features=8, bias=True)\n"
            "  (norm1): LayerNorm((8,), eps=1e-05, elementwise_affine=True)\n"
            "  (norm2): LayerNorm((8,), eps=1e-05, elementwise_affine=True)\n"
            "  (dropout1): Dropout(p=0.1, inplace=False)\n"
            "  (dropout2): Dropout(p=0.1, inplace=False)\n"
            ")");
  EXPECT_EQ(nn::MaxPool2d(2).repr(), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 1}).repr(), "AdaptiveAvgPool2d(output_size=(1, 1))");
  EXPECT_EQ(nn::Embedding(10, 3, -1).repr(), "Embedding(10, 3, padding_idx=9)");
  EXPECT_EQ(nn::EmbeddingBag(10, 3, "sum").repr(), "EmbeddingBag(10, 3, mode='sum')");
  EXPECT_EQ(nn::GELU("tanh").repr(), "GELU(approximate='tanh')");
  EXPECT_EQ(nn::RMSNorm({4}).repr(), "RMSNorm((4,), eps=None, elementwise_affine=True)");
  EXPECT_EQ(nn::BatchNorm1d(4, 1e-3, std::nullopt).repr(),
            "BatchNorm1d(4, eps=0.001, momentum=None, affine=True, track_running_stats=True)");
  EXPECT_EQ(nn::CrossEntropyLoss().repr(), "CrossEntropyLoss()");
  // A module with both a configuration line and children puts each on its own line, as torch.
  struct Block : nn::Module {
    Block() : Module("Block") { register_module("fc", std::make_shared<nn::Linear>(2, 2)); }
    std::string extra_repr() const override { return "depth=3"; }
  };
  EXPECT_EQ(Block().repr(),
            "Block(\n"
            "  depth=3\n"
            "  (fc): Linear(in_features=2, out_features=2, bias=True)\n"
            ")");
}

}  // namespace
