#include "compile/ir/graph.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <cstring>
#include <sstream>

namespace kiln::compiler {

namespace {
const char* short_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return "b8";
    case DType::UInt8:
      return "u8";
    case DType::Int8:
      return "i8";
    case DType::Int16:
      return "i16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
  }
  return "?";
}

void print_attr(std::ostream& os, const AttrValue& a, const std::vector<SymNode>& nodes) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>)
          os << "None";
        else if constexpr (std::is_same_v<V, bool>)
          os << (v ? "true" : "false");
        else if constexpr (std::is_same_v<V, Scalar>) {
          if (v.is_floating_point())
            os << v.to_double();
          else if (v.is_bool())
            os << (v.to_bool() ? "true" : "false");
          else
            os << sym_str(v.to_long(), nodes);
        } else if constexpr (std::is_same_v<V, int64_t>)
          os << sym_str(v, nodes);
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << sym_str(v[i], nodes);
          os << "]";
        } else if constexpr (std::is_same_v<V, DType>)
          os << short_dtype(v);
        else if constexpr (std::is_same_v<V, std::vector<double>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << "]";
        } else if constexpr (std::is_same_v<V, std::string>)
          os << '"' << v << '"';
        else
          os << v;
      },
      a);
}
}  // namespace

const std::vector<std::string>& op_attr_names(OpId op) {
  static std::array<std::vector<std::string>, kNumOps> names;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kNumOps; ++i) {
      const char* semi = std::strchr(op_info(static_cast<OpId>(i)).signature, ';');
      if (!semi) continue;
      std::string rest(semi + 1);
      rest = rest.substr(0, rest.find(')'));
      std::stringstream ss(rest);
      std::string item;
      while (std::getline(ss, item, ',')) {
        size_t end = item.find_last_not_of(' ');
        size_t start = item.find_last_of(' ', end);
        size_t from = start == std::string::npos ? 0 : start + 1;
        names[static_cast<size_t>(i)].push_back(item.substr(from, end + 1 - from));
      }
    }
  });
  return names[static_cast<size_t>(op)];
}

std::string meta_str(const TensorMeta& m) {
  std::ostringstream os;
  os << short_dtype(m.dtype) << "[";
  for (size_t i = 0; i < m.sizes.size(); ++i) os << (i ? ", " : "") << m.sizes[i];
  os << "]";
  if (!m.device.is_cpu()) os << "@" << m.device;
  return os.str();
}

std::string meta_str(const TensorMeta& m, const Shape& sym, const std::vector<SymNode>& nodes) {
  if (sym.empty()) return meta_str(m);
  std::ostringstream os;
  os << short_dtype(m.dtype) << "[";
  for (size_t i = 0; i < sym.size(); ++i) os << (i ? ", " : "") << sym_str(sym[i], nodes);
  os << "]";
  if (!m.device.is_cpu()) os << "@" << m.device;
  return os.str();
}

std::vector<int64_t> Graph::sym_values(const std::vector<Tensor>& in) const {
  int n = 0;
  for (const SymSource& s : sym_sources) n = std::max(n, s.symbol + 1);
  std::vector<int64_t> symbols(static_cast<size_t>(n), 0);
  for (const SymSource& s : sym_sources) {
    KILN_CHECK(s.input < static_cast<int>(in.size()) && s.dim < in[s.input].dim(), "internal: symbol s", s.symbol,
               " reads dim ", s.dim, " of graph input ", s.input, ", which is missing");
    symbols[static_cast<size_t>(s.symbol)] = in[s.input].sizes()[static_cast<size_t>(s.dim)];
  }
  return sym_evaluate(sym_nodes, symbols);
}

Attrs evaluate_attrs(const Attrs& attrs, const std::vector<int64_t>& values) {
  if (!attrs.has_symbolic()) return attrs;
  std::vector<AttrValue> out = attrs.symbolic_values();
  for (AttrValue& a : out) {
    if (auto* i = std::get_if<int64_t>(&a)) *i = sym_value(*i, values);
    else if (auto* v = std::get_if<std::vector<int64_t>>(&a))
      for (int64_t& x : *v) x = sym_value(x, values);
    else if (auto* s = std::get_if<Scalar>(&a); s && s->is_integral() && SymInt::raw_is_symbolic(s->to_long()))
      *s = Scalar(sym_value(s->to_long(), values));
  }
  SymTableScope none(nullptr);  // plain values: no split
  return Attrs(std::move(out));
}

int Graph::add_input(const TensorMeta& m, bool requires_grad, bool wrapped_number) {
  int id = static_cast<int>(values.size());
  values.push_back(Value{m, -1, static_cast<int>(inputs.size()), requires_grad, wrapped_number, {}});
  inputs.push_back(id);
  return id;
}

int Graph::add_node(OpId op, Attrs attrs, std::vector<int> ins, const std::vector<TensorMeta>& outs) {
  int n = static_cast<int>(nodes.size());
  Node node{op, std::move(attrs), std::move(ins), {}};
  node.outputs.reserve(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    node.outputs.push_back(static_cast<int>(values.size()));
    values.push_back(Value{outs[k], n, static_cast<int>(k), false, false, {}});
  }
  nodes.push_back(std::move(node));
  return n;
}

std::string Graph::str(const std::string& name) const {
  std::ostringstream os;
  os << name << "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = values[inputs[i]];
    os << (i ? ", " : "") << "%" << inputs[i] << ": " << meta_str(v.meta, is_symbolic() ? v.sym : Shape{}, sym_nodes)
       << (v.requires_grad ? " (grad)" : "");
  }
  os << "):\n";
  for (const Node& n : nodes) {
    const OpInfo& info = op_info(n.op);
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) os << (k ? ", " : "") << "%" << n.outputs[k];
    if (!n.outputs.empty()) os << " = ";
    os << info.name << "(";
    bool first = true;
    for (int in : n.inputs) {
      os << (first ? "" : ", ") << (in < 0 ? std::string("None") : "%" + std::to_string(in));
      first = false;
    }
    const std::vector<std::string>& names = op_attr_names(n.op);
    const std::vector<AttrValue>& attrs = is_symbolic() ? n.attrs.symbolic_values() : n.attrs.values();
    for (size_t a = 0; a < attrs.size(); ++a) {
      os << (first ? "" : ", ") << (a < names.size() ? names[a] : "attr" + std::to_string(a)) << "=";
      print_attr(os, attrs[a], sym_nodes);
      first = false;
    }
    os << ")";
    if (!n.outputs.empty()) {
      os << " : ";
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const Value& v = values[n.outputs[k]];
        os << (k ? ", " : "") << meta_str(v.meta, is_symbolic() ? v.sym : Shape{}, sym_nodes);
      }
    }
    if (info.has(MUTATES)) os << "  # writes %" << (n.inputs.empty() ? -1 : n.inputs[0]);
    os << "\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << "%" << outputs[i];
  os << ")\n";
  return os.str();
}

void Graph::verify() const {
  std::vector<bool> defined(values.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    int v = inputs[i];
    KILN_CHECK(v >= 0 && v < static_cast<int>(values.size()), "graph verify: input ", i, " names no value");
    KILN_CHECK(values[v].node == -1 && values[v].index == static_cast<int>(i), "graph verify: input ", i, " (%", v,
               ") is not marked as graph input ", i);
    KILN_CHECK(!defined[v], "graph verify: %", v, " is defined twice");
    defined[v] = true;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const OpInfo& info = op_info(node.op);
    for (int in : node.inputs)
      KILN_CHECK(in < 0 || (in < static_cast<int>(values.size()) && defined[in]), "graph verify: node ", n, " (",
                 info.name, ") uses %", in, " before it is defined");
    KILN_CHECK(!info.has(MUTATES) || (!node.inputs.empty() && node.inputs[0] >= 0), "graph verify: node ", n, " (",
               info.name, ") writes no input");
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int v = node.outputs[k];
      KILN_CHECK(v >= 0 && v < static_cast<int>(values.size()) && !defined[v], "graph verify: node ", n, " (",
                 info.name, ") output ", k, " is not a new value");
      KILN_CHECK(values[v].node == static_cast<int>(n) && values[v].index == static_cast<int>(k), "graph verify: %", v,
                 " does not point back at node ", n);
      defined[v] = true;
    }
  }
  for (int v : outputs)
    KILN_CHECK(v >= 0 && v < static_cast<int>(values.size()) && defined[v], "graph verify: output %", v,
               " is not defined");
}

bool is_random_attr(const OpInfo& info, size_t attr_index, size_t num_attrs) {
  return info.has(RANDOM) && num_attrs >= 2 && attr_index + 2 >= num_attrs;
}

std::vector<int64_t> random_state(const Graph& g) {
  std::vector<int64_t> s;
  for (const Node& n : g.nodes) {
    if (!op_info(n.op).has(RANDOM)) continue;
    size_t k = n.attrs.size();
    s.push_back(n.attrs.i(k - 2));
    s.push_back(n.attrs.i(k - 1));
  }
  return s;
}

void map_random_source(Graph& derived, const Graph& source) {
  std::vector<int64_t> src = random_state(source);
  std::vector<int> own = source.random_source;
  derived.random_source.clear();
  for (const Node& n : derived.nodes) {
    if (!op_info(n.op).has(RANDOM)) continue;
    size_t k = n.attrs.size();
    int64_t seed = n.attrs.i(k - 2), offset = n.attrs.i(k - 1);
    int found = -1;
    for (size_t j = 0; j + 1 < src.size() && found < 0; j += 2)
      if (src[j] == seed && src[j + 1] == offset) found = static_cast<int>(j / 2);
    KILN_CHECK(found >= 0, "internal: ", op_info(n.op).name, " in a derived graph draws from (seed ", seed, ", offset ",
               offset, "), which no random op of the captured graph reserved");
    derived.random_source.push_back(own.empty() ? found : own[found]);
  }
}

}  // namespace kiln::compiler
