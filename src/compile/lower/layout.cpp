#include "compile/lower/layout.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <span>
#include <unordered_map>

#include "compile/logs.h"
#include "compile/ir/passes.h"
#include "compile/lower/pointwise.h"
#include "ops/conv_util.h"
#include "core/tensor_impl.h"

namespace kiln::compiler::lower {

// Note [Channels-last graphs]
// cuDNN's fastest convolution kernels on Hopper read and write NHWC; handed NCHW tensors it
// transposes every operand in and the result out (Note [Channels-last convolutions] in
// backend/cuda/conv_cudnn.cpp). Eager kiln keeps PyTorch's contiguous default, but inside a
// compiled graph the layout of a value nobody outside sees is free, as TorchInductor's layout
// optimization uses it:
// - in a graph whose convolutions are all 2-d, not transposed and not depthwise (kiln's own
//   NCHW kernels; copies around each would cost what the rest gain), each convolution gets a
//   channels-last input, through a copy (`to` of the same dtype, a generated kernel) where its
//   producer does not give one; its output, and convolution_backward's input gradient, are
//   channels-last;
// - a generated pointwise value of the same shape as a channels-last input is channels-last,
//   so batch norm, ReLU and residual adds read and write NHWC and the next convolution needs
//   no copy; reductions read any layout through their index math;
// - an extern op reading a channels-last value (max pooling, its backward) has its 4-d outputs
//   converted to channels-last after it runs, so the generated kernels around it read one layout
//   (a kernel mixing layouts reads one operand across the grain);
// - a view of a channels-last value gets its meta again from the new strides; where the view
//   cannot be taken (a `view` across the permuted dims) the base stays contiguous;
// - graph inputs keep their layouts and graph outputs (what the caller receives: results,
//   gradients) stay contiguous, so nothing outside the graph sees a difference. The values the
//   partition saves for backward are inside the joint graph: they cross in NHWC.
// Values get explicit strides in their metas; the generated kernels index through them, and
// the inductor gives every output the layout its meta asks (extern outputs are converted,
// CUDA convolutions write it directly).

bool channels_last_enabled(Device d) {
  const char* e = std::getenv("KILN_CHANNELS_LAST");  // read per compile: tests switch it
  if (!e || !*e || std::strcmp(e, "0") == 0) return false;
  return std::strcmp(e, "all") == 0 || d.is_cuda();
}

namespace {

std::atomic<int64_t> g_nhwc{0};

bool four_d(const TensorMeta& m) { return m.sizes.size() == 4 && compute_numel(m.sizes) > 0; }

// A convolution or its backward that runs NHWC when its output is channels-last.
bool nhwc_conv(const Graph& g, const Node& n) {
  if (n.op != OpId::convolution && n.op != OpId::convolution_backward) return false;
  const size_t xi = n.op == OpId::convolution ? 0 : 1;
  if (n.inputs.size() < xi + 2 || n.inputs[xi] < 0 || n.inputs[xi + 1] < 0) return false;
  const TensorMeta& x = g.values[static_cast<size_t>(n.inputs[xi])].meta;
  const TensorMeta& w = g.values[static_cast<size_t>(n.inputs[xi + 1])].meta;
  if (!four_d(x) || compute_numel(w.sizes) == 0 || !is_floating_point(x.dtype) || !channels_last_enabled(x.device))
    return false;
  return !n.attrs.b(3) && !depthwise_groups(n.attrs.i(5), x.sizes[1]);
}

// The values marked in cl laid out channels-last.
void lay_out(Graph& g, const std::vector<char>& cl) {
  for (size_t v = 0; v < cl.size(); ++v)
    if (cl[v]) {
      g.values[v].meta.strides = channels_last_strides(g.values[v].meta.sizes);
      g.values[v].meta.storage_offset = 0;
    }
}

Tensor meta_tensor(const TensorMeta& m) {
  const Shape st = m.strides.size() == m.sizes.size() ? m.strides : contiguous_strides(m.sizes);
  Tensor t = make_meta_tensor(m.sizes, st, m.dtype, m.device);
  t.unsafe_impl()->storage_offset = m.storage_offset;
  return t;
}

// View node n's output metas from its inputs' current metas; false where the view fails.
bool rederive_view(Graph& g, const Node& n) {
  const OpInfo& info = op_info(n.op);
  if (!info.meta) return false;
  std::vector<Tensor> ins;
  for (int v : n.inputs) ins.push_back(v < 0 ? Tensor() : meta_tensor(g.values[static_cast<size_t>(v)].meta));
  std::vector<TensorMeta> metas;
  try {
    metas = info.meta(OpCall{n.op, std::span<const Tensor>(ins), n.attrs});
  } catch (const Error&) {
    return false;
  }
  if (metas.size() != n.outputs.size()) return false;
  for (size_t k = 0; k < metas.size(); ++k) {
    TensorMeta& m = g.values[static_cast<size_t>(n.outputs[k])].meta;
    if (metas[k].sizes != m.sizes) return false;
    m.strides = metas[k].strides;
    m.storage_offset = metas[k].storage_offset;
  }
  return true;
}

}  // namespace

int64_t nhwc_convolutions() { return g_nhwc.load(std::memory_order_relaxed); }

int channels_last_convolutions(Graph& g, size_t* boundary) {
  if (g.is_symbolic()) return 0;
  int convs = 0;
  for (const Node& n : g.nodes) {
    if (n.op != OpId::convolution && n.op != OpId::convolution_backward) continue;
    // A graph with convolutions that stay NCHW (depthwise: kiln's own kernels; transposed) is
    // left alone: copies around each of them would cost what the others gain.
    if (!nhwc_conv(g, n)) return 0;
    ++convs;
  }
  if (convs == 0) return 0;

  // Which values are channels-last: convolution outputs, then generated pointwise values of a
  // channels-last operand's shape.
  std::vector<char> cl(g.values.size(), 0);
  for (const Node& n : g.nodes) {
    if (nhwc_conv(g, n)) {
      const int o = n.outputs[0];
      if (n.op == OpId::convolution || (n.attrs.ints(6)[0] && four_d(g.values[static_cast<size_t>(o)].meta)))
        cl[static_cast<size_t>(o)] = 1;
    } else if (n.outputs.size() == 1 && !op_info(n.op).has(VIEW) && is_loop_pointwise(g, n)) {
      const TensorMeta& om = g.values[static_cast<size_t>(n.outputs[0])].meta;
      if (!four_d(om)) continue;
      for (int v : n.inputs)
        if (v >= 0 && cl[static_cast<size_t>(v)] && g.values[static_cast<size_t>(v)].meta.sizes == om.sizes)
          cl[static_cast<size_t>(n.outputs[0])] = 1;
    } else if (!op_info(n.op).has(VIEW) && !op_info(n.op).has(REDUCTION) && !op_info(n.op).has(MUTATES)) {
      // Another extern reading a channels-last value (max pooling and its backward): its 4-d
      // outputs are converted after it, so that the generated kernels around it read one layout.
      bool reads_cl = false;
      for (int v : n.inputs) reads_cl = reads_cl || (v >= 0 && cl[static_cast<size_t>(v)]);
      if (reads_cl)
        for (int o : n.outputs)
          if (four_d(g.values[static_cast<size_t>(o)].meta)) cl[static_cast<size_t>(o)] = 1;
    }
  }
  // What the caller receives stays contiguous, and so does a value some view cannot be taken
  // of in NHWC: trial metas, until nothing changes.
  const std::vector<int> base = view_roots(g);
  for (bool changed = true; changed;) {
    changed = false;
    for (int v : g.outputs) {
      const size_t b = static_cast<size_t>(base[static_cast<size_t>(v)]);
      if (cl[b]) cl[b] = 0, changed = true;
    }
    Graph trial = g;
    lay_out(trial, cl);
    for (const Node& n : trial.nodes) {
      if (!op_info(n.op).has(VIEW) || n.inputs.empty() || n.inputs[0] < 0) continue;
      const size_t b = static_cast<size_t>(base[static_cast<size_t>(n.inputs[0])]);
      if (cl[b] && !rederive_view(trial, n)) cl[b] = 0, changed = true;
    }
  }

  // The graph again, with a channels-last copy before each convolution whose input is not.
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size() + static_cast<size_t>(2 * convs));
  std::unordered_map<int, int> copy_of;
  auto channels_last = [&](int v) {
    if (cl[static_cast<size_t>(v)]) return v;
    if (auto it = copy_of.find(v); it != copy_of.end()) return it->second;
    Value c = g.values[static_cast<size_t>(v)];
    c.meta.strides = channels_last_strides(c.meta.sizes);
    c.meta.storage_offset = 0;
    c.wrapped_number = false;
    const int nv = static_cast<int>(g.values.size());
    g.values.push_back(c);
    cl.push_back(1);
    Node to{OpId::to, Attrs{c.meta.dtype}, {v}, {nv}};
    to.no_grad = true;
    nodes.push_back(std::move(to));
    copy_of.emplace(v, nv);
    return nv;
  };
  size_t new_boundary = boundary ? *boundary : 0;
  int nhwc = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (boundary && i == *boundary) new_boundary = nodes.size();  // its copies are backward work
    Node n = g.nodes[i];
    if (nhwc_conv(g, n) && cl[static_cast<size_t>(n.outputs[0])]) {
      if (n.op == OpId::convolution) {
        n.inputs[0] = channels_last(n.inputs[0]);
      } else {
        n.inputs[0] = channels_last(n.inputs[0]);
        n.inputs[1] = channels_last(n.inputs[1]);
      }
      ++nhwc;
    } else if (nhwc_conv(g, n) && n.op == OpId::convolution_backward && !n.attrs.ints(6)[0]) {
      // No input gradient asked for (the first layer): NHWC where x already is.
      const size_t xv = static_cast<size_t>(n.inputs[1]);
      if (cl[xv] || copy_of.count(n.inputs[1])) {
        n.inputs[1] = channels_last(n.inputs[1]);
        n.inputs[0] = channels_last(n.inputs[0]);
        ++nhwc;
      }
    }
    nodes.push_back(std::move(n));
  }
  if (boundary && *boundary >= g.nodes.size()) new_boundary = nodes.size();
  g.nodes = std::move(nodes);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].outputs.size(); ++k) {
      Value& v = g.values[static_cast<size_t>(g.nodes[i].outputs[k])];
      v.node = static_cast<int>(i);
      v.index = static_cast<int>(k);
    }
  lay_out(g, cl);
  const std::vector<int> bases = view_roots(g);
  for (const Node& n : g.nodes)
    if (op_info(n.op).has(VIEW) && !n.inputs.empty() && n.inputs[0] >= 0 &&
        cl[static_cast<size_t>(bases[static_cast<size_t>(n.inputs[0])])])
      KILN_CHECK(rederive_view(g, n), "internal: a view of a channels-last value failed after its trial");
  if (boundary) *boundary = new_boundary;
  g.verify();
  g_nhwc.fetch_add(nhwc, std::memory_order_relaxed);
  if (log_enabled(Log::Fusion)) {
    size_t kept = 0;
    for (char c : cl) kept += c != 0;
    log(Log::Fusion, "channels-last: " + std::to_string(nhwc) + " of " + std::to_string(convs) +
                         " convolutions NHWC, " + std::to_string(copy_of.size()) + " copies into NHWC, " +
                         std::to_string(kept) + " values channels-last");
  }
  return nhwc;
}

}  // namespace kiln::compiler::lower
