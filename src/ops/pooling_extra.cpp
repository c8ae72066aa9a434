// channel_shuffle, max_unpool2d and fractional_max_pool2d: public functions,
// meta functions and decompositions. All three are composites of reshapes, scatter and gather, so
// autograd differentiates through them and compiled graphs lower them like any other.
#include <cmath>

#include "ops/indexing.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

// ---- channel_shuffle: (x; groups): (N, g, C/g, *) -> (N, C/g, g, *) -> (N, C, *) ----
std::vector<TensorMeta> meta_channel_shuffle(const OpCall& c) {
  const Tensor& x = c.in(0);
  int64_t g = c.attrs.i(0);
  KILN_CHECK(x.defined(), "channel_shuffle: expected a defined input tensor");
  KILN_CHECK(x.dim() > 2, "channel_shuffle: expects input to have at least 3 dimensions, but got input of shape ",
             shape_str(x.sizes()));
  KILN_CHECK(g > 0, "channel_shuffle: Number of groups to divide channels in must be positive. Value of groups: ", g);
  KILN_CHECK(x.sizes()[1] % g == 0, "channel_shuffle: Number of channels must be divisible by groups. Got ",
             x.sizes()[1], " channels and ", g, " groups (input shape ", shape_str(x.sizes()), ")");
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(channel_shuffle, meta_channel_shuffle);
std::vector<Tensor> decomp_channel_shuffle(const OpCall& c) {
  meta_channel_shuffle(c);
  const Tensor& x = c.in(0);
  int64_t g = c.attrs.i(0), per = x.sizes()[1] / g;
  // One group, or one channel per group: the permutation is the identity (and the reshapes would be
  // views of x, which an op's output must not be).
  if (g == 1 || per == 1) return {x.clone()};
  Shape split = x.sizes().vec();
  split[1] = per;
  split.insert(split.begin() + 1, g);
  return {reshape(transpose(reshape(x, split), 1, 2).contiguous(), x.sizes().vec())};
}
KILN_REGISTER_DECOMP(channel_shuffle, decomp_channel_shuffle);

// ---- max_unpool2d: (x, indices; output_size [oH, oW]) ----
std::vector<TensorMeta> meta_max_unpool2d(const OpCall& c) {
  const Tensor &x = c.in(0), &idx = c.in(1);
  auto os = c.attrs.ints(0);
  KILN_CHECK(x.defined() && idx.defined(), "max_unpool2d: expected defined input and indices tensors");
  KILN_CHECK(idx.dtype() == DType::Int64,
             "max_unpool2d: elements in indices should be type int64 but got: ", idx.dtype());
  KILN_CHECK(os.size() == 2,
             "max_unpool2d: There should be exactly two elements (height, width) in output_size, but got ", os.size(),
             " elements");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4,
             "max_unpool2d: Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor of shape ",
             shape_str(x.sizes()));
  KILN_CHECK(x.sizes() == idx.sizes(),
             "max_unpool2d: Expected shape of indices to be same as that of the input tensor (", shape_str(x.sizes()),
             ") but got indices tensor with shape: ", shape_str(idx.sizes()));
  for (int64_t i = 1; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0,
               "max_unpool2d: Expected input to have non-zero size for non-batch dimensions, but got ",
               shape_str(x.sizes()), " with dimension ", i, " being empty");
  KILN_CHECK(os[0] >= 0 && os[1] >= 0, "max_unpool2d: expected a non-negative output_size, got [", os[0], ", ", os[1],
             "]");
  Shape out = x.sizes().vec();
  out[out.size() - 2] = os[0];
  out[out.size() - 1] = os[1];
  return one_output(std::move(out), x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(max_unpool2d, meta_max_unpool2d);

// zeros [.., C, oH * oW], scatter x at the flat plane indices, view as [.., C, oH, oW]. A repeated
// index keeps one of the values written there, as torch's. An index outside the plane is torch's
// error, checked here in eager (index_values; a compiled call gets scatter's own check of it).
std::vector<Tensor> decomp_max_unpool2d(const OpCall& c) {
  meta_max_unpool2d(c);
  const Tensor &x = c.in(0), &idx = c.in(1);
  auto os = c.attrs.ints(0);
  int64_t plane = os[0] * os[1];
  for (int64_t v : index_values(idx))
    KILN_CHECK(v >= 0 && v < plane, "max_unpool2d: Found an invalid max index: ", v, " (output volumes are of size ",
               os[0], "x", os[1], ")");
  int64_t nd = x.dim();
  Tensor xf = flatten(x, nd - 2), idf = flatten(idx, nd - 2);
  Shape flat = xf.sizes().vec();
  flat.back() = plane;
  Tensor out = scatter(zeros(flat, TensorOptions(x.dtype()).device(x.device())), nd - 2, idf, xf);
  Shape os_full = x.sizes().vec();
  os_full[nd - 2] = os[0];
  os_full[nd - 1] = os[1];
  return {reshape(out, os_full)};
}
KILN_REGISTER_DECOMP(max_unpool2d, decomp_max_unpool2d);

// ---- fractional_max_pool2d: (x, random_samples; kernel_size, output_size) -> (out, indices) ----
std::vector<TensorMeta> meta_fractional_max_pool2d(const OpCall& c) {
  const Tensor &x = c.in(0), &rs = c.in(1);
  const char* op = "fractional_max_pool2d";
  auto ks = c.attrs.ints(0), os = c.attrs.ints(1);
  KILN_CHECK(x.defined() && rs.defined(), op, ": expected defined input and _random_samples tensors");
  KILN_CHECK(ks.size() == 2, op, ": kernel_size must either be a single int or a pair of ints, got ", ks.size(),
             " values");
  KILN_CHECK(os.size() == 2, op, ": output_size must either be a single int or a pair of ints, got ", os.size(),
             " values");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, op, ": Expected 3D or 4D tensor, but got: ", shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating point input, got dtype ", x.dtype());
  for (int64_t i = x.dim() - 3; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, op, ": Expected input to have non-zero size for non-batch dimensions, but got ",
               shape_str(x.sizes()), " with dimension ", i, " being empty");
  KILN_CHECK(ks[0] > 0 && ks[1] > 0, op, ": kernel_size must be greater than zero, got [", ks[0], ", ", ks[1], "]");
  KILN_CHECK(os[0] >= 0 && os[1] >= 0, op, ": output_size must be non-negative, got [", os[0], ", ", os[1], "]");
  int64_t h = x.sizes()[x.dim() - 2], w = x.sizes()[x.dim() - 1];
  KILN_CHECK(os[0] + ks[0] - 1 <= h, op, ": pool height ", ks[0], " too large relative to input height ", h,
             " for output height ", os[0]);
  KILN_CHECK(os[1] + ks[1] - 1 <= w, op, ": pool width ", ks[1], " too large relative to input width ", w,
             " for output width ", os[1]);
  int64_t n = x.dim() == 4 ? x.sizes()[0] : 1, ch = x.sizes()[x.dim() - 3];
  KILN_CHECK(rs.dtype() == x.dtype(), op, ": expected _random_samples of the input's dtype ", x.dtype(), ", got ",
             rs.dtype());
  KILN_CHECK(rs.dim() == 3 && rs.sizes()[0] == n && rs.sizes()[1] == ch && rs.sizes()[2] == 2, op,
             ": expected _random_samples of shape [", n, ", ", ch, ", 2] for input of shape ", shape_str(x.sizes()),
             ", got ", shape_str(rs.sizes()));
  Shape out = x.sizes().vec();
  out[out.size() - 2] = os[0];
  out[out.size() - 1] = os[1];
  Device dev = output_device(c.inputs);
  std::vector<TensorMeta> r = one_output(out, x.dtype(), dev);
  r.push_back(one_output(out, DType::Int64, dev)[0]);
  return r;
}
KILN_REGISTER_META(fractional_max_pool2d, meta_fractional_max_pool2d);

// Note [Fractional pooling regions]: the start of window i along a dim of size `in` with `out`
// windows of size `pool`, from that plane's sample s in [0, 1), as torch's generate_intervals:
// start_i = int((i + s) * alpha) - int(s * alpha), alpha = (in - pool) / (out - 1), the last window
// at in - pool. The arithmetic is in the input's dtype, as torch's, so that the same samples give
// torch's windows (float32 for float16/bfloat16: torch rounds each step to the reduced dtype, so
// its windows can differ there). Returns the starts as int64 [N, C, out].
Tensor interval_starts(const Tensor& s, int64_t in, int64_t out, int64_t pool) {
  Shape nc = {s.sizes()[0], s.sizes()[1]};
  Tensor last =
      full({nc[0], nc[1], std::min<int64_t>(out, 1)}, in - pool, TensorOptions(DType::Int64).device(s.device()));
  if (out <= 1) return last;
  Tensor i = arange(out - 1, TensorOptions(s.dtype()).device(s.device()));
  Tensor su = unsqueeze(s, 2);
  Tensor starts;
  if (s.dtype() == DType::Float64) {
    double a = static_cast<double>(in - pool) / static_cast<double>(out - 1);
    starts = ((i + su) * a).to(DType::Int64) - (su * a).to(DType::Int64);
  } else {
    float a = static_cast<float>(in - pool) / static_cast<float>(out - 1);
    starts = ((i + su) * static_cast<double>(a)).to(DType::Int64) - (su * static_cast<double>(a)).to(DType::Int64);
  }
  return cat({starts, last}, 2);
}

// Each window's flat plane positions (h * W + w for its pool_h x pool_w elements, row by row) are
// gathered from x's plane; the window's max and the position of its first maximum give out and
// indices, as torch's (a NaN is the maximum in both; with several NaNs in a window torch's index is
// the last one's, kiln's the first's). gather and max carry the gradient to that position.
std::vector<Tensor> decomp_fractional_max_pool2d(const OpCall& c) {
  meta_fractional_max_pool2d(c);
  const Tensor& x0 = c.in(0);
  auto ks = c.attrs.ints(0), os = c.attrs.ints(1);
  bool batched = x0.dim() == 4;
  Tensor x = batched ? x0 : unsqueeze(x0, 0);
  int64_t n = x.sizes()[0], ch = x.sizes()[1], h = x.sizes()[2], w = x.sizes()[3];
  TensorOptions lo = TensorOptions(DType::Int64).device(x.device());
  Tensor out, indices;
  if (n == 0 || os[0] == 0 || os[1] == 0) {
    Shape s = {n, ch, os[0], os[1]};
    out = zeros(s, TensorOptions(x.dtype()).device(x.device()));
    indices = zeros(s, lo);
  } else {
    Tensor rs = c.in(1);
    DType sd = rs.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    Tensor s = rs.to(sd);
    Tensor sh = interval_starts(select(s, 2, 1), h, os[0], ks[0]);  // [N, C, oH]
    Tensor sw = interval_starts(select(s, 2, 0), w, os[1], ks[1]);  // [N, C, oW]
    Tensor rows = unsqueeze(sh, 3) + arange(ks[0], lo);             // [N, C, oH, kH]
    Tensor cols = unsqueeze(sw, 3) + arange(ks[1], lo);             // [N, C, oW, kW]
    // [N, C, oH, oW, kH, kW] positions
    Tensor pos = reshape(rows, {n, ch, os[0], 1, ks[0], 1}) * w + reshape(cols, {n, ch, 1, os[1], 1, ks[1]});
    Tensor flat_pos = reshape(pos, {n, ch, os[0] * os[1] * ks[0] * ks[1]});
    Tensor vals = reshape(gather(reshape(x, {n, ch, h * w}), 2, flat_pos), {n, ch, os[0], os[1], ks[0] * ks[1]});
    auto [m, arg] = max(vals, 4, true);
    out = squeeze(m, {4});
    indices = squeeze(gather(reshape(pos, {n, ch, os[0], os[1], ks[0] * ks[1]}), 4, arg), {4});
  }
  if (!batched) {
    out = squeeze(out, {0});
    indices = squeeze(indices, {0});
  }
  return {out, indices};
}
KILN_REGISTER_DECOMP(fractional_max_pool2d, decomp_fractional_max_pool2d);

std::vector<int64_t> pair_of(IntArrayRef v, const char* op, const char* what) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what, " must be one int or a pair, got ", v.size(), " values");
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v.vec();
}

}  // namespace

Tensor channel_shuffle(const Tensor& x, int64_t groups) { return call_op1(OpId::channel_shuffle, {x}, {groups}); }

// torch.nn.functional._unpool_output_size: (in - 1) * stride - 2 * padding + kernel_size per dim, or
// output_size ([oH, oW] or [N, C, oH, oW]) when it lies strictly within stride of that.
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntArrayRef kernel_size, IntArrayRef stride,
                    IntArrayRef padding, std::optional<std::vector<int64_t>> output_size) {
  const char* op = "max_unpool2d";
  KILN_CHECK(x.defined(), op, ": expected a defined input tensor");
  auto k = pair_of(kernel_size, op, "kernel_size");
  auto st = stride.empty() ? k : pair_of(stride, op, "stride");
  auto pd = pair_of(padding, op, "padding");
  KILN_CHECK(x.dim() >= 2, op, ": expected a 3-D or 4-D input, got shape ", shape_str(x.sizes()));
  std::vector<int64_t> dflt(2), os;
  for (int d = 0; d < 2; ++d) dflt[d] = (x.sizes()[x.dim() - 2 + d] - 1) * st[d] + k[d] - 2 * pd[d];
  if (!output_size) {
    os = dflt;
  } else {
    os = *output_size;
    if (os.size() == 4) os = {os[2], os[3]};
    KILN_CHECK(os.size() == 2, op,
               ": output_size should be a sequence containing 2 or 4 elements, but it has a length of ",
               output_size->size());
    for (int d = 0; d < 2; ++d)
      KILN_CHECK(dflt[d] - st[d] < os[d] && os[d] < dflt[d] + st[d], op, ": invalid output_size [", os[0], ", ", os[1],
                 "] (dim ", d, " must be between ", dflt[d] - st[d], " and ", dflt[d] + st[d], ")");
  }
  return call_op1(OpId::max_unpool2d, {x, indices}, {os});
}

std::tuple<Tensor, Tensor> fractional_max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size,
                                                              std::optional<std::vector<int64_t>> output_size,
                                                              std::optional<std::vector<double>> output_ratio,
                                                              const Tensor& random_samples, Generator* gen) {
  const char* op = "fractional_max_pool2d";
  KILN_CHECK(x.defined(), op, ": expected a defined input tensor");
  KILN_CHECK(output_size || output_ratio, op, ": requires specifying either an output_size or an output_ratio");
  auto k = pair_of(kernel_size, op, "kernel_size");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, op, ": Expected 3D or 4D tensor, but got: ", shape_str(x.sizes()));
  std::vector<int64_t> os;
  if (output_size) {
    os = pair_of(*output_size, op, "output_size");
  } else {
    KILN_CHECK(output_ratio->size() == 1 || output_ratio->size() == 2, op,
               ": output_ratio must be one value or a pair, got ", output_ratio->size(), " values");
    double rh = (*output_ratio)[0], rw = output_ratio->back();
    os = {static_cast<int64_t>(static_cast<double>(x.sizes()[x.dim() - 2]) * rh),
          static_cast<int64_t>(static_cast<double>(x.sizes()[x.dim() - 1]) * rw)};
  }
  Tensor rs = random_samples;
  if (!rs.defined()) {  // torch.rand(N, C, 2) of the input's dtype, N = 1 without a batch dim
    int64_t n = x.dim() == 4 ? x.sizes()[0] : 1;
    rs = rand({n, x.sizes()[x.dim() - 3], 2}, TensorOptions(x.dtype()).device(x.device()), gen);
  }
  auto r = call_op(OpId::fractional_max_pool2d, {x, rs}, {k, os});
  return {r[0], r[1]};
}
Tensor fractional_max_pool2d(const Tensor& x, IntArrayRef kernel_size, std::optional<std::vector<int64_t>> output_size,
                             std::optional<std::vector<double>> output_ratio, const Tensor& random_samples,
                             Generator* gen) {
  return std::get<0>(fractional_max_pool2d_with_indices(x, kernel_size, std::move(output_size), std::move(output_ratio),
                                                        random_samples, gen));
}

}  // namespace kiln
