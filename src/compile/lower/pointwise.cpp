#include "compile/lower/pointwise.h"

#include <string_view>
#include <unordered_map>

#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "ops/meta_util.h"

namespace kiln::compiler::lower {

namespace {

// The dtypes the functor is defined for (the kernel's TypeSet).
enum class Types { All, Floating, IntOrBool, Integer, NotBool };

struct Entry {
  PointwiseRule rule;  // brace elision: {functor, compute, types}
  Types types;
};

const std::unordered_map<std::string_view, Entry>& table() {
  static const std::unordered_map<std::string_view, Entry> t = {
      {"neg", {"Neg", Compute::Input0, Types::NotBool}},
      {"abs", {"Abs", Compute::Input0, Types::All}},
      {"sign", {"Sign", Compute::Input0, Types::All}},
      {"floor", {"Floor", Compute::Input0, Types::All}},
      {"ceil", {"Ceil", Compute::Input0, Types::All}},
      {"trunc", {"Trunc", Compute::Input0, Types::All}},
      {"isnan", {"IsNan", Compute::Input0, Types::All}},
      {"isinf", {"IsInf", Compute::Input0, Types::All}},
      {"isfinite", {"IsFinite", Compute::Input0, Types::All}},
      {"logical_not", {"LogicalNot", Compute::Input0, Types::All}},
      {"bitwise_not", {"BitwiseNot", Compute::Input0, Types::IntOrBool}},
      {"relu", {"Relu", Compute::Input0, Types::NotBool}},
      {"exp", {"Exp", Compute::Output, Types::Floating}},
      {"exp2", {"Exp2", Compute::Output, Types::Floating}},
      {"log", {"Log", Compute::Output, Types::Floating}},
      {"log2", {"Log2", Compute::Output, Types::Floating}},
      {"log10", {"Log10", Compute::Output, Types::Floating}},
      {"log1p", {"Log1p", Compute::Output, Types::Floating}},
      {"expm1", {"Expm1", Compute::Output, Types::Floating}},
      {"sqrt", {"Sqrt", Compute::Output, Types::Floating}},
      {"rsqrt", {"Rsqrt", Compute::Output, Types::Floating}},
      {"reciprocal", {"Reciprocal", Compute::Output, Types::Floating}},
      {"sin", {"Sin", Compute::Output, Types::Floating}},
      {"cos", {"Cos", Compute::Output, Types::Floating}},
      {"tan", {"Tan", Compute::Output, Types::Floating}},
      {"tanh", {"Tanh", Compute::Output, Types::Floating}},
      {"erf", {"Erf", Compute::Output, Types::Floating}},
      {"erfinv", {"Erfinv", Compute::Output, Types::Floating}},
      {"erfc", {"Erfc", Compute::Output, Types::Floating}},
      {"lgamma", {"Lgamma", Compute::Output, Types::Floating}},
      {"digamma", {"Digamma", Compute::Output, Types::Floating}},
      {"asin", {"Asin", Compute::Output, Types::Floating}},
      {"acos", {"Acos", Compute::Output, Types::Floating}},
      {"atan", {"Atan", Compute::Output, Types::Floating}},
      {"sinh", {"Sinh", Compute::Output, Types::Floating}},
      {"cosh", {"Cosh", Compute::Output, Types::Floating}},
      {"asinh", {"Asinh", Compute::Output, Types::Floating}},
      {"acosh", {"Acosh", Compute::Output, Types::Floating}},
      {"atanh", {"Atanh", Compute::Output, Types::Floating}},
      {"sigmoid", {"Sigmoid", Compute::Output, Types::Floating}},
      {"silu", {"Silu", Compute::Output, Types::Floating}},
      {"mul", {"Mul", Compute::Promoted, Types::All}},
      {"pow", {"Pow", Compute::Promoted, Types::All}},
      {"maximum", {"Maximum", Compute::Promoted, Types::All}},
      {"minimum", {"Minimum", Compute::Promoted, Types::All}},
      {"fmax", {"Fmax", Compute::Promoted, Types::All}},
      {"fmin", {"Fmin", Compute::Promoted, Types::All}},
      {"eq", {"Eq", Compute::Promoted, Types::All}},
      {"ne", {"Ne", Compute::Promoted, Types::All}},
      {"lt", {"Lt", Compute::Promoted, Types::All}},
      {"le", {"Le", Compute::Promoted, Types::All}},
      {"gt", {"Gt", Compute::Promoted, Types::All}},
      {"ge", {"Ge", Compute::Promoted, Types::All}},
      {"logical_and", {"LogicalAnd", Compute::Promoted, Types::All}},
      {"logical_or", {"LogicalOr", Compute::Promoted, Types::All}},
      {"logical_xor", {"LogicalXor", Compute::Promoted, Types::All}},
      {"bitwise_and", {"BitwiseAnd", Compute::Promoted, Types::IntOrBool}},
      {"bitwise_or", {"BitwiseOr", Compute::Promoted, Types::IntOrBool}},
      {"bitwise_xor", {"BitwiseXor", Compute::Promoted, Types::IntOrBool}},
      {"atan2", {"Atan2", Compute::Output, Types::Floating}},
      {"hypot", {"Hypot", Compute::Output, Types::Floating}},
      {"xlogy", {"Xlogy", Compute::Output, Types::Floating}},
      {"copysign", {"CopySign", Compute::Output, Types::Floating}},
      {"nextafter", {"NextAfter", Compute::Output, Types::Floating}},
      {"lerp", {"Lerp", Compute::Output, Types::Floating}},
      // Ops with attrs or conversions, emitted by hand below (functor unused).
      {"add", {"", Compute::Promoted, Types::All}},
      {"div", {"", Compute::Output, Types::Floating}},
      {"fmod", {"Fmod", Compute::Promoted, Types::Floating}},
      {"remainder", {"Remainder", Compute::Promoted, Types::Floating}},
      {"where", {"", Compute::Output, Types::All}},
      {"to", {"", Compute::Output, Types::All}},
      {"clamp", {"", Compute::Output, Types::NotBool}},
      {"round", {"", Compute::Input0, Types::All}},
      {"nan_to_num", {"", Compute::Input0, Types::All}},
      {"polygamma", {"Polygamma", Compute::Output, Types::Floating}},
  };
  return t;
}

bool in_types(Types s, DType t) {
  switch (s) {
    case Types::All: return true;
    case Types::Floating: return is_floating_point(t);
    case Types::IntOrBool: return !is_floating_point(t);
    case Types::Integer: return !is_floating_point(t) && t != DType::Bool;
    case Types::NotBool: return t != DType::Bool;
  }
  return false;
}

// torch.result_type over the node's inputs, from their metadata (wrapped numbers promote as numbers).
DType promoted(const Graph& g, const Node& n) {
  std::vector<Tensor> ts;
  for (int v : n.inputs) {
    if (v < 0) continue;
    const Value& val = g.values[static_cast<size_t>(v)];
    Tensor t = make_meta_tensor(val.meta.sizes, {}, val.meta.dtype, Device(DeviceType::Meta), nullptr);
    t.unsafe_impl()->is_wrapped_number = val.wrapped_number;
    ts.push_back(t);
  }
  return result_type(ts);
}

DType out_dtype(const Graph& g, const Node& n) { return g.values[static_cast<size_t>(n.outputs[0])].meta.dtype; }

DType compute_dtype(const Graph& g, const Node& n, const Entry& e) {
  switch (e.rule.compute) {
    case Compute::Input0: return g.values[static_cast<size_t>(n.inputs[0])].meta.dtype;
    case Compute::Output: return out_dtype(g, n);
    case Compute::Promoted: return promoted(g, n);
  }
  return out_dtype(g, n);
}

}  // namespace

const PointwiseRule* pointwise_rule(std::string_view name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second.rule;
}

bool is_loop_pointwise(const Graph& g, const Node& n) {
  const OpInfo& info = op_info(n.op);
  if (!info.has(POINTWISE) || info.has(RANDOM) || n.outputs.size() != 1) return false;
  auto it = table().find(info.name);
  if (it == table().end()) return false;
  // Its inputs live where it computes (the CPU, or a GPU), or are CPU 0-d tensors that a CUDA
  // kernel takes by value (Note [Kernel devices]).
  const Device out = g.values[static_cast<size_t>(n.outputs[0])].meta.device;
  if (!out.is_cpu() && !out.is_cuda()) return false;
  for (int v : n.inputs) {
    if (v < 0) return false;
    const TensorMeta& m = g.values[static_cast<size_t>(v)].meta;
    if (m.device != out && !(out.is_cuda() && m.device.is_cpu() && m.sizes.empty())) return false;
  }
  const Entry& e = it->second;
  const DType c = compute_dtype(g, n, e);
  if (!in_types(e.types, c)) return false;  // eager raises: let it
  std::string_view name = info.name;
  if (name == "div" && n.attrs.opt_str(0)) return is_floating_point(promoted(g, n));  // integer division checks zero
  if (name == "round" && n.attrs.i(0) != 0) return is_floating_point(c);
  return true;
}

Expr pointwise_expr(const Graph& g, const Node& n) {
  const Entry& e = table().at(op_info(n.op).name);
  Expr x{};
  x.kind = ExprKind::Pointwise;
  x.dtype = out_dtype(g, n);
  x.op = n.op;
  x.attrs = n.attrs;
  x.compute = compute_dtype(g, n, e);
  x.promoted = promoted(g, n);
  return x;
}

}  // namespace kiln::compiler::lower
