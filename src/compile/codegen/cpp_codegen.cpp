#include "compile/codegen/cpp_codegen.h"

#include <sstream>
#include <string_view>
#include <unordered_map>

#include "compile/codegen/pointwise_ops.h"

namespace kiln::compiler::codegen {

// Note [Generated C++]
// Each kernel is a loop nest over its iteration space (kept dims outside,
// reduced dims inside, Note [Loop kernels]), its body the members' scalar
// functors in graph order on registers. Operands are typed pointers indexed
// with compile-time strides (the run time checks the buffers match), so a
// contiguous kernel is one flat loop the compiler vectorizes. OpenMP splits the
// outer (kept) loops when the caller passes more than one thread. Reductions
// accumulate as eager's reducers do in kind (double for floating sums and
// products, wrapping 64-bit integers, NaN-propagating max/min), though not in
// eager's order, so values agree within the accuracy rule, not bit for bit.

std::string kernel_symbol(size_t i) { return "kiln_kernel_" + std::to_string(i); }

namespace {

std::string index_expr(const std::vector<int64_t>& strides) {
  std::string s;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!s.empty()) s += " + ";
    s += strides[d] == 1 ? "i" + std::to_string(d) : "i" + std::to_string(d) + " * " + std::to_string(strides[d]) + "LL";
  }
  return s.empty() ? "0" : s;
}

struct Reducer {
  std::string acc_type, init, step, result;  // step updates `a` with value `x`
};

// Accumulator of a reduction node with output dtype o and input dtype i.
Reducer reducer(std::string_view op, DType in, DType o) {
  const std::string ot = cpp_type(o);
  if (op == "sum" || op == "prod") {
    const bool sum = op == "sum";
    if (is_floating_point(o)) {
      // torch casts the input to the result dtype first.
      std::string x = "double(kiln::convert<float>(kiln::convert<" + ot + ">(x)))";
      if (o == DType::Float64) x = "kiln::convert<double>(x)";
      return {"double", sum ? "0.0" : "1.0", sum ? "a += " + x + ";" : "a *= " + x + ";",
              "kiln::convert<" + ot + ">(a)"};
    }
    // Integers wrap (two's complement) without signed overflow.
    std::string x = "static_cast<uint64_t>(static_cast<int64_t>(kiln::convert<" + ot + ">(x)))";
    return {"uint64_t", sum ? "0" : "1", sum ? "a += " + x + ";" : "a *= " + x + ";",
            "kiln::convert<" + ot + ">(static_cast<int64_t>(a))"};
  }
  const bool max = op == "amax";
  const DType c = in == DType::Float16 || in == DType::BFloat16 ? DType::Float32 : in;
  const std::string ct = cpp_type(c);
  std::string init = max ? "std::numeric_limits<" + ct + ">::lowest()" : "std::numeric_limits<" + ct + ">::max()";
  if (is_floating_point(c))
    init = max ? "-std::numeric_limits<" + ct + ">::infinity()" : "std::numeric_limits<" + ct + ">::infinity()";
  std::string cmp = max ? "v > a" : "v < a";
  // A NaN sticks: once a is NaN no comparison is true, and a NaN v always wins.
  std::string step = "{ const " + ct + " v = kiln::convert<" + ct + ">(x); if (" + cmp +
                     (is_floating_point(c) ? " || v != v" : "") + ") a = v; }";
  return {ct, init, step, "kiln::convert<" + ot + ">(a)"};
}

void emit_kernel(std::ostringstream& os, const Graph& g, const lower::Kernel& k, size_t ki) {
  os << "extern \"C\" void " << kernel_symbol(ki) << "(char* const* bufs, int threads) {\n  (void)threads;\n";
  std::vector<std::string> name(g.values.size());
  size_t b = 0;
  for (const lower::Operand& op : k.loads) {
    const DType t = g.values[static_cast<size_t>(op.value)].meta.dtype;
    os << "  const " << cpp_type(t) << "* __restrict in" << b << " = reinterpret_cast<const " << cpp_type(t)
       << "*>(bufs[" << b << "]);\n";
    ++b;
  }
  for (size_t s = 0; s < k.stores.size(); ++s) {
    const DType t = g.values[static_cast<size_t>(k.stores[s].value)].meta.dtype;
    os << "  " << cpp_type(t) << "* __restrict out" << s << " = reinterpret_cast<" << cpp_type(t) << "*>(bufs["
       << b + s << "]);\n";
  }
  const size_t rank = k.sizes.size(), kept = rank - static_cast<size_t>(k.num_reduced);
  // The kernel's reductions (its non-pointwise members) and their accumulators, by node.
  std::vector<int> reductions;
  std::unordered_map<int, Reducer> reducers;
  for (int n : k.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    if (is_codegen_pointwise(g, node)) continue;
    reductions.push_back(n);
    reducers[n] = reducer(op_info(node.op).name, g.values[static_cast<size_t>(node.inputs[0])].meta.dtype,
                          g.values[static_cast<size_t>(node.outputs[0])].meta.dtype);
  }
  std::string indent = "  ";
  auto open_loop = [&](size_t d) {
    os << indent << "for (int64_t i" << d << " = 0; i" << d << " < " << k.sizes[d] << "LL; ++i" << d << ") {\n";
    indent += "  ";
  };
  auto close_loop = [&] {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  };
  // OpenMP over the kept loops (collapsed), the innermost left to vectorize when there are others.
  if (kept > 0) {
    size_t collapse = kept == rank && rank > 1 ? kept - 1 : kept;
    os << indent << "#pragma omp parallel for num_threads(threads) if(threads > 1)"
       << (collapse > 1 ? " collapse(" + std::to_string(collapse) + ")" : "") << "\n";
  }
  for (size_t d = 0; d < kept; ++d) open_loop(d);
  for (int n : reductions) os << indent << reducers[n].acc_type << " acc" << n << " = " << reducers[n].init << ";\n";
  // Sums and products may be reassociated across the innermost reduced loop (OpenMP simd
  // reduction): vector lanes of partial sums, as eager's reducers keep. max/min stay in order
  // (their NaN rule is not an OpenMP reduction).
  std::string simd;
  for (int n : reductions) {
    std::string_view op = op_info(g.nodes[static_cast<size_t>(n)].op).name;
    if (op != "sum" && op != "prod") {
      simd.clear();
      break;
    }
    simd += std::string(" reduction(") + (op == "sum" ? "+" : "*") + ":acc" + std::to_string(n) + ")";
  }
  for (size_t d = kept; d < rank; ++d) {
    if (d + 1 == rank && !simd.empty()) os << indent << "#pragma omp simd" << simd << "\n";
    open_loop(d);
  }
  // Loads at this point, then each member.
  for (size_t l = 0; l < k.loads.size(); ++l) {
    const int v = k.loads[l].value;
    name[static_cast<size_t>(v)] = "v" + std::to_string(v);
    os << indent << "const " << cpp_type(g.values[static_cast<size_t>(v)].meta.dtype) << " v" << v << " = in" << l
       << "[" << index_expr(k.loads[l].strides) << "];\n";
  }
  for (int n : k.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    const int v = node.outputs[0];
    if (reducers.count(n)) {
      os << indent << "{ auto& a = acc" << n << "; const auto& x = " << name[static_cast<size_t>(node.inputs[0])]
         << "; " << reducers[n].step << " }\n";
      continue;
    }
    std::vector<std::string> args;
    for (int in : node.inputs) args.push_back(name[static_cast<size_t>(in)]);
    name[static_cast<size_t>(v)] = "v" + std::to_string(v);
    os << indent << emit_pointwise(g, node, args, name[static_cast<size_t>(v)]) << "\n";
  }
  // The node whose accumulator a store writes, -1 for a pointwise value.
  auto reduction_of = [&](int v) {
    for (int n : reductions)
      if (g.nodes[static_cast<size_t>(n)].outputs[0] == v) return n;
    return -1;
  };
  for (size_t s = 0; s < k.stores.size(); ++s) {
    const int v = k.stores[s].value;
    if (reduction_of(v) < 0) os << indent << "out" << s << "[" << index_expr(k.stores[s].strides) << "] = v" << v << ";\n";
  }
  for (size_t d = kept; d < rank; ++d) close_loop();
  for (size_t s = 0; s < k.stores.size(); ++s) {
    const int n = reduction_of(k.stores[s].value);
    if (n < 0) continue;
    std::vector<int64_t> st = k.stores[s].strides;
    st.resize(kept);  // reduced dims have stride 0 in the output
    os << indent << "{ const auto& a = acc" << n << "; out" << s << "[" << index_expr(st) << "] = " << reducers[n].result
       << "; }\n";
  }
  for (size_t d = 0; d < kept; ++d) close_loop();
  os << "}\n\n";
}

}  // namespace

std::string generate_cpp(const Graph& g, const lower::Schedule& s, size_t first, size_t last) {
  std::ostringstream os;
  os << "// Generated by kiln's C++ code generator (Note [Generated C++]).\n"
        "#include \"kiln_jit.h\"  // <cstdint>, <limits>, core/convert.h, core/scalar_math.h (precompiled)\n\n";
  for (size_t i = first; i < last && i < s.kernels.size(); ++i) emit_kernel(os, g, s.kernels[i], i);
  return os.str();
}

}  // namespace kiln::compiler::codegen
