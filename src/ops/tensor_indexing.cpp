// Tensor::index / index_put_ with Python's index grammar (kiln/indexing.h), as libtorch's
// applySlicing: basic indices become views (select, slice, unsqueeze), then the tensor indices
// gathered on the way go to the index / index_put ops at the dims they stood at.
#include <algorithm>
#include <cstring>
#include <span>

#include "kiln/indexing.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"

namespace kiln {

namespace indexing {
TensorIndex::TensorIndex(const char* s) : v_(EllipsisIndexType{}) {
  KILN_CHECK(s && std::strcmp(s, "...") == 0, "index: a string index must be \"...\" (Ellipsis), got \"",
             s ? s : "(null)", "\"");
}
}  // namespace indexing

namespace {
using indexing::TensorIndex;

// The view that the basic indices give, and the tensor indices at its dims (undefined elsewhere).
struct Sliced {
  Tensor view;
  std::vector<Tensor> tensor_indices;
};

bool is_mask(const Tensor& t) { return t.dtype() == kBool || t.dtype() == kUInt8; }

Sliced apply_slicing(const Tensor& self, std::span<const TensorIndex> indices, const char* op) {
  KILN_CHECK(self.defined(), op, ": undefined tensor");
  // How many dims of self the indices use: integers, slices and tensors (a mask one per each of
  // its dims); None and bools add a dim, the ellipsis stands for the rest.
  int64_t used = 0;
  int ellipses = 0;
  for (const TensorIndex& i : indices) {
    if (i.is_integer() || i.is_slice()) {
      ++used;
    } else if (i.is_tensor()) {
      const Tensor& t = i.tensor();
      KILN_CHECK(t.defined(), op, ": an index tensor is undefined");
      used += is_mask(t) ? t.dim() : 1;
    } else if (i.is_ellipsis()) {
      ++ellipses;
    }
  }
  KILN_CHECK(ellipses <= 1, op, ": an index can only have a single ellipsis ('...')");
  KILN_CHECK(used <= self.dim(), op, ": too many indices for tensor of dimension ", self.dim(), " (got ", used, ")");
  Sliced r{self, {}};
  int64_t dim = 0;      // the dim of r.view the next index applies to
  int64_t covered = 0;  // dims of r.view that r.tensor_indices' entries stand for (a mask: its dims)
  for (const TensorIndex& i : indices) {
    if (i.is_integer()) {
      r.view = r.view.select(dim, i.integer());
    } else if (i.is_slice()) {
      const indexing::Slice& s = i.slice();
      SymInt step = s.step ? *s.step : SymInt(1);
      KILN_CHECK(step > 0, op, ": slice step must be positive, got ", static_cast<int64_t>(step));
      r.view = r.view.slice(dim, s.start, s.stop, step);
      ++dim;
    } else if (i.is_none()) {
      r.view = r.view.unsqueeze(dim);
      ++dim;
    } else if (i.is_boolean()) {
      // x[True] adds a dim of size 1, x[False] one of size 0 (torch).
      r.view = r.view.unsqueeze(dim);
      if (!i.boolean()) r.view = r.view.slice(dim, 0, 0);
      ++dim;
    } else if (i.is_ellipsis()) {
      dim += self.dim() - used;
    } else {
      Tensor t = i.tensor();
      if (is_mask(t) && t.dim() == 0) {  // a 0-d mask: a new dim of size 1, kept or not (torch)
        r.view = r.view.unsqueeze(dim);
        t = t.reshape({1});
      }
      for (; covered < dim; ++covered) r.tensor_indices.emplace_back();
      r.tensor_indices.push_back(t);
      const int64_t n = is_mask(t) ? t.dim() : 1;
      covered += n;
      dim += n;
    }
  }
  return r;
}

bool any_defined(const std::vector<Tensor>& v) {
  for (const Tensor& t : v)
    if (t.defined()) return true;
  return false;
}

Tensor index_impl(const Tensor& self, std::span<const TensorIndex> indices) {
  Sliced s = apply_slicing(self, indices, "index");
  if (!any_defined(s.tensor_indices)) {
    // Basic indexing only: a view, as torch (a new one also when no index changed anything).
    return s.view.is_same(self) ? self.expand_as(self) : s.view;
  }
  return kiln::index(s.view, s.tensor_indices);
}

Tensor& index_put_impl(Tensor& self, std::span<const TensorIndex> indices, const Tensor& value) {
  Sliced s = apply_slicing(self, indices, "index_put_");
  if (!any_defined(s.tensor_indices)) {
    s.view.copy_(value);  // broadcasts value, converts its dtype
    return self;
  }
  Tensor v = value.dtype() == s.view.dtype() ? value : value.to(s.view.dtype());
  kiln::index_put_(s.view, s.tensor_indices, v);
  return self;
}

Tensor scalar_like(const Tensor& self, const Scalar& value) {
  return full({}, value, TensorOptions(self.dtype()).device(self.device()));
}
}  // namespace

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  return index_impl(*this, std::span<const TensorIndex>(indices.begin(), indices.size()));
}
Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const { return index_impl(*this, indices); }
Tensor Tensor::operator[](const Tensor& index) const { return index_impl(*this, std::vector<TensorIndex>{index}); }

Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value) {
  return index_put_impl(*this, std::span<const TensorIndex>(indices.begin(), indices.size()), value);
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value) {
  return index_put_impl(*this, std::span<const TensorIndex>(indices.begin(), indices.size()),
                        scalar_like(*this, value));
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value) {
  return index_put_impl(*this, indices, value);
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value) {
  return index_put_impl(*this, indices, scalar_like(*this, value));
}

}  // namespace kiln
