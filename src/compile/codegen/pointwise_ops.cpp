#include "compile/codegen/pointwise_ops.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

#include "compile/lower/pointwise.h"
#include "core/convert.h"
#include "ops/meta_util.h"
#include "core/dtype_dispatch.h"

namespace kiln::compiler::codegen {

namespace {

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

std::string pointwise_call(const lower::Expr& x, const std::vector<std::string>& args) {
  const OpInfo& info = op_info(x.op);
  const lower::PointwiseRule& e = *lower::pointwise_rule(info.name);
  const Attrs& attrs = x.attrs;
  const DType c = x.compute, o = x.dtype;
  const std::string ct = cpp_type(c);
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
    const Scalar& alpha = attrs.s(0);
    if (alpha == Scalar(1) || (alpha.is_bool() && alpha.to_bool())) {
      r = call("Add{}", a);
    } else {
      const DType om = opmath(c);
      r = call(std::string("AddAlpha<") + cpp_type(om) + ">{" + literal(alpha, om) + "}", a);
    }
  } else if (name == "div") {
    auto mode = attrs.opt_str(0);
    if (!mode) r = call("Div{}", a);
    else {
      const DType p = x.promoted;
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
    auto lo = attrs.opt_s(0), hi = attrs.opt_s(1);
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
    int64_t d = attrs.i(0);
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
      r = call("NanToNum{" + f(attrs.opt_f(0).value_or(0.0)) + ", " + f(attrs.opt_f(1).value_or(big)) + ", " +
                   f(attrs.opt_f(2).value_or(-big)) + "}",
               a);
    }
  } else if (name == "polygamma") {
    r = call("Polygamma{" + std::to_string(attrs.i(0)) + "}", a);
  } else {
    r = call(std::string(e.functor) + "{}", a);
  }
  return cast(r, o);
}

}  // namespace kiln::compiler::codegen
