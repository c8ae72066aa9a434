// Views, shape manipulation and indexing. View ops return tensors that alias
// their input's storage (writes through one are seen by the other).
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// ---- views (alias the input) ----
Tensor view(const Tensor& x, SymIntArrayRef size);  // one size may be -1
Tensor reshape(const Tensor& x, SymIntArrayRef size);  // a view when strides allow, else a copy
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, SymIntArrayRef sizes);
Tensor permute(const Tensor& x, IntArrayRef dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);  // 0-D and 1-D unchanged, 2-D transposed
// Aliases of transpose, as torch (numpy's names).
Tensor swapaxes(const Tensor& x, int64_t axis0, int64_t axis1);
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1);
// Views with at least 1 / 2 / 3 dims: 0-d -> [1] / [1, 1] / [1, 1, 1], [N] -> [1, N] / [1, N, 1],
// [M, N] -> [M, N, 1]; others unchanged. The list forms apply it to each tensor.
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
std::vector<Tensor> atleast_1d(const std::vector<Tensor>& xs);
std::vector<Tensor> atleast_2d(const std::vector<Tensor>& xs);
std::vector<Tensor> atleast_3d(const std::vector<Tensor>& xs);
Tensor expand(const Tensor& x, SymIntArrayRef size);  // -1 keeps a size
Tensor expand_as(const Tensor& x, const Tensor& other);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, IntArrayRef dims);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor narrow(const Tensor& x, int64_t dim, SymInt start, SymInt length);
Tensor select(const Tensor& x, int64_t dim, SymInt index);
Tensor slice(const Tensor& x, int64_t dim = 0, std::optional<SymInt> start = std::nullopt,
             std::optional<SymInt> end = std::nullopt, SymInt step = 1);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor as_strided(const Tensor& x, SymIntArrayRef size, SymIntArrayRef stride,
                  std::optional<SymInt> storage_offset = std::nullopt);
Tensor detach(const Tensor& x);
std::vector<Tensor> split(const Tensor& x, SymInt split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, SymIntArrayRef split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

// ---- copies ----
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor repeat(const Tensor& x, SymIntArrayRef repeats);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor flip(const Tensor& x, IntArrayRef dims);
Tensor fliplr(const Tensor& x);  // flip along dim 1 (x at least 2-D)
Tensor flipud(const Tensor& x);  // flip along dim 0 (x at least 1-D)
// cat of atleast_1d(xs) along dim 0 if they are all 1-D, else along dim 1.
Tensor hstack(const std::vector<Tensor>& xs);
Tensor vstack(const std::vector<Tensor>& xs);  // cat of atleast_2d(xs) along dim 0
Tensor row_stack(const std::vector<Tensor>& xs);  // alias of vstack
Tensor dstack(const std::vector<Tensor>& xs);  // cat of atleast_3d(xs) along dim 2
// cat along dim 1 of xs as columns: 0-D and 1-D tensors become [numel, 1], others stay.
Tensor column_stack(const std::vector<Tensor>& xs);
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims = {});
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// pad: (left, right) pairs starting from the last dim, as torch.nn.functional.pad.
// mode: "constant", "reflect", "replicate" or "circular" (which pads every dim but the first one
// or two, each at most once around, as torch).
Tensor pad(const Tensor& x, IntArrayRef pad, const std::string& mode = "constant",
           std::optional<double> value = std::nullopt);

// ---- indexing ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// reduce: "sum", "prod", "mean", "amax", "amin".
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
// x[indices...] = values; undefined tensors in `indices` stand for full slices (":").
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false);
// x[indices...] with advanced (tensor) indices; undefined entries stand for ":".
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
// x (broadcast with mask) where mask is false; where it is true, source's elements in row-major
// order (source needs at least as many elements as mask has true values).
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
// x read as 1-D at int64 indices (negative count from the end); the result has index's shape.
Tensor take(const Tensor& x, const Tensor& index);
Tensor masked_select(const Tensor& x, const Tensor& mask);  // data-dependent size
Tensor nonzero(const Tensor& x);                             // [n, dim] int64, data-dependent
std::vector<Tensor> where(const Tensor& cond);               // nonzero as a tuple of 1-D indices
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// (values, inverse, counts) as torch's _unique2 / unique_dim: the unique elements (dim absent:
// of the flattened input) or unique slices along dim, in ascending order (also when sorted is
// false: torch leaves that order unspecified); inverse and counts are empty int64 [0] tensors
// unless asked for. NaNs are never equal to each other. Data-dependent sizes.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false, std::optional<int64_t> dim = std::nullopt);
// Only runs of consecutive equal elements (slices) collapse.
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt);
// Counts (or summed weights) of each value of a 1-D non-negative integer tensor; data-dependent length.
Tensor bincount(const Tensor& x, const Tensor& weights = {}, int64_t minlength = 0);
// Histogram of bins equal-width bins over [min, max] (min == max: the input's own range).
Tensor histc(const Tensor& x, int64_t bins = 100, const Scalar& min = 0, const Scalar& max = 0);
// Index where each value would be inserted into the innermost dim of sorted_sequence (1-D, or
// with the values' leading dims); side ("left"/"right") and right must agree when both given.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false, bool right = false,
                    const std::optional<std::string>& side = std::nullopt, const Tensor& sorter = {});
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32 = false, bool right = false,
                    const std::optional<std::string>& side = std::nullopt, const Tensor& sorter = {});
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);
Tensor bucketize(const Scalar& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);

// ---- compositions of the ops above (src/ops/shape_compose.cpp) ----
// Plain functions over public ops: autograd and compile see the ops they call.
Tensor movedim(const Tensor& x, IntArrayRef source, IntArrayRef destination);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
Tensor moveaxis(const Tensor& x, IntArrayRef source, IntArrayRef destination);
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination);
Tensor broadcast_to(const Tensor& x, SymIntArrayRef size);
Tensor tile(const Tensor& x, IntArrayRef reps);  // reps padded with leading 1s, as torch
// n-th forward difference along dim; prepend/append (undefined: absent) are joined first.
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {}, const Tensor& append = {});
Tensor trace(const Tensor& x);  // sum of a matrix's diagonal
// diag: a 1-D input becomes a square matrix with it on diagonal `diagonal`; a 2-D input
// gives that diagonal (a copy).
Tensor diag(const Tensor& x, int64_t diagonal = 0);
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
Tensor rot90(const Tensor& x, int64_t k = 1, IntArrayRef dims = {0, 1});
// dim absent: indices into the flattened input.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);  // 0-d value
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
// dim absent: over the flattened input. Tensor repeats are read on the host, so the output
// size is known (a graph break while compiling when they are traced, as for nonzero).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& repeats);  // index i repeated repeats[i] times
// indexing: "ij" (matrix) or "xy" (Cartesian: the first two dims swapped).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");
// The inputs (0-d, 1-D or 2-D; promoted to one dtype) as blocks along a matrix's diagonal.
Tensor block_diag(const std::vector<Tensor>& tensors);
// Every combination of the 1-D inputs' elements, one per row ([n1 * n2 * ..., k]; one input: itself).
Tensor cartesian_prod(const std::vector<Tensor>& tensors);

}  // namespace kiln
