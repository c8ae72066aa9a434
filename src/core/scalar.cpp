#include "kiln/scalar.h"

namespace kiln {

DType Scalar::dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: return DType::Float64;  // a double; promotion treats it as a wrapped number
  }
  return DType::Float64;
}

bool Scalar::operator==(const Scalar& o) const {
  if (kind_ != o.kind_) return false;
  return kind_ == Kind::Float ? d_ == o.d_ : i_ == o.i_;
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.to_bool() ? "True" : "False");
    case Scalar::Kind::Int: return os << s.to_long();
    case Scalar::Kind::Float: return os << s.to_double();
  }
  return os;
}

}  // namespace kiln
