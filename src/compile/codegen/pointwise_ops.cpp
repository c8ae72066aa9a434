#include "compile/codegen/pointwise_ops.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "ops/meta_util.h"

namespace kiln::compiler::codegen {

namespace {

// The dtype a functor runs in, as the op's CPU kernel picks it (src/backend/cpu/pointwise*.cpp).
enum class Compute { Input0, Output, Promoted };
// The dtypes the functor is defined for (the kernel's TypeSet).
enum class Types { All, Floating, IntOrBool, Integer, NotBool };

struct Entry {
  const char* functor;  // math::<functor>{}
  Compute compute;
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
  switch (e.compute) {
    case Compute::Input0: return g.values[static_cast<size_t>(n.inputs[0])].meta.dtype;
    case Compute::Output: return out_dtype(g, n);
    case Compute::Promoted: return promoted(g, n);
  }
  return out_dtype(g, n);
}

std::string cast(const std::string& arg, DType t) { return std::string("kiln::convert<") + cpp_type(t) + ">(" + arg + ")"; }

template <class T>
std::string float_literal(T v, const char* type) {
  if (std::isnan(v)) return std::string("std::numeric_limits<") + type + ">::quiet_NaN()";
  if (std::isinf(v)) return std::string(v > 0 ? "" : "-") + "std::numeric_limits<" + type + ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));  // exact
  return std::string(type) + "(" + buf + ")";
}

template <class T>
std::string value_literal(T v, DType t) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, float>) return float_literal(v, "float");
  else if constexpr (std::is_same_v<T, double>) return float_literal(v, "double");
  else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>)
      if (v == std::numeric_limits<T>::min())
        return std::string("std::numeric_limits<") + cpp_type(t) + ">::min()";
    return std::string(cpp_type(t)) + "(" + std::to_string(static_cast<long long>(v)) + "LL)";
  } else {  // Half, BFloat16: the bits, so the value is the one eager holds
    return std::string(cpp_type(t)) + "::from_bits(" + std::to_string(v.x) + ")";
  }
}

}  // namespace

const char* cpp_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8_t";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float16: return "kiln::Half";
    case DType::BFloat16: return "kiln::BFloat16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

std::string literal(const Scalar& v, DType t) {
  std::string s;
  visit_dtype(t, [&]<class T>() { s = value_literal<T>(v.to<T>(), t); });
  return s;
}

std::string literal_double(double v, DType t) {
  std::string s;
  visit_dtype(t, [&]<class T>() { s = value_literal<T>(kiln::convert<T>(v), t); });
  return s;
}

bool is_codegen_pointwise(const Graph& g, const Node& n) {
  const OpInfo& info = op_info(n.op);
  if (!info.has(POINTWISE) || info.has(RANDOM) || n.outputs.size() != 1) return false;
  auto it = table().find(info.name);
  if (it == table().end()) return false;
  for (int v : n.inputs) {
    if (v < 0) return false;
    if (g.values[static_cast<size_t>(v)].meta.device.type != DeviceType::CPU) return false;
  }
  const Entry& e = it->second;
  const DType c = compute_dtype(g, n, e);
  if (!in_types(e.types, c)) return false;  // eager raises: let it
  std::string_view name = info.name;
  if (name == "div" && n.attrs.opt_str(0)) return is_floating_point(promoted(g, n));  // integer division checks zero
  if (name == "round" && n.attrs.i(0) != 0) return is_floating_point(c);
  if (name == "clamp") return true;
  return true;
}

std::string emit_pointwise(const Graph& g, const Node& n, const std::vector<std::string>& args, const std::string& out) {
  const OpInfo& info = op_info(n.op);
  const Entry& e = table().at(info.name);
  const DType c = compute_dtype(g, n, e), o = out_dtype(g, n);
  const std::string ct = cpp_type(c), ot = cpp_type(o);
  std::string_view name = info.name;
  std::vector<std::string> a;
  for (const std::string& s : args) a.push_back(cast(s, c));
  auto call = [&](const std::string& functor, const std::vector<std::string>& xs) {
    std::string s = "kiln::math::" + functor + "(";
    for (size_t k = 0; k < xs.size(); ++k) s += (k ? ", " : "") + xs[k];
    return s + ")";
  };
  std::string r;
  if (name == "add") {
    const Scalar& alpha = n.attrs.s(0);
    if (alpha == Scalar(1) || (alpha.is_bool() && alpha.to_bool())) {
      r = call("Add{}", a);
    } else {
      const DType om = opmath(c);
      r = call(std::string("AddAlpha<") + cpp_type(om) + ">{" + literal(alpha, om) + "}", a);
    }
  } else if (name == "div") {
    auto mode = n.attrs.opt_str(0);
    if (!mode) r = call("Div{}", a);
    else {
      const DType p = promoted(g, n);
      std::vector<std::string> pa;
      for (const std::string& s : args) pa.push_back(cast(s, p));
      r = call(*mode == "trunc" ? "DivTrunc{}" : "DivFloor{}", pa);
    }
  } else if (name == "where") {
    r = call("Where{}", {cast(args[0], DType::Bool), a[1], a[2]});
  } else if (name == "to") {
    r = cast(args[0], o);
  } else if (name == "clamp") {
    // clamp_scalar_bounds: an absent bound is the type's extreme, in the compute type.
    const DType om = opmath(c);
    auto lo = n.attrs.opt_s(0), hi = n.attrs.opt_s(1);
    const std::string omt = cpp_type(om);
    std::string l, h;
    if (is_floating_point(c)) {
      l = lo ? literal_double(lo->to_double(), om) : "-std::numeric_limits<" + omt + ">::infinity()";
      h = hi ? literal_double(hi->to_double(), om) : "std::numeric_limits<" + omt + ">::infinity()";
    } else {
      l = lo ? literal(Scalar(lo->to_long()), om) : "std::numeric_limits<" + omt + ">::lowest()";
      h = hi ? literal(Scalar(hi->to_long()), om) : "std::numeric_limits<" + omt + ">::max()";
    }
    r = call("Clamp{}", {a[0], ct + "(" + l + ")", ct + "(" + h + ")"});
  } else if (name == "round") {
    int64_t d = n.attrs.i(0);
    r = d == 0 ? call("Round{}", a) : call("RoundDecimals{" + std::to_string(d) + "}", a);
  } else if (name == "nan_to_num") {
    if (!is_floating_point(c)) {
      r = a[0];
    } else {
      double big = c == DType::Float16    ? 65504.0
                   : c == DType::BFloat16 ? 3.38953138925153547590e38
                   : c == DType::Float32  ? static_cast<double>(std::numeric_limits<float>::max())
                                          : std::numeric_limits<double>::max();
      auto f = [](double v) { return float_literal(v, "double"); };
      r = call("NanToNum{" + f(n.attrs.opt_f(0).value_or(0.0)) + ", " + f(n.attrs.opt_f(1).value_or(big)) + ", " +
                   f(n.attrs.opt_f(2).value_or(-big)) + "}",
               a);
    }
  } else if (name == "polygamma") {
    r = call("Polygamma{" + std::to_string(n.attrs.i(0)) + "}", a);
  } else {
    r = call(std::string(e.functor) + "{}", a);
  }
  return "const " + ot + " " + out + " = " + cast(r, o) + ";";
}

}  // namespace kiln::compiler::codegen
