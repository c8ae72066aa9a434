// Datasets, samplers and DataLoader: batching, shuffle determinism, worker threads (same batches
// as the calling thread, errors, early exit), DistributedSampler's split, resume mid-epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <ranges>
#include <set>
#include <stdexcept>
#include <thread>

#include "kiln/data.h"
#include "kiln/kiln.h"

using namespace kiln;
using namespace kiln::data;

// Range-for, std::ranges and <algorithm> see the loader as an input range.
static_assert(std::input_iterator<DataLoader::Iterator>);
static_assert(std::ranges::input_range<DataLoader>);
static_assert(std::ranges::input_range<DataLoader::EpochRange>);

namespace {

// Sample i is {i as an int64 scalar, [i, 10 i] as float32}. Optionally sleeps a little (longer
// for some indices, so workers finish out of order) and throws at one index; counts get() calls.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(size_t n, int64_t throw_at = -1, bool jitter = false)
      : n_(n), throw_at_(throw_at), jitter_(jitter) {}
  size_t size() const override { return n_; }
  Sample get(size_t index) const override {
    gets.fetch_add(1);
    KILN_CHECK(index < n_, "IndexDataset: index ", index, " out of range");
    if (static_cast<int64_t>(index) == throw_at_) throw std::runtime_error("bad sample " + std::to_string(index));
    if (jitter_) std::this_thread::sleep_for(std::chrono::microseconds(index % 3 == 0 ? 300 : 20));
    const auto i = static_cast<int64_t>(index);
    return {tensor(Scalar(i), kInt64), tensor<float>({float(i), float(10 * i)})};
  }
  mutable std::atomic<int64_t> gets{0};

 private:
  size_t n_;
  int64_t throw_at_;
  bool jitter_;
};

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// The index lists of every batch of one pass.
template <class Range>
std::vector<std::vector<int64_t>> batch_indices(Range&& range) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : range) out.push_back(ints(batch[0]));
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> want(static_cast<size_t>(n));
  std::iota(want.begin(), want.end(), 0);
  return v == want;
}

}  // namespace

TEST(DataTensorDataset, IndexesDimZeroOfEachTensor) {
  Tensor x = arange(12, kFloat32).reshape({6, 2});
  Tensor y = arange(6) * 10;
  TensorDataset ds({x, y});
  EXPECT_EQ(ds.size(), 6u);
  Sample s = ds.get(4);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_EQ(s[0].to_vector<float>(), (std::vector<float>{8, 9}));
  EXPECT_EQ(s[1].dim(), 0);
  EXPECT_EQ(s[1].item<int64_t>(), 40);
  EXPECT_THROW(ds.get(6), Error);
  EXPECT_THROW(TensorDataset({x, arange(5)}), Error);  // lengths differ
  EXPECT_THROW(TensorDataset({x, tensor(Scalar(1.0))}), Error);
  EXPECT_THROW(TensorDataset(std::vector<Tensor>{}), Error);
  try {
    TensorDataset({x, arange(5)});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[5]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[6, 2]"), std::string::npos) << e.what();
  }
}

TEST(DataSubset, MapsIndicesAndChecksThem) {
  auto ds = std::make_shared<IndexDataset>(10);
  Subset sub(ds, {7, 2, 2, 9});
  EXPECT_EQ(sub.size(), 4u);
  std::vector<int64_t> got;
  for (size_t i = 0; i < sub.size(); ++i) got.push_back(sub.get(i)[0].item<int64_t>());
  EXPECT_EQ(got, (std::vector<int64_t>{7, 2, 2, 9}));
  EXPECT_THROW(sub.get(4), Error);
  EXPECT_THROW(Subset(ds, {1, 10}), Error);
  EXPECT_THROW(Subset(ds, {-1}), Error);
}

TEST(DataRandomSplit, LengthsAndFractions) {
  auto ds = std::make_shared<IndexDataset>(10);
  Generator g1(5), g2(5), g3(6);
  auto a = random_split(ds, {7, 3}, g1);
  auto b = random_split(ds, {7, 3}, g2);
  auto c = random_split(ds, {7, 3}, g3);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]->size(), 7u);
  EXPECT_EQ(a[1]->size(), 3u);
  // Disjoint and covering: together a permutation of the dataset's indices.
  std::vector<int64_t> all = a[0]->indices();
  all.insert(all.end(), a[1]->indices().begin(), a[1]->indices().end());
  EXPECT_TRUE(is_permutation_of_range(all, 10));
  // The split is the generator's randperm, cut in order.
  Generator g4(5);
  EXPECT_EQ(all, randperm(10, kInt64, &g4).to_vector<int64_t>());
  EXPECT_EQ(a[0]->indices(), b[0]->indices());
  EXPECT_NE(a[0]->indices(), c[0]->indices());
  EXPECT_EQ(a[1]->get(0)[0].item<int64_t>(), a[1]->indices()[0]);

  // Fractions: floor(10 * f) = 3, 3, 3, and the one left over goes to the first split.
  auto f = random_split(ds, {0.33, 0.33, 0.34}, g1);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0]->size(), 4u);
  EXPECT_EQ(f[1]->size(), 3u);
  EXPECT_EQ(f[2]->size(), 3u);
  auto h = random_split(ds, {0.5, 0.5}, g1);
  EXPECT_EQ(h[0]->size(), 5u);

  EXPECT_THROW(random_split(ds, {7, 2}, g1), Error);       // sums to 9
  EXPECT_THROW(random_split(ds, {11, -1}, g1), Error);     // negative
  EXPECT_THROW(random_split(ds, {0.5, 0.6}, g1), Error);   // sums to 1.1
  EXPECT_THROW(random_split(ds, {1.5, -0.5}, g1), Error);  // out of [0, 1]
  std::vector<int64_t> lens = {4, 6};
  EXPECT_EQ(random_split(ds, lens, g1)[1]->size(), 6u);
}

TEST(DataLoader, BatchesAndLastPartialBatch) {
  auto ds = std::make_shared<IndexDataset>(10);
  DataLoader loader(ds, {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  std::vector<std::vector<int64_t>> got;
  std::vector<std::vector<float>> second;
  for (auto& batch : loader) {
    ASSERT_EQ(batch.size(), 2u);
    EXPECT_EQ(batch[0].dtype(), kInt64);
    EXPECT_EQ(batch[1].dim(), 2);
    EXPECT_EQ(batch[1].size(1), 2);
    got.push_back(ints(batch[0]));
    second.push_back(batch[1].to_vector<float>());
  }
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(second[2], (std::vector<float>{8, 80, 9, 90}));

  DataLoader dropping(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(batch_indices(dropping), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));

  DataLoader exact(ds, {.batch_size = 5, .drop_last = true});
  EXPECT_EQ(batch_indices(exact).size(), 2u);
  DataLoader ones(ds);  // batch_size 1: each field gets a leading dim of 1
  auto first = *ones.begin();
  EXPECT_EQ(first[1].sizes().vec(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ones.size(), 10);

  // An empty dataset without drop_last: no batches, as torch.
  DataLoader empty(std::make_shared<IndexDataset>(0), {.batch_size = 3});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(batch_indices(empty).empty());
}

TEST(DataLoader, ShuffleIsSeededAndNewEachEpoch) {
  auto ds = std::make_shared<IndexDataset>(37);
  DataLoader a(ds, {.batch_size = 5, .shuffle = true, .seed = 11});
  DataLoader b(ds, {.batch_size = 5, .shuffle = true, .seed = 11});
  DataLoader c(ds, {.batch_size = 5, .shuffle = true, .seed = 12});
  std::set<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 4; ++epoch) {
    EXPECT_EQ(a.epoch(), epoch);
    auto ea = flat(batch_indices(a)), eb = flat(batch_indices(b)), ec = flat(batch_indices(c));
    EXPECT_TRUE(is_permutation_of_range(ea, 37));  // every index exactly once
    EXPECT_EQ(ea, eb);                             // same seed, same order
    EXPECT_NE(ea, ec);                             // another seed, another order
    orders.insert(ea);
  }
  EXPECT_EQ(orders.size(), 4u);  // each epoch its own order
  EXPECT_EQ(a.epoch(), 4);

  // Not sequential, and without .seed the default generator decides (kiln::manual_seed).
  EXPECT_NE(*orders.begin(), flat(batch_indices(DataLoader(ds, {.batch_size = 5}))));
  manual_seed(3);
  DataLoader d(ds, {.batch_size = 5, .shuffle = true});
  manual_seed(3);
  DataLoader e(ds, {.batch_size = 5, .shuffle = true});
  EXPECT_EQ(flat(batch_indices(d)), flat(batch_indices(e)));
}

TEST(DataSampler, RandomSamplerReplacementAndNumSamples) {
  Generator g1(1), g2(1);
  RandomSampler s(10, false, std::nullopt, &g1);
  RandomSampler same(10, false, std::nullopt, &g2);
  EXPECT_EQ(s.size(), 10);
  EXPECT_EQ(s.indices(0), same.indices(0));
  EXPECT_EQ(s.indices(3), same.indices(3));  // epoch 3 does not depend on epochs 0-2 running
  EXPECT_NE(s.indices(0), s.indices(1));
  s.set_epoch(1);
  EXPECT_EQ(s.indices(), s.indices(1));

  // More samples than items without replacement: whole permutations, then part of one.
  RandomSampler longer(4, false, 10, &g1);
  auto idx = longer.indices(0);
  ASSERT_EQ(idx.size(), 10u);
  EXPECT_TRUE(is_permutation_of_range({idx.begin(), idx.begin() + 4}, 4));
  EXPECT_TRUE(is_permutation_of_range({idx.begin() + 4, idx.begin() + 8}, 4));
  EXPECT_NE(idx[8], idx[9]);

  RandomSampler rep(3, true, 200, &g1);
  auto r = rep.indices(0);
  ASSERT_EQ(r.size(), 200u);
  std::set<int64_t> seen(r.begin(), r.end());
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2}));  // repeats, all in range

  EXPECT_THROW(RandomSampler(5, false, 0), Error);
  EXPECT_THROW(RandomSampler(0), Error);
  SequentialSampler seq(4);
  EXPECT_EQ(seq.indices(7), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(DataLoader, WorkersGiveTheSameBatchesInOrder) {
  auto ds = std::make_shared<IndexDataset>(53, -1, /*jitter=*/true);
  auto reference = [&](int64_t epoch) {
    DataLoader serial(ds, {.batch_size = 4, .shuffle = true, .seed = 7});
    std::vector<std::vector<float>> out;
    for (auto& batch : serial.iterate(epoch)) out.push_back(batch[1].to_vector<float>());
    return out;
  };
  const auto want0 = reference(0), want1 = reference(1);
  for (int64_t workers : {1, 2, 3, 8}) {
    for (int64_t prefetch : {1, 3}) {
      DataLoader loader(
          ds, {.batch_size = 4, .shuffle = true, .num_workers = workers, .prefetch_factor = prefetch, .seed = 7});
      for (const auto* want : {&want0, &want1}) {
        std::vector<std::vector<float>> got;
        for (auto& batch : loader) got.push_back(batch[1].to_vector<float>());
        EXPECT_EQ(got, *want) << workers << " workers, prefetch " << prefetch;
      }
    }
  }
}

TEST(DataLoader, WorkerExceptionIsRethrownAtItsBatch) {
  for (int64_t workers : {0, 1, 3}) {
    auto ds = std::make_shared<IndexDataset>(12, /*throw_at=*/7);
    DataLoader loader(ds, {.batch_size = 2, .num_workers = workers});
    std::vector<int64_t> firsts;
    int failures = 0;
    auto it = loader.begin();
    while (it != loader.end()) {
      firsts.push_back(it.batch_index());
      EXPECT_EQ(ints((*it)[0]).at(0), 2 * it.batch_index());  // never a batch out of order
      try {
        ++it;
      } catch (const std::runtime_error& e) {
        // Batch 3 holds index 7; the loop can go on past it.
        EXPECT_EQ(it.batch_index(), 3) << workers;
        EXPECT_STREQ(e.what(), "bad sample 7");
        ++failures;
        ++it;
      }
    }
    EXPECT_EQ(failures, 1) << workers;
    EXPECT_EQ(firsts, (std::vector<int64_t>{0, 1, 2, 4, 5})) << workers;
  }
  // A collate that throws for the first batch fails begin() itself.
  auto ds = std::make_shared<IndexDataset>(4);
  DataLoader bad(ds, {.batch_size = 2, .num_workers = 2, .collate = [](const std::vector<Sample>&) -> Batch {
                        throw std::logic_error("no");
                      }});
  EXPECT_THROW(bad.begin(), std::logic_error);
}

TEST(DataLoader, EarlyBreakStopsWorkers) {
  // 1 ms per sample: draining the epoch would take seconds; stopping must not.
  struct SlowDataset : IndexDataset {
    SlowDataset() : IndexDataset(6000) {}
    Sample get(size_t index) const override {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return IndexDataset::get(index);
    }
  };
  auto ds = std::make_shared<SlowDataset>();
  DataLoader loader(ds, {.batch_size = 4, .num_workers = 3, .prefetch_factor = 2});
  const auto t0 = std::chrono::steady_clock::now();
  int seen = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch[0].size(0), 4);
    if (++seen == 2) break;
  }
  { auto abandoned = loader.begin(); }  // started and dropped at once
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 1.0);
  // Prefetch stays in its window: at most 3 * 2 batches beyond the consumer's, in each pass.
  EXPECT_LE(ds->gets.load(), (2 + 6) * 4 + (1 + 6) * 4);
  EXPECT_EQ(loader.epoch(), 2);
}

TEST(DataSampler, DistributedSplitsAsTorch) {
  // 10 items over 3 replicas: 4 each, padded with items 0 and 1.
  std::vector<std::vector<int64_t>> no_shuffle;
  for (int64_t r = 0; r < 3; ++r) no_shuffle.push_back(DistributedSampler(10, 3, r, false).indices(0));
  EXPECT_EQ(no_shuffle, (std::vector<std::vector<int64_t>>{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}));
  // drop_last cuts the tail to 9 instead: 3 each, disjoint.
  std::vector<std::vector<int64_t>> dropped;
  for (int64_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, false, 0, true);
    EXPECT_EQ(s.size(), 3);
    dropped.push_back(s.indices(0));
  }
  EXPECT_EQ(dropped, (std::vector<std::vector<int64_t>>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
  // Fewer items than replicas: the order is repeated as often as needed.
  std::vector<int64_t> tiny;
  for (int64_t r = 0; r < 5; ++r) tiny.push_back(DistributedSampler(2, 5, r, false).indices(0).at(0));
  EXPECT_EQ(tiny, (std::vector<int64_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(DistributedSampler(2, 5, 0, false, 0, true).size(), 0);

  // Shuffled: randperm from a generator seeded with seed + epoch, padded, then strided.
  for (int64_t epoch : {0, 1}) {
    Generator g(100 + epoch);
    auto perm = randperm(11, kInt64, &g).to_vector<int64_t>();
    perm.push_back(perm[0]);  // 11 -> 12
    std::multiset<int64_t> covered;
    for (int64_t r = 0; r < 4; ++r) {
      DistributedSampler s(11, 4, r, true, 100);
      s.set_epoch(epoch);
      auto idx = s.indices();
      EXPECT_EQ(idx, (std::vector<int64_t>{perm[r], perm[r + 4], perm[r + 8]}));
      covered.insert(idx.begin(), idx.end());
    }
    EXPECT_EQ(std::set<int64_t>(covered.begin(), covered.end()).size(), 11u);  // covers all
    EXPECT_EQ(covered.size(), 12u);                                            // one repeat
  }
  EXPECT_NE(DistributedSampler(11, 4, 0, true, 100).indices(0), DistributedSampler(11, 4, 0, true, 100).indices(1));
  EXPECT_THROW(DistributedSampler(10, 3, 3), Error);
  EXPECT_THROW(DistributedSampler(10, 3, -1), Error);

  // In a DataLoader the loader's epoch is the sampler's epoch.
  auto ds = std::make_shared<IndexDataset>(11);
  auto sampler = std::make_shared<DistributedSampler>(*ds, 4, 2, true, 100);
  DataLoader loader(ds, {.batch_size = 2, .sampler = sampler});
  EXPECT_EQ(loader.size(), 2);
  (void)flat(batch_indices(loader));
  EXPECT_EQ(flat(batch_indices(loader)), sampler->indices(1));
}

TEST(DataLoader, CustomCollate) {
  auto ds = std::make_shared<IndexDataset>(7);
  // Keeps only the labels, as a sum and a count.
  CollateFn sum_labels = [](const std::vector<Sample>& samples) {
    int64_t sum = 0;
    for (const Sample& s : samples) sum += s[0].item<int64_t>();
    return Batch{tensor(Scalar(sum), kInt64), tensor(Scalar(int64_t(samples.size())), kInt64)};
  };
  for (int64_t workers : {0, 2}) {
    DataLoader loader(ds, {.batch_size = 3, .num_workers = workers, .collate = sum_labels});
    std::vector<std::pair<int64_t, int64_t>> got;
    for (auto& b : loader) got.emplace_back(b[0].item<int64_t>(), b[1].item<int64_t>());
    EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {12, 3}, {6, 1}}));
  }
}

TEST(DataLoader, DefaultCollateRejectsMismatchedSamples) {
  // Sample i is a vector of i + 1 elements: the second batch mixes shapes [3] and [4].
  struct Ragged : Dataset {
    size_t size() const override { return 4; }
    Sample get(size_t i) const override { return {zeros({int64_t(i) + 1})}; }
  };
  DataLoader loader(std::make_shared<Ragged>(), {.batch_size = 2});
  try {
    batch_indices(loader);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("field 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[1]"), std::string::npos) << msg;
  }
  EXPECT_THROW(default_collate({{zeros({2}), zeros({1})}, {zeros({2})}}), Error);  // field counts
  EXPECT_THROW(default_collate({{zeros({2})}, {zeros({2}, kInt64)}}), Error);      // dtypes
  EXPECT_EQ(default_collate({{zeros({2})}, {ones({2})}})[0].sizes().vec(), (std::vector<int64_t>{2, 2}));
}

TEST(DataLoader, ResumeAtBatchEqualsTailOfFullEpoch) {
  auto ds = std::make_shared<IndexDataset>(30);
  const DataLoaderOptions opts{.batch_size = 4, .shuffle = true, .drop_last = true, .seed = 21};
  DataLoader full(ds, opts);
  std::vector<std::vector<std::vector<int64_t>>> epochs;
  for (int e = 0; e < 4; ++e) epochs.push_back(batch_indices(full));
  ASSERT_EQ(epochs[2].size(), 7u);
  const std::vector<std::vector<int64_t>> tail(epochs[2].begin() + 5, epochs[2].end());

  for (int64_t workers : {0, 2}) {
    DataLoaderOptions o = opts;
    o.num_workers = workers;
    DataLoader resumed(ds, o);  // a fresh process: nothing ran before
    EXPECT_EQ(batch_indices(resumed.iterate(2, 5)), tail);
    auto range = resumed.iterate(2, 5);
    EXPECT_EQ(range.size(), 2);
    EXPECT_EQ(range.begin().batch_index(), 5);
    EXPECT_EQ(resumed.epoch(), 0);  // iterate() leaves the counter alone
    resumed.set_epoch(2, 5);
    EXPECT_EQ(batch_indices(resumed), tail);
    EXPECT_EQ(batch_indices(resumed), epochs[3]);  // then the next epoch from its start
    EXPECT_TRUE(batch_indices(resumed.iterate(1, 7)).empty());
  }
  EXPECT_THROW(full.iterate(0, 8), Error);
  EXPECT_THROW(full.set_epoch(0, -1), Error);
}

TEST(DataLoader, BatchesOwnTheirStorage) {
  Tensor x = arange(8, kFloat32).reshape({4, 2});
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{x});
  for (int64_t workers : {0, 2}) {
    DataLoader loader(ds, {.batch_size = 1, .num_workers = workers});
    std::vector<Tensor> kept;
    for (auto& batch : loader) {
      EXPECT_FALSE(batch[0].is_alias_of(x));
      batch[0].mul_(100);  // must not reach the dataset
      kept.push_back(batch[0]);
    }
    for (size_t i = 0; i < kept.size(); ++i) {
      EXPECT_EQ(kept[i].to_vector<float>(), (std::vector<float>{200.f * i, 200.f * i + 100}));
      for (size_t j = 0; j < i; ++j) EXPECT_FALSE(kept[i].is_alias_of(kept[j]));
    }
  }
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, RejectsBadOptions) {
  auto ds = std::make_shared<IndexDataset>(5);
  auto sampler = std::make_shared<SequentialSampler>(*ds);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 0}), Error);
  EXPECT_THROW(DataLoader(std::make_shared<IndexDataset>(0), {.batch_size = 2, .drop_last = true}), Error);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 8, .drop_last = true}), Error);  // no full batch
  EXPECT_THROW(DataLoader(ds, {.shuffle = true, .sampler = sampler}), Error);
  EXPECT_THROW(DataLoader(ds, {.num_workers = -1}), Error);
  EXPECT_THROW(DataLoader(ds, {.num_workers = 2, .prefetch_factor = 0}), Error);
  EXPECT_THROW(DataLoader(std::make_shared<IndexDataset>(0), {.shuffle = true}), Error);
  EXPECT_THROW(DataLoader(nullptr), Error);
  try {
    DataLoader(ds, {.shuffle = true, .sampler = sampler});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mutually exclusive with shuffle"), std::string::npos);
  }
  // A sampler index beyond the dataset reaches Dataset::get's check.
  DataLoader beyond(ds, {.batch_size = 2, .sampler = std::make_shared<SequentialSampler>(6)});
  EXPECT_THROW(batch_indices(beyond), Error);
}
