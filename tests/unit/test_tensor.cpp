// The tensor core: dtypes and promotion, storage sharing, views, copies, errors.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(kInt32, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBool, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_TRUE(can_cast(kInt64, kFloat32));
  EXPECT_FALSE(can_cast(kFloat32, kInt64));
  EXPECT_FALSE(can_cast(kInt64, kBool));
}

TEST(DType, ScalarsPromoteOnlyAcrossCategories) {
  Tensor i = ones({2}, kInt32);
  EXPECT_EQ((i + 2).dtype(), kInt32);            // int scalar keeps int32
  EXPECT_EQ((i * 2.5).dtype(), kFloat32);        // float scalar → default float
  EXPECT_EQ((ones({2}, kFloat16) * 2.5).dtype(), kFloat16);
  EXPECT_EQ((ones({2}, kBool) + ones({2}, kBool)).dtype(), kBool);
  // A 0-d tensor behaves like a scalar within a category, not across it.
  EXPECT_EQ((ones({2}, kInt32) + ones({}, kInt64)).dtype(), kInt32);
  EXPECT_EQ((ones({2}, kInt32) + ones({}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((ones({2}, kFloat32) + ones({2}, kFloat64)).dtype(), kFloat64);
}

TEST(Tensor, FactoriesAndMetadata) {
  Tensor t = zeros({2, 3}, kFloat64);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.strides().vec(), (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_TRUE(t.is_cpu());
  Tensor s = full({}, 7);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.item<int64_t>(), 7);
  EXPECT_EQ(full({1}, 1.5).dtype(), kFloat32);
  Tensor e = empty({0, 4});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_THROW(zeros({-1}), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = zeros({3, 4});
  Tensor row = t.select(0, 1);
  Tensor col = t.slice(1, 2, 3);
  EXPECT_TRUE(row.is_alias_of(t));
  EXPECT_TRUE(row.is_view());
  row.fill_(5);
  EXPECT_EQ(t.to_vector<float>()[4], 5.0f);
  EXPECT_EQ(col.sizes().vec(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(col.to_vector<float>()[1], 5.0f);
  Tensor tt = t.t();
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.stride(0), 1);
  Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.is_alias_of(t));
  EXPECT_EQ(c.to_vector<float>(), tt.to_vector<float>());
}

TEST(Tensor, ReshapeIsAViewWhenPossible) {
  Tensor t = arange(12).view({3, 4});
  EXPECT_TRUE(t.reshape({4, 3}).is_alias_of(t));
  EXPECT_FALSE(t.t().reshape({12}).is_alias_of(t));
  EXPECT_EQ(t.t().reshape({12}).to_vector<int64_t>()[1], 4);
}

TEST(Tensor, CopyConvertsAndBroadcasts) {
  Tensor dst = zeros({2, 3}, kInt32);
  dst.copy_(full({3}, 2.7, kFloat64));
  EXPECT_EQ(dst.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(dst._version(), 1u);
  Tensor h = ones({4}, kFloat16) * 0.5;
  EXPECT_EQ(h.to(kFloat32).to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  Tensor b = tensor<double>({0.0, 2.0, -1.0}).to(kBool);
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
}

TEST(Tensor, InPlaceOpsKeepDtypeAndCheckCasts) {
  Tensor i = ones({3}, kInt64);
  i.add_(2);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_THROW(i.add_(0.5), Error);            // float result can't go into int64
  Tensor f = ones({3});
  EXPECT_THROW(f.add_(ones({2, 3})), Error);   // in-place can't broadcast self
}

TEST(Tensor, FromBlobSharesMemory) {
  std::vector<float> data = {1, 2, 3, 4};
  Tensor t = from_blob(data.data(), {2, 2}, kFloat32);
  t.mul_(2.0);
  EXPECT_EQ(data[3], 8.0f);
}

TEST(Tensor, ErrorsNameTheOpAndShapes) {
  try {
    (void)add(ones({2, 3}), ones({4}));
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(ones({2}).item<float>(), Error);
  EXPECT_THROW(ones({2}).data_ptr<double>(), Error);
  EXPECT_THROW(Device("gpu"), Error);
}

TEST(Tensor, Printing) {
  EXPECT_EQ(tensor<float>({1, 2}).to_string(), "tensor([1., 2.])");
  EXPECT_EQ(tensor<int64_t>({3}).view({1, 1}).to_string(), "tensor([[3]])");
  EXPECT_EQ(full({}, 0.5, kFloat64).to_string(), "tensor(0.5000, dtype=float64)");
}

TEST(Generator, SameSeedSameNumbers) {
  manual_seed(123);
  Tensor a = randn({5});
  manual_seed(123);
  Tensor b = randn({5});
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  Tensor c = randn({5});
  EXPECT_NE(a.to_vector<double>(), c.to_vector<double>());
}

}  // namespace
