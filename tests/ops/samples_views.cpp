// Samples for view ops and sum (the op table's core). References index the
// input directly with the view's definition.
#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kAllTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool};

// A reference view: out[idx] = x[map(idx)], built with naive loops.
Tensor ref_gather(const Tensor& x, const Shape& out_shape, const std::function<Shape(const Shape&)>& map) {
  Ref rx = Ref::of(x);
  Ref out(out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = rx.at(map(unravel(i, out_shape)));
  return out.to(x.dtype());
}

OpSample view_sample(const std::string& name, Tensor x, OpFn fn, Shape out_shape,
                     std::function<Shape(const Shape&)> map) {
  OpSample s;
  s.name = name + " " + std::string(dtype_name(x.dtype()));
  s.inputs = {x};
  s.fn = std::move(fn);
  s.reference = [out_shape, map](const TensorList& in) { return TensorList{ref_gather(in[0], out_shape, map)}; };
  return s;
}

std::vector<OpSample> view_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes) {
    v.push_back(view_sample("3x4 -> 2x6", make_input({3, 4}, t, 1), [](const TensorList& in) {
      return TensorList{in[0].view({2, 6})}; }, {2, 6}, [](const Shape& i) { return unravel(i[0] * 6 + i[1], {3, 4}); }));
  }
  v.push_back(view_sample("infer -1", make_input({2, 3, 4}, kFloat64, 2), [](const TensorList& in) {
    return TensorList{in[0].view({-1, 4})}; }, {6, 4}, [](const Shape& i) { return unravel(i[0] * 4 + i[1], {2, 3, 4}); }));
  v.push_back(view_sample("0-d to [1]", make_input({}, kFloat64, 3), [](const TensorList& in) {
    return TensorList{in[0].view({1})}; }, {1}, [](const Shape&) { return Shape{}; }));
  v.push_back(view_sample("empty", make_input({0, 3}, kFloat32, 3), [](const TensorList& in) {
    return TensorList{in[0].view({3, 0})}; }, {3, 0}, [](const Shape& i) { return i; }));
  v.push_back(view_sample("non-contiguous compatible", make_input({4, 6}, kFloat64, 4, -2, 2, true),
                          [](const TensorList& in) { return TensorList{in[0].view({4, 2, 3})}; }, {4, 2, 3},
                          [](const Shape& i) { return Shape{i[0], i[1] * 3 + i[2]}; }));
  return v;
}
std::vector<ErrorSample> view_errors() {
  return {{"wrong numel", [] { make_input({3, 4}, kFloat32, 1).view({5}); }, "invalid for input of size 12"},
          {"two -1", [] { make_input({3, 4}, kFloat32, 1).view({-1, -1}); }, "only one dimension"},
          {"incompatible strides", [] { make_input({3, 4}, kFloat32, 1).t().view({12}); }, "reshape"}};
}
KILN_OP_SAMPLES(view, view_samples, view_errors);

std::vector<OpSample> reshape_samples() {
  std::vector<OpSample> v;
  v.push_back(view_sample("transposed needs a copy", make_input({3, 4}, kFloat64, 5), [](const TensorList& in) {
    return TensorList{in[0].t().reshape({12})}; }, {12}, [](const Shape& i) { return Shape{i[0] % 3, i[0] / 3}; }));
  for (DType t : kAllTypes)
    v.push_back(view_sample("contiguous", make_input({2, 6}, t, 6), [](const TensorList& in) {
      return TensorList{in[0].reshape({3, -1})}; }, {3, 4}, [](const Shape& i) { return unravel(i[0] * 4 + i[1], {2, 6}); }));
  // Viewable non-contiguous inputs give views with their strides and offset
  // (Note [Meta strides of reshape-like ops]).
  v.push_back(view_sample(
      "non-contiguous viewable", make_input({4, 6}, kFloat64, 4, -2, 2, true),
      [](const TensorList& in) {
        return TensorList{in[0].reshape({4, 2, 3})};
      },
      {4, 2, 3},
      [](const Shape& i) {
        return Shape{i[0], i[1] * 3 + i[2]};
      }));
  v.push_back(view_sample(
      "narrowed (offset) viewable", make_input({3, 6}, kFloat64, 5),
      [](const TensorList& in) {
        return TensorList{in[0].narrow(1, 2, 4).reshape({3, 2, 2})};
      },
      {3, 2, 2},
      [](const Shape& i) {
        return Shape{i[0], 2 + i[1] * 2 + i[2]};
      }));
  return v;
}
std::vector<ErrorSample> reshape_errors() {
  return {{"wrong numel", [] { make_input({3, 4}, kFloat32, 1).reshape({7}); }, "reshape"}};
}
KILN_OP_SAMPLES(reshape, reshape_samples, reshape_errors);

std::vector<OpSample> permute_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("3-d", make_input({2, 3, 4}, t, 7), [](const TensorList& in) {
      return TensorList{in[0].permute({2, 0, 1})}; }, {4, 2, 3}, [](const Shape& i) { return Shape{i[1], i[2], i[0]}; }));
  v.push_back(view_sample("negative dims", make_input({2, 3}, kFloat64, 8), [](const TensorList& in) {
    return TensorList{in[0].permute({-1, 0})}; }, {3, 2}, [](const Shape& i) { return Shape{i[1], i[0]}; }));
  v.push_back(view_sample("0-d", make_input({}, kFloat64, 8), [](const TensorList& in) {
    return TensorList{in[0].permute({})}; }, {}, [](const Shape& i) { return i; }));
  return v;
}
std::vector<ErrorSample> permute_errors() {
  return {{"repeated dim", [] { make_input({2, 3}, kFloat32, 1).permute({0, 0}); }, "repeated dim"},
          {"wrong length", [] { make_input({2, 3}, kFloat32, 1).permute({0}); }, "doesn't match"},
          {"out of range", [] { make_input({2, 3}, kFloat32, 1).permute({0, 2}); }, "out of range"}};
}
KILN_OP_SAMPLES(permute, permute_samples, permute_errors);

std::vector<OpSample> expand_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("[3,1] -> [2,3,4]", make_input({3, 1}, t, 9), [](const TensorList& in) {
      return TensorList{in[0].expand({2, 3, 4})}; }, {2, 3, 4}, [](const Shape& i) { return Shape{i[1], 0}; }));
  v.push_back(view_sample("-1 keeps", make_input({3, 1}, kFloat64, 9), [](const TensorList& in) {
    return TensorList{in[0].expand({-1, 5})}; }, {3, 5}, [](const Shape& i) { return Shape{i[0], 0}; }));
  v.push_back(view_sample("0-d", make_input({}, kFloat64, 9), [](const TensorList& in) {
    return TensorList{in[0].expand({2, 2})}; }, {2, 2}, [](const Shape&) { return Shape{}; }));
  return v;
}
std::vector<ErrorSample> expand_errors() {
  return {{"non-singleton", [] { make_input({3, 2}, kFloat32, 1).expand({3, 4}); }, "must match the existing size"},
          {"fewer dims", [] { make_input({3, 2}, kFloat32, 1).expand({2}); }, "must be greater or equal"}};
}
KILN_OP_SAMPLES(expand, expand_samples, expand_errors);

std::vector<OpSample> squeeze_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("all", make_input({1, 3, 1, 2}, t, 10), [](const TensorList& in) {
      return TensorList{in[0].squeeze()}; }, {3, 2}, [](const Shape& i) { return Shape{0, i[0], 0, i[1]}; }));
  v.push_back(view_sample("one dim", make_input({1, 3, 1}, kFloat64, 10), [](const TensorList& in) {
    return TensorList{in[0].squeeze(-1)}; }, {1, 3}, [](const Shape& i) { return Shape{0, i[1], 0}; }));
  v.push_back(view_sample("non-1 dim is kept", make_input({2, 3}, kFloat64, 10), [](const TensorList& in) {
    return TensorList{in[0].squeeze(0)}; }, {2, 3}, [](const Shape& i) { return i; }));
  return v;
}
std::vector<ErrorSample> squeeze_errors() {
  return {{"dim out of range", [] { make_input({2, 3}, kFloat32, 1).squeeze(2); }, "out of range"}};
}
KILN_OP_SAMPLES(squeeze, squeeze_samples, squeeze_errors);

std::vector<OpSample> unsqueeze_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("middle", make_input({2, 3}, t, 11), [](const TensorList& in) {
      return TensorList{in[0].unsqueeze(1)}; }, {2, 1, 3}, [](const Shape& i) { return Shape{i[0], i[2]}; }));
  v.push_back(view_sample("end (-1)", make_input({2, 3}, kFloat64, 11), [](const TensorList& in) {
    return TensorList{in[0].unsqueeze(-1)}; }, {2, 3, 1}, [](const Shape& i) { return Shape{i[0], i[1]}; }));
  v.push_back(view_sample("0-d", make_input({}, kFloat64, 11), [](const TensorList& in) {
    return TensorList{in[0].unsqueeze(0)}; }, {1}, [](const Shape&) { return Shape{}; }));
  return v;
}
std::vector<ErrorSample> unsqueeze_errors() {
  return {{"dim out of range", [] { make_input({2, 3}, kFloat32, 1).unsqueeze(3); }, "out of range"}};
}
KILN_OP_SAMPLES(unsqueeze, unsqueeze_samples, unsqueeze_errors);

std::vector<OpSample> select_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("dim 1", make_input({3, 4}, t, 12), [](const TensorList& in) {
      return TensorList{in[0].select(1, 2)}; }, {3}, [](const Shape& i) { return Shape{i[0], 2}; }));
  v.push_back(view_sample("negative index", make_input({3, 4}, kFloat64, 12, -2, 2, true), [](const TensorList& in) {
    return TensorList{in[0].select(0, -1)}; }, {4}, [](const Shape& i) { return Shape{2, i[0]}; }));
  return v;
}
std::vector<ErrorSample> select_errors() {
  return {{"index out of range", [] { make_input({3, 4}, kFloat32, 1).select(0, 3); }, "out of range"},
          {"0-d", [] { make_input({}, kFloat32, 1).select(0, 0); }, "0-dim"}};
}
KILN_OP_SAMPLES(select, select_samples, select_errors);

std::vector<OpSample> slice_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("1:4", make_input({5, 3}, t, 13), [](const TensorList& in) {
      return TensorList{in[0].slice(0, 1, 4)}; }, {3, 3}, [](const Shape& i) { return Shape{i[0] + 1, i[1]}; }));
  v.push_back(view_sample("step 2", make_input({3, 7}, kFloat64, 13), [](const TensorList& in) {
    return TensorList{in[0].slice(1, 1, std::nullopt, 2)}; }, {3, 3}, [](const Shape& i) { return Shape{i[0], 1 + 2 * i[1]}; }));
  v.push_back(view_sample("negative start, clamped end", make_input({6}, kFloat64, 13), [](const TensorList& in) {
    return TensorList{in[0].slice(0, -4, 100)}; }, {4}, [](const Shape& i) { return Shape{i[0] + 2}; }));
  v.push_back(view_sample("empty result", make_input({6}, kFloat64, 13), [](const TensorList& in) {
    return TensorList{in[0].slice(0, 4, 2)}; }, {0}, [](const Shape& i) { return i; }));
  v.push_back(view_sample("non-contiguous step 3", make_input({2, 8}, kFloat64, 13, -2, 2, true),
                          [](const TensorList& in) { return TensorList{in[0].slice(1, 0, 8, 3)}; }, {2, 3},
                          [](const Shape& i) { return Shape{i[0], 3 * i[1]}; }));
  return v;
}
std::vector<ErrorSample> slice_errors() {
  return {{"zero step", [] { make_input({3}, kFloat32, 1).slice(0, 0, 2, 0); }, "step must be positive"}};
}
KILN_OP_SAMPLES(slice, slice_samples, slice_errors);

std::vector<OpSample> diagonal_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("main", make_input({3, 4}, t, 14), [](const TensorList& in) {
      return TensorList{in[0].diagonal()}; }, {3}, [](const Shape& i) { return Shape{i[0], i[0]}; }));
  v.push_back(view_sample("offset 1", make_input({3, 4}, kFloat64, 14), [](const TensorList& in) {
    return TensorList{in[0].diagonal(1)}; }, {3}, [](const Shape& i) { return Shape{i[0], i[0] + 1}; }));
  v.push_back(view_sample("offset -1, batched dims 1,2", make_input({2, 3, 3}, kFloat64, 14), [](const TensorList& in) {
    return TensorList{in[0].diagonal(-1, 1, 2)}; }, {2, 2}, [](const Shape& i) { return Shape{i[0], i[1] + 1, i[1]}; }));
  return v;
}
std::vector<ErrorSample> diagonal_errors() {
  return {{"same dims", [] { make_input({3, 3}, kFloat32, 1).diagonal(0, 1, 1); }, "cannot be identical"},
          {"1-d", [] { make_input({3}, kFloat32, 1).diagonal(); }, "at least 2 dims"}};
}
KILN_OP_SAMPLES(diagonal, diagonal_samples, diagonal_errors);

std::vector<OpSample> as_strided_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes) {
    OpSample s = view_sample("sliding windows", make_input({6}, t, 15), [](const TensorList& in) {
      return TensorList{in[0].as_strided({4, 3}, {1, 1})}; }, {4, 3}, [](const Shape& i) { return Shape{i[0] + i[1]}; });
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> as_strided_errors() {
  return {{"out of bounds", [] { make_input({6}, kFloat32, 1).as_strided({4}, {2}); }, "out of bounds"},
          {"length mismatch", [] { make_input({6}, kFloat32, 1).as_strided({2, 2}, {1}); }, "mismatch"}};
}
KILN_OP_SAMPLES(as_strided, as_strided_samples, as_strided_errors);

std::vector<OpSample> transpose_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("0,2", make_input({2, 3, 4}, t, 16), [](const TensorList& in) {
      return TensorList{in[0].transpose(0, 2)}; }, {4, 3, 2}, [](const Shape& i) { return Shape{i[2], i[1], i[0]}; }));
  return v;
}
KILN_OP_SAMPLES(transpose, transpose_samples, nullptr);

std::vector<OpSample> t_samples() {
  std::vector<OpSample> v;
  v.push_back(view_sample("2-d", make_input({2, 3}, kFloat64, 17), [](const TensorList& in) {
    return TensorList{in[0].t()}; }, {3, 2}, [](const Shape& i) { return Shape{i[1], i[0]}; }));
  v.push_back(view_sample("1-d unchanged", make_input({3}, kInt64, 17), [](const TensorList& in) {
    return TensorList{in[0].t()}; }, {3}, [](const Shape& i) { return i; }));
  return v;
}
std::vector<ErrorSample> t_errors() {
  return {{"3-d", [] { make_input({2, 2, 2}, kFloat32, 1).t(); }, "<= 2 dimensions"}};
}
KILN_OP_SAMPLES(t, t_samples, t_errors);

std::vector<OpSample> narrow_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("dim 1", make_input({2, 5}, t, 18), [](const TensorList& in) {
      return TensorList{in[0].narrow(1, 1, 3)}; }, {2, 3}, [](const Shape& i) { return Shape{i[0], i[1] + 1}; }));
  return v;
}
std::vector<ErrorSample> narrow_errors() {
  return {{"too long", [] { make_input({2, 5}, kFloat32, 1).narrow(1, 3, 3); }, "exceeds dimension size"}};
}
KILN_OP_SAMPLES(narrow, narrow_samples, narrow_errors);

std::vector<OpSample> expand_as_samples() {
  OpSample s = view_sample("[3,1] as [3,4]", make_input({3, 1}, kFloat64, 19), [](const TensorList& in) {
    return TensorList{in[0].expand_as(zeros({3, 4}))}; }, {3, 4}, [](const Shape& i) { return Shape{i[0], 0}; });
  return {s};
}
KILN_OP_SAMPLES(expand_as, expand_as_samples, nullptr);

std::vector<OpSample> flatten_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes)
    v.push_back(view_sample("dims 1..2", make_input({2, 3, 4}, t, 20), [](const TensorList& in) {
      return TensorList{in[0].flatten(1)}; }, {2, 12}, [](const Shape& i) { return Shape{i[0], i[1] / 4, i[1] % 4}; }));
  v.push_back(view_sample("0-d", make_input({}, kFloat64, 20), [](const TensorList& in) {
    return TensorList{in[0].flatten()}; }, {1}, [](const Shape&) { return Shape{}; }));
  v.push_back(view_sample(
      "noncontig dims 1..2 (a view)", make_input({2, 3, 4}, kFloat64, 20, -2, 2, true),
      [](const TensorList& in) { return TensorList{in[0].flatten(1)}; }, {2, 12},
      [](const Shape& i) {
        return Shape{i[0], i[1] / 4, i[1] % 4};
      }));
  v.push_back(view_sample(
      "of a transpose (a copy)", make_input({2, 3, 4}, kFloat64, 20),
      [](const TensorList& in) { return TensorList{in[0].transpose(0, 1).flatten(0, 1)}; }, {6, 4},
      [](const Shape& i) {
        return Shape{i[0] % 2, i[0] / 2, i[1]};
      }));
  return v;
}
std::vector<ErrorSample> flatten_errors() {
  return {{"start after end", [] { make_input({2, 3, 4}, kFloat32, 1).flatten(2, 1); }, "cannot come after"}};
}
KILN_OP_SAMPLES(flatten, flatten_samples, flatten_errors);

std::vector<OpSample> unflatten_samples() {
  return {view_sample("dim 1 -> (2,-1)", make_input({3, 6}, kFloat64, 21), [](const TensorList& in) {
    return TensorList{in[0].unflatten(1, {2, -1})}; }, {3, 2, 3}, [](const Shape& i) { return Shape{i[0], i[1] * 3 + i[2]}; })};
}
KILN_OP_SAMPLES(unflatten, unflatten_samples, nullptr);

// Multi-output views: references are the slices/selects they stand for.
std::vector<OpSample> split_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat64, kInt32, kBool}) {
    OpSample s;
    s.name = std::string("split_size 2 of 5, ") + std::string(dtype_name(t));
    s.inputs = {make_input({5, 2}, t, 22)};
    s.fn = [](const TensorList& in) { return in[0].split(2, 0); };
    s.reference = [](const TensorList& in) {
      return TensorList{ref_gather(in[0], {2, 2}, [](const Shape& i) { return i; }),
                        ref_gather(in[0], {2, 2}, [](const Shape& i) { return Shape{i[0] + 2, i[1]}; }),
                        ref_gather(in[0], {1, 2}, [](const Shape& i) { return Shape{i[0] + 4, i[1]}; })};
    };
    v.push_back(s);
  }
  OpSample s;
  s.name = "sizes {1,2} along dim 1";
  s.inputs = {make_input({2, 3}, kFloat64, 23)};
  s.fn = [](const TensorList& in) { return in[0].split(std::vector<int64_t>{1, 2}, 1); };
  s.reference = [](const TensorList& in) {
    return TensorList{ref_gather(in[0], {2, 1}, [](const Shape& i) { return i; }),
                      ref_gather(in[0], {2, 2}, [](const Shape& i) { return Shape{i[0], i[1] + 1}; })};
  };
  v.push_back(s);
  return v;
}
std::vector<ErrorSample> split_errors() {
  return {{"sizes don't sum", [] { make_input({5}, kFloat32, 1).split(std::vector<int64_t>{2, 2}); }, "must sum"}};
}
KILN_OP_SAMPLES(split, split_samples, split_errors);

std::vector<OpSample> chunk_samples() {
  OpSample s;
  s.name = "3 chunks of 7";
  s.inputs = {make_input({7}, kFloat64, 24)};
  s.fn = [](const TensorList& in) { return in[0].chunk(3); };
  s.reference = [](const TensorList& in) {
    return TensorList{ref_gather(in[0], {3}, [](const Shape& i) { return i; }),
                      ref_gather(in[0], {3}, [](const Shape& i) { return Shape{i[0] + 3}; }),
                      ref_gather(in[0], {1}, [](const Shape& i) { return Shape{i[0] + 6}; })};
  };
  return {s};
}
std::vector<ErrorSample> chunk_errors() {
  return {{"zero chunks", [] { make_input({5}, kFloat32, 1).chunk(0); }, "greater than 0"}};
}
KILN_OP_SAMPLES(chunk, chunk_samples, chunk_errors);

std::vector<OpSample> unbind_samples() {
  OpSample s;
  s.name = "dim 1";
  s.inputs = {make_input({2, 3}, kFloat64, 25)};
  s.fn = [](const TensorList& in) { return in[0].unbind(1); };
  s.reference = [](const TensorList& in) {
    TensorList r;
    for (int64_t j = 0; j < 3; ++j) r.push_back(ref_gather(in[0], {2}, [j](const Shape& i) { return Shape{i[0], j}; }));
    return r;
  };
  return {s};
}
KILN_OP_SAMPLES(unbind, unbind_samples, nullptr);

std::vector<OpSample> contiguous_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes) {
    OpSample s = view_sample("of a transpose", make_input({3, 4}, t, 26), [](const TensorList& in) {
      return TensorList{in[0].t().contiguous()}; }, {4, 3}, [](const Shape& i) { return Shape{i[1], i[0]}; });
    s.check = [](const TensorList& out) { EXPECT_TRUE(out[0].is_contiguous()); };
    v.push_back(s);
  }
  OpSample same = view_sample(
      "of a contiguous tensor is the tensor", make_input({3, 4}, kFloat64, 26),
      [](const TensorList& in) { return TensorList{in[0].contiguous()}; }, {3, 4}, [](const Shape& i) { return i; });
  same.check = [x = same.inputs[0]](const TensorList& out) { EXPECT_TRUE(out[0].is_same(x)); };
  v.push_back(same);
  v.push_back(view_sample(
      "noncontig", make_input({3, 4}, kFloat64, 26, -2, 2, true),
      [](const TensorList& in) { return TensorList{in[0].contiguous()}; }, {3, 4}, [](const Shape& i) { return i; }));
  return v;
}
KILN_OP_SAMPLES(contiguous, contiguous_samples, nullptr);

// sum: the basic reduction every VJP uses (reductions have more samples elsewhere).
std::vector<OpSample> sum_samples() {
  std::vector<OpSample> v;
  for (DType t : kAllTypes) {
    for (bool keep : {false, true}) {
      OpSample s;
      s.name = std::string("dim 1 keepdim=") + (keep ? "1 " : "0 ") + std::string(dtype_name(t));
      s.inputs = {make_input({3, 4, 2}, t, 27)};
      s.fn = [keep](const TensorList& in) { return TensorList{in[0].sum({1}, keep)}; };
      s.reference = [keep, t](const TensorList& in) {
        Ref r = ref_reduce(Ref::of(in[0]), {1}, keep, 0.0, [](double a, double x) { return a + x; });
        return TensorList{r.to(is_integral(t, true) ? kInt64 : t)};
      };
      if (t == kFloat16 || t == kBFloat16) s.rtol = 1e-2;
      v.push_back(s);
    }
  }
  OpSample all;
  all.name = "all dims, non-contiguous";
  all.inputs = {make_input({4, 6}, kFloat64, 28, -2, 2, true)};
  all.fn = [](const TensorList& in) { return TensorList{in[0].sum()}; };
  all.reference = [](const TensorList& in) {
    return TensorList{ref_reduce(Ref::of(in[0]), {}, false, 0.0, [](double a, double x) { return a + x; }).to(kFloat64)};
  };
  v.push_back(all);
  OpSample empty;
  empty.name = "empty";
  empty.inputs = {make_input({0, 3}, kFloat32, 29)};
  empty.fn = [](const TensorList& in) { return TensorList{in[0].sum({0})}; };
  empty.reference = [](const TensorList&) { return TensorList{Ref({3}, 0.0).to(kFloat32)}; };
  v.push_back(empty);
  return v;
}
std::vector<ErrorSample> sum_errors() {
  return {{"dim out of range", [] { make_input({2, 3}, kFloat32, 1).sum({2}); }, "out of range"},
          {"repeated dim", [] { make_input({2, 3}, kFloat32, 1).sum({1, -1}); }, "multiple times"}};
}
KILN_OP_SAMPLES(sum, sum_samples, sum_errors);

// ---- atleast_1d / atleast_2d / atleast_3d ----
Shape atleast_shape(Shape s, size_t n) {
  if (n == 3 && s.size() == 1) return {1, s[0], 1};
  if (n == 3 && s.size() == 2) return {s[0], s[1], 1};
  while (s.size() < n) s.insert(s.begin(), 1);
  return s;
}
template <size_t N>
std::vector<OpSample> atleast_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {x};
    o.fn = [](const TensorList& in) {
      return TensorList{N == 1 ? atleast_1d(in[0]) : N == 2 ? atleast_2d(in[0]) : atleast_3d(in[0])};
    };
    o.reference = [](const TensorList& in) {
      Ref r = Ref::of(in[0]);
      r.shape = atleast_shape(r.shape, N);
      return TensorList{r.to(in[0].dtype())};
    };
    v.push_back(o);
  };
  add("0-d float32", make_input({}, kFloat32, 1));
  add("1-D float64 [3]", make_input({3}, kFloat64, 2));
  add("2-D float32 [2,3]", make_input({2, 3}, kFloat32, 3));
  add("3-D int64 [2,3,4]", make_input({2, 3, 4}, kInt64, 4, -9, 9));
  add("4-D float32 [1,2,1,3]", make_input({1, 2, 1, 3}, kFloat32, 5));
  add("noncontig float32 [4,3]", make_input({4, 3}, kFloat32, 6, -2, 2, true));
  add("empty [0]", make_input({0}, kFloat32, 7));
  add("bool [2]", make_input({2}, kBool, 8));
  OpSample list;  // the list form applies it to each tensor
  list.name = "list form";
  list.inputs = {make_input({}, kFloat32, 9), make_input({2}, kFloat32, 10)};
  list.fn = [](const TensorList& in) {
    return N == 1 ? atleast_1d(std::vector<Tensor>(in)) : N == 2 ? atleast_2d(std::vector<Tensor>(in)) : atleast_3d(std::vector<Tensor>(in));
  };
  list.reference = [](const TensorList& in) {
    TensorList out;
    for (const Tensor& t : in) {
      Ref r = Ref::of(t);
      r.shape = atleast_shape(r.shape, N);
      out.push_back(r.to(kFloat32));
    }
    return out;
  };
  v.push_back(list);
  return v;
}
template <size_t N>
std::vector<ErrorSample> atleast_errors() {
  const std::string name = "atleast_" + std::to_string(N) + "d";
  return {{"undefined input", [] { N == 1 ? atleast_1d(Tensor()) : N == 2 ? atleast_2d(Tensor()) : atleast_3d(Tensor()); },
           name + ": expected a defined input tensor"}};
}
KILN_OP_SAMPLES(atleast_1d, atleast_samples<1>, atleast_errors<1>);
KILN_OP_SAMPLES(atleast_2d, atleast_samples<2>, atleast_errors<2>);
KILN_OP_SAMPLES(atleast_3d, atleast_samples<3>, atleast_errors<3>);

}  // namespace
}  // namespace kiln::test
