// The PyTorch parity fixture's format (Note [Torch parity fixture]): an op call's attrs as text,
// "kind:value" entries joined by '|', which make_torch_ops_fixture.py reads as well.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "ops/attrs.h"

namespace kiln::test {

inline constexpr int kMaxParityCases = 4;        // calls kept per op
inline constexpr int64_t kMaxParityNumel = 256;  // elements over a call's inputs: keeps the fixture small

inline std::string parity_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string encode_attrs(const Attrs& attrs) {
  std::string out;
  for (size_t k = 0; k < attrs.size(); ++k) {
    const AttrValue& a = attrs[k];
    std::string e;
    if (std::holds_alternative<std::monostate>(a))
      e = "none";
    else if (auto* b = std::get_if<bool>(&a))
      e = std::string("bool:") + (*b ? "1" : "0");
    else if (auto* i = std::get_if<int64_t>(&a))
      e = "int:" + std::to_string(*i);
    else if (auto* d = std::get_if<double>(&a))
      e = "double:" + parity_double(*d);
    else if (auto* s = std::get_if<Scalar>(&a))
      e = s->is_bool()       ? std::string("scalar_bool:") + (s->to_bool() ? "1" : "0")
          : s->is_integral() ? "scalar_int:" + std::to_string(s->to_long())
                             : "scalar_float:" + parity_double(s->to_double());
    else if (auto* t = std::get_if<DType>(&a))
      e = "dtype:" + std::string(dtype_name(*t));
    else if (auto* dev = std::get_if<Device>(&a))
      e = "device:" + dev->str();
    else if (auto* v = std::get_if<std::vector<int64_t>>(&a)) {
      e = "ints:";
      for (size_t j = 0; j < v->size(); ++j) e += (j ? "," : "") + std::to_string((*v)[j]);
    } else if (auto* v = std::get_if<std::vector<double>>(&a)) {
      e = "doubles:";
      for (size_t j = 0; j < v->size(); ++j) e += (j ? "," : "") + parity_double((*v)[j]);
    } else if (auto* s = std::get_if<std::string>(&a)) {
      KILN_CHECK(s->find('|') == std::string::npos, "parity fixture: a string attr holds '|': ", *s);
      e = "str:" + *s;
    }
    out += (k ? "|" : "") + e;
  }
  return out;
}

inline std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  if (s.empty()) return parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1)
    parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

inline DType parity_dtype(const std::string& name) {
  for (DType t : {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::Float16,
                  DType::BFloat16, DType::Float32, DType::Float64})
    if (dtype_name(t) == name) return t;
  KILN_CHECK(false, "parity fixture: unknown dtype '", name, "'");
  return DType::Float32;
}

inline Attrs decode_attrs(const std::string& text) {
  std::vector<AttrValue> v;
  // An op without attrs encodes as "", which split_on gives as no entries.
  for (const std::string& e : split_on(text, '|')) {
    const size_t colon = e.find(':');
    const std::string kind = e.substr(0, colon), val = colon == std::string::npos ? "" : e.substr(colon + 1);
    if (kind == "none")
      v.emplace_back(std::monostate{});
    else if (kind == "bool")
      v.emplace_back(val == "1");
    else if (kind == "int")
      v.emplace_back(static_cast<int64_t>(std::strtoll(val.c_str(), nullptr, 10)));
    else if (kind == "double")
      v.emplace_back(std::strtod(val.c_str(), nullptr));
    else if (kind == "scalar_bool")
      v.emplace_back(Scalar(val == "1"));
    else if (kind == "scalar_int")
      v.emplace_back(Scalar(static_cast<int64_t>(std::strtoll(val.c_str(), nullptr, 10))));
    else if (kind == "scalar_float")
      v.emplace_back(Scalar(std::strtod(val.c_str(), nullptr)));
    else if (kind == "dtype")
      v.emplace_back(parity_dtype(val));
    else if (kind == "device")
      v.emplace_back(Device(val));
    else if (kind == "ints") {
      std::vector<int64_t> xs;
      for (const std::string& p : split_on(val, ',')) xs.push_back(std::strtoll(p.c_str(), nullptr, 10));
      v.emplace_back(std::move(xs));
    } else if (kind == "doubles") {
      std::vector<double> xs;
      for (const std::string& p : split_on(val, ',')) xs.push_back(std::strtod(p.c_str(), nullptr));
      v.emplace_back(std::move(xs));
    } else if (kind == "str")
      v.emplace_back(val);
    else
      KILN_CHECK(false, "parity fixture: unknown attr kind '", kind, "' in '", text, "'");
  }
  return Attrs(std::move(v));
}

}  // namespace kiln::test
