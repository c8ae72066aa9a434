// F.affine_grid and F.grid_sample as compositions of kiln ops (bmm, floor, gather, where, ...), written
// with torch 1.13's formulas (GridSampler.h's unnormalize/clip/reflect, AffineGridGenerator.cpp's base
// grid) so values and gradients (w.r.t. theta, input and grid) match torch's kernels.
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"

namespace kiln {

namespace {

// torch's linspace_from_neg_one: one step is the centre 0; without align_corners the points are
// the pixel centres, (n - 1) / n of the [-1, 1] span.
Tensor linspace_from_neg_one(int64_t n, bool align_corners, const TensorOptions& dt) {
  if (n <= 1) return zeros({n}, dt);  // torch: a 0 broadcast over the axis
  Tensor r = linspace(-1, 1, n, dt);
  if (!align_corners) r = r * static_cast<double>(n - 1) / static_cast<double>(n);
  return r;
}

std::string sizes_str(IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// unnormalize: [-1, 1] to pixel coordinates; the corners (align_corners) or the edges map to +-1.
Tensor grid_sampler_unnormalize(const Tensor& c, int64_t size, bool align_corners) {
  double s = static_cast<double>(size);
  if (align_corners) return (c + 1) / 2 * (s - 1);
  return ((c + 1) * s - 1) / 2;
}

// clip to [0, size - 1], NaN to 0 (as torch's kernel); the gradient is 0 on and past the borders, as
// torch's kernel (which treats the borders as out of bounds for the gradient), where clamp's passes it.
Tensor clip_coordinates(const Tensor& c, int64_t size) {
  double hi = static_cast<double>(size - 1);
  Tensor inside = logical_and(c > 0, c < hi);
  return where(inside, c, where(c > 0, clamp_max(c, hi), Scalar(0.0)).detach());
}

// Reflect c about the bounds twice_low / 2 and twice_high / 2 until it lies between them.
Tensor reflect_coordinates(const Tensor& c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high)
    return where(ones_like(c, TensorOptions(kBool)), Scalar(0.0), c);  // torch: 0, gradient 0
  double lo = static_cast<double>(twice_low) / 2;
  double span = static_cast<double>(twice_high - twice_low) / 2;
  Tensor in = abs(c - lo);
  Tensor extra = fmod(in, span);
  Tensor flips = floor(in / span).detach();
  return where(fmod(flips, 2) == 0, extra + lo, span - extra + lo);
}

// The padding of a pixel coordinate: clip (border), reflect then clip (reflection), as is (zeros).
Tensor compute_coordinates(Tensor x, int64_t size, const std::string& padding_mode, bool align_corners) {
  if (padding_mode == "border") {
    x = clip_coordinates(x, size);
  } else if (padding_mode == "reflection") {
    x = align_corners ? reflect_coordinates(x, 0, 2 * (size - 1)) : reflect_coordinates(x, -1, 2 * size - 1);
    x = clip_coordinates(x, size);
  }
  return x;
}

// torch's get_cubic_upsample_coefficients: the cubic convolution weights (A = -0.75) of the taps at
// -1, 0, 1, 2 from floor(x), for t = x - floor(x).
std::vector<Tensor> cubic_coefficients(const Tensor& t) {
  const double a = -0.75;
  auto conv1 = [&](const Tensor& x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto conv2 = [&](const Tensor& x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  Tensor t2 = 1 - t;
  return {conv2(t + 1), conv1(t), conv1(t2), conv2(t2 + 1)};
}

}  // namespace

Tensor affine_grid(const Tensor& theta, IntArrayRef size, bool align_corners) {
  const char* op = "affine_grid";
  KILN_CHECK(theta.defined(), op, ": theta must be defined");
  KILN_CHECK(is_floating_point(theta.dtype()), op, ": Expected theta to have floating point type, but got ",
             theta.dtype());
  std::vector<int64_t> sz(size.begin(), size.end());
  if (sz.size() == 4) {
    KILN_CHECK(theta.dim() == 3 && theta.size(1) == 2 && theta.size(2) == 3, op,
               ": Expected a batch of 2D affine matrices of shape Nx2x3 for size ", sizes_str(sz), ". Got ",
               sizes_str(theta.sizes().vec()), ".");
  } else if (sz.size() == 5) {
    KILN_CHECK(theta.dim() == 3 && theta.size(1) == 3 && theta.size(2) == 4, op,
               ": Expected a batch of 3D affine matrices of shape Nx3x4 for size ", sizes_str(sz), ". Got ",
               sizes_str(theta.sizes().vec()), ".");
  } else {
    KILN_CHECK(false, op,
               ": affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
               "respectively. Got size ",
               sizes_str(sz), ".");
  }
  // torch lets a spatial size of 1 through with align_corners (a warning), else all sizes must be > 0.
  bool span_one = false;
  for (size_t i = 2; i < sz.size(); ++i) span_one = span_one || sz[i] == 1;
  if (!(align_corners && span_one))
    for (int64_t s : sz) KILN_CHECK(s > 0, op, ": Expected non-zero, positive output size. Got ", sizes_str(sz));
  int64_t n = sz[0];
  KILN_CHECK(theta.size(0) == n, op, ": expected theta's batch size ", theta.size(0), " to equal size[0] = ", n);
  TensorOptions dt = TensorOptions().dtype(theta.dtype()).device(theta.device());
  // The base grid holds (x, y[, z], 1) per output point: x runs along W, y along H, z along D.
  std::vector<Tensor> parts;
  int64_t k = static_cast<int64_t>(sz.size()) - 2;
  std::vector<int64_t> spatial(sz.begin() + 2, sz.end());
  int64_t points = 1;
  for (int64_t s : spatial) points *= s;
  for (int64_t d = 0; d < k; ++d) {
    int64_t axis = k - 1 - d;  // x is the last spatial dim
    std::vector<int64_t> shape(static_cast<size_t>(k), 1);
    shape[static_cast<size_t>(axis)] = spatial[static_cast<size_t>(axis)];
    Tensor l = linspace_from_neg_one(spatial[static_cast<size_t>(axis)], align_corners, dt);
    parts.push_back(l.reshape(shape).expand(spatial));
  }
  parts.push_back(ones(spatial, dt));
  Tensor base = stack(parts, -1).reshape({1, points, k + 1}).expand({n, points, k + 1});
  std::vector<int64_t> out_shape = {n};
  out_shape.insert(out_shape.end(), spatial.begin(), spatial.end());
  out_shape.push_back(k);
  return bmm(base, theta.transpose(1, 2)).view(out_shape);
}

Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode, const std::string& padding_mode,
                   bool align_corners) {
  const char* op = "grid_sample";
  KILN_CHECK(input.defined() && grid.defined(), op, ": input and grid must be defined");
  KILN_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", op,
             ": expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '", mode, "'");
  KILN_CHECK(padding_mode == "zeros" || padding_mode == "border" || padding_mode == "reflection", op,
             ": expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '", padding_mode, "'");
  KILN_CHECK(input.dtype() == grid.dtype(), op, ": expected input and grid to have same dtype, but input has ",
             input.dtype(), " and grid has ", grid.dtype());
  KILN_CHECK(input.dim() == grid.dim() && (input.dim() == 4 || input.dim() == 5), op,
             ": expected 4D or 5D input and grid with same number of dimensions, but got input with sizes ",
             sizes_str(input.sizes().vec()), " and grid with sizes ", sizes_str(grid.sizes().vec()));
  KILN_CHECK(is_floating_point(input.dtype()), op, ": expected a floating-point input, got ", input.dtype());
  KILN_CHECK(input.size(0) == grid.size(0), op,
             ": expected grid and input to have same batch size, but got input with sizes ",
             sizes_str(input.sizes().vec()), " and grid with sizes ", sizes_str(grid.sizes().vec()));
  int64_t k = input.dim() - 2;
  KILN_CHECK(grid.size(-1) == k, op, ": expected grid to have size ", k, " in last dimension, but got grid with sizes ",
             sizes_str(grid.sizes().vec()));
  for (int64_t i = 2; i < input.dim(); ++i)
    KILN_CHECK(input.size(i) > 0, op, ": expected input to have non-empty spatial dimensions, but input has sizes ",
               sizes_str(input.sizes().vec()), " with dimension ", i, " being empty");
  KILN_CHECK(mode != "bicubic" || k == 2, op, ": bicubic interpolation only supports 4D input");

  int64_t n = input.size(0), c = input.size(1);
  std::vector<int64_t> out_spatial = grid.sizes().vec();
  out_spatial.pop_back();
  out_spatial.erase(out_spatial.begin());
  int64_t points = 1;
  for (int64_t s : out_spatial) points *= s;
  int64_t plane = 1;
  for (int64_t i = 2; i < input.dim(); ++i) plane *= input.size(i);
  Tensor flat = input.reshape({n, c, plane});
  Tensor g = grid.reshape({n, points, k});

  // Per grid coordinate d (x, y[, z]): its input dim's size, its stride in the flattened plane, and
  // its source coordinate in pixels.
  std::vector<int64_t> sizes, strides;
  std::vector<Tensor> src;
  int64_t stride = 1;
  for (int64_t d = 0; d < k; ++d) {
    int64_t size = input.size(input.dim() - 1 - d);
    sizes.push_back(size);
    strides.push_back(stride);
    stride *= size;
    Tensor x = grid_sampler_unnormalize(select(g, 2, d), size, align_corners);
    // bicubic pads its taps, not the source coordinate
    src.push_back(mode == "bicubic" ? x : compute_coordinates(x, size, padding_mode, align_corners));
  }

  // The values at integer (float-valued) corner coordinates, 0 where the corner lies outside the
  // input: gather at the clamped flat index, then mask.
  auto corner = [&](const std::vector<Tensor>& at, const Tensor& weight) {
    Tensor valid, index;
    for (int64_t d = 0; d < k; ++d) {
      const Tensor& i = at[static_cast<size_t>(d)];
      double hi = static_cast<double>(sizes[static_cast<size_t>(d)] - 1);
      Tensor ok = logical_and(i >= 0, i <= hi);
      valid = valid.defined() ? logical_and(valid, ok) : ok;
      Tensor ic = clamp(nan_to_num(i, 0.0, 0.0, 0.0), Scalar(0.0), Scalar(hi)).to(kInt64);
      Tensor term = ic * strides[static_cast<size_t>(d)];
      index = index.defined() ? index + term : term;
    }
    Tensor vals = gather(flat, 2, index.unsqueeze(1).expand({n, c, points}));
    // The weight multiplies the masked value, so a NaN/inf coordinate's NaN weight gives NaN, as torch.
    Tensor v = where(valid.unsqueeze(1), vals, Scalar(0.0));
    return weight.defined() ? weight.unsqueeze(1) * v : v;
  };

  Tensor out;
  if (mode == "nearest") {
    std::vector<Tensor> at;
    for (const Tensor& s : src) at.push_back(round(s).detach());  // half to even, as torch's nearbyint
    // torch's grid gradient is zeros here: a term of value 0 and gradient 0 keeps grid in the graph.
    Tensor zero = where(ones_like(src[0], TensorOptions(kBool)), Scalar(0.0), src[0]);
    for (size_t d = 1; d < src.size(); ++d)
      zero = zero + where(ones_like(src[d], TensorOptions(kBool)), Scalar(0.0), src[d]);
    out = corner(at, Tensor()) + zero.unsqueeze(1);
  } else if (mode == "bicubic") {
    // 4 x 4 taps around floor(x, y), each padded and gathered; rows interpolated along x, then the
    // four row values along y, as torch.
    Tensor lx = floor(src[0]).detach(), ly = floor(src[1]).detach();
    std::vector<Tensor> cx = cubic_coefficients(src[0] - lx), cy = cubic_coefficients(src[1] - ly);
    std::vector<Tensor> tx, ty;
    for (int64_t i = 0; i < 4; ++i) {
      tx.push_back(compute_coordinates(lx + (i - 1), sizes[0], padding_mode, align_corners));
      ty.push_back(compute_coordinates(ly + (i - 1), sizes[1], padding_mode, align_corners));
    }
    for (size_t j = 0; j < 4; ++j) {
      Tensor row;
      for (size_t i = 0; i < 4; ++i) {
        Tensor term = corner({tx[i], ty[j]}, cx[i]);
        row = row.defined() ? row + term : term;
      }
      Tensor term = row * cy[j].unsqueeze(1);
      out = out.defined() ? out + term : term;
    }
  } else {
    // Bilinear / trilinear: the 2^k corners, x varying fastest (torch's nw, ne, sw, se order); each
    // weight is the product of (1 - distance) along every axis, floor() being a constant.
    std::vector<Tensor> lo;
    for (const Tensor& s : src) lo.push_back(floor(s).detach());
    for (int64_t m = 0; m < (int64_t{1} << k); ++m) {
      std::vector<Tensor> at;
      Tensor w;
      for (int64_t d = 0; d < k; ++d) {
        const Tensor& s = src[static_cast<size_t>(d)];
        const Tensor& l = lo[static_cast<size_t>(d)];
        bool upper = (m >> d) & 1;
        Tensor wd = upper ? s - l : (l + 1) - s;
        at.push_back(upper ? l + 1 : l);
        w = w.defined() ? w * wd : wd;
      }
      Tensor term = corner(at, w);
      out = out.defined() ? out + term : term;
    }
  }
  std::vector<int64_t> out_shape = {n, c};
  out_shape.insert(out_shape.end(), out_spatial.begin(), out_spatial.end());
  return out.reshape(out_shape);
}

}  // namespace kiln
