// The pointwise prims the C++ code generator computes in a loop body: each as
// the shared scalar functor its eager CPU kernel calls (core/scalar_math.h), in
// the same compute dtype, so generated and eager values agree.
#pragma once
#include <string>
#include <vector>

#include "compile/ir/graph.h"

namespace kiln::compiler::codegen {

// Whether node n of g can be computed inside a generated loop (else it runs as
// an extern call with its eager kernel).
bool is_codegen_pointwise(const Graph& g, const Node& n);

// One statement computing n's output from its inputs: `args` are C++ expressions of
// the inputs' values, in their own dtypes; `out` names the variable to declare.
std::string emit_pointwise(const Graph& g, const Node& n, const std::vector<std::string>& args,
                           const std::string& out);

// The C++ type of an element of dtype t in generated code.
const char* cpp_type(DType t);
// A C++ expression of type cpp_type(t) equal to v converted as Scalar::to<T> does.
std::string literal(const Scalar& v, DType t);
std::string literal_double(double v, DType t);

}  // namespace kiln::compiler::codegen
