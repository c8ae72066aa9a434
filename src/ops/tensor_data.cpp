// Reading a tensor's values from C++: item, to_vector, printing.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>

#include "core/half.h"
#include "dispatch/dispatch.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/registry.h"

namespace kiln {

namespace {
// A contiguous CPU float64/int64/bool copy for reading values.
Tensor readable(const Tensor& t, DType as) {
  KILN_CHECK(t.defined(), "reading values of an undefined tensor");
  notify_value_read(t, "reading its values");
  RecordLayerGuard not_recorded(nullptr);  // the copies made for reading are not part of any graph
  ExcludeAllModesGuard no_modes;            // nor seen by modes (one that moves factories would move them)
  KILN_CHECK(t.has_storage(), "cannot read the values of a tensor without storage (a tracer or meta tensor)");
  Tensor c = t.detach();
  if (!c.is_cpu()) c = c.to(kCPU);
  if (c.dtype() != as) c = kiln::to(c, as);
  return contiguous(c);
}
}  // namespace

template <class T>
std::vector<T> Tensor::to_vector() const {
  DType as = kiln::is_floating_point(dtype()) ? DType::Float64 : (dtype() == DType::Bool ? DType::Bool : DType::Int64);
  Tensor c = readable(*this, as);
  std::vector<T> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) {
    if (as == DType::Float64)
      out[i] = static_cast<T>(static_cast<const double*>(c.data_ptr())[i]);
    else if (as == DType::Int64)
      out[i] = static_cast<T>(static_cast<const int64_t*>(c.data_ptr())[i]);
    else
      out[i] = static_cast<T>(static_cast<const bool*>(c.data_ptr())[i]);
  }
  return out;
}

template <class T>
T Tensor::item() const {
  KILN_CHECK(defined() && numel() == 1, "item: a Tensor with ", (defined() ? numel() : 0),
             " elements cannot be converted to a scalar");
  return to_vector<T>()[0];
}

Scalar Tensor::item() const {
  if (is_floating_point()) return Scalar(item<double>());
  if (dtype() == DType::Bool) return Scalar(item<bool>());
  return Scalar(item<int64_t>());
}

#define KILN_INSTANTIATE(T)                             \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
KILN_INSTANTIATE(bool)
KILN_INSTANTIATE(uint8_t)
KILN_INSTANTIATE(int8_t)
KILN_INSTANTIATE(int16_t)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

// Printing in torch's style: tensor([[1., 2.], [3., 4.]], dtype=float64).
std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  notify_value_read(*this, "printing");
  RecordLayerGuard not_recorded(nullptr);
  std::ostringstream os;
  if (!has_storage()) {
    os << "tensor(<no data>, size=" << shape_str(sizes()) << ", dtype=" << dtype() << ")";
    return os.str();
  }
  bool fp = is_floating_point();
  std::vector<double> vals = to_vector<double>();
  bool integral_vals = true;
  double amax = 0, amin = std::numeric_limits<double>::infinity();  // over the finite non-zeros
  for (double v : vals) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) integral_vals = false;
    if (v != 0) amax = std::max(amax, std::abs(v)), amin = std::min(amin, std::abs(v));
  }
  // torch's _Formatter: scientific notation when the values span more than 1000x,
  // pass 1e8, or (with fractions) fall under 1e-4; whole numbers print as "3.".
  bool sci = amax > 0 && (amax / amin > 1000 || amax > 1e8 || (!integral_vals && amin < 1e-4));
  auto fmt = [&](double v) {
    std::ostringstream s;
    if (dtype() == DType::Bool)
      s << (v != 0 ? "True" : "False");
    else if (!fp)
      s << static_cast<int64_t>(v);
    else if (std::isnan(v))
      s << "nan";
    else if (std::isinf(v))
      s << (v > 0 ? "inf" : "-inf");
    else if (sci)
      s << std::scientific << std::setprecision(4) << v;
    else if (integral_vals)
      s << static_cast<int64_t>(v) << ".";
    else
      s << std::fixed << std::setprecision(4) << v;
    return s.str();
  };
  os << "tensor(";
  int64_t nd = dim();
  if (nd == 0) {
    os << fmt(vals.empty() ? 0 : vals[0]);
  } else {
    std::vector<int64_t> idx(nd, 0);
    Shape sz = sizes().vec();
    std::function<void(int64_t, int64_t&)> rec = [&](int64_t d, int64_t& flat) {
      os << "[";
      for (int64_t i = 0; i < sz[d]; ++i) {
        if (i) os << (d == nd - 1 ? ", " : ",\n" + std::string(8 + d, ' '));
        if (d == nd - 1)
          os << fmt(vals[flat++]);
        else
          rec(d + 1, flat);
      }
      os << "]";
    };
    int64_t flat = 0;
    if (numel() > 1000) {
      os << "[" << fmt(vals[0]) << ", " << fmt(vals[1]) << ", " << fmt(vals[2]) << ", ..., "
         << fmt(vals[vals.size() - 3]) << ", " << fmt(vals[vals.size() - 2]) << ", " << fmt(vals.back())
         << "], size=" << shape_str(sz);
    } else if (numel() == 0) {
      os << "[]";
      if (nd > 1 || sz[0] != 0) os << ", size=" << shape_str(sz);
    } else {
      rec(0, flat);
    }
  }
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool) os << ", dtype=" << dtype();
  if (!is_cpu()) os << ", device='" << device() << "'";
  if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace kiln
