// C-family spellings of loop-IR values: element types, literals, and each
// Pointwise expression as a call of its shared scalar functor. The C++ and
// CUDA emitters share them (the functors are host and device code alike).
#pragma once
#include <string>
#include <vector>

#include "compile/lower/loop_ir.h"

namespace kiln::compiler::codegen {

// The C++ type of an element of dtype t in generated code.
const char* cpp_type(DType t);
// A C++ expression of type cpp_type(t) equal to v converted as Scalar::to<T> does.
std::string literal(const Scalar& v, DType t);
std::string literal_double(double v, DType t);

// A C++ expression of type cpp_type(e.dtype) computing Pointwise expression e from `args`, C++
// expressions of its arguments' values in their own dtypes.
std::string pointwise_call(const lower::Expr& e, const std::vector<std::string>& args);

}  // namespace kiln::compiler::codegen
