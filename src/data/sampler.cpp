// The samplers and BatchSampler (include/kiln/data/sampler.h).
#include "kiln/data/sampler.h"

#include <numeric>

#include "kiln/ops/creation.h"

namespace kiln::data {
namespace {

// splitmix64's finalizer: a bijective mix, so distinct (seed, epoch) pairs give unrelated seeds.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t mix64(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }

std::vector<int64_t> iota_indices(int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

}  // namespace

SequentialSampler::SequentialSampler(int64_t num_items) : n_(num_items) {
  KILN_CHECK(n_ >= 0, "SequentialSampler: num_items must be non-negative, got ", n_);
}

std::vector<int64_t> SequentialSampler::indices(int64_t /*epoch*/) const { return iota_indices(n_); }

RandomSampler::RandomSampler(int64_t num_items, bool replacement, std::optional<int64_t> num_samples,
                             Generator* generator)
    : n_(num_items), replacement_(replacement), num_samples_(num_samples.value_or(num_items)) {
  KILN_CHECK(n_ >= 0, "RandomSampler: num_items must be non-negative, got ", n_);
  KILN_CHECK(num_samples_ > 0,
             "RandomSampler: num_samples should be a positive integer value, but got num_samples=", num_samples_);
  KILN_CHECK(n_ > 0, "RandomSampler: cannot draw ", num_samples_, " samples from an empty dataset");
  // Reserving a Philox block advances the generator as drawing a seed from it would, and the
  // (seed, offset) pair it returns is what determines this sampler's orders.
  Generator& gen = generator ? *generator : default_generator();
  auto [seed, offset] = gen.reserve(1);
  seed_ = mix64(seed, offset);
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  Generator gen(mix64(seed_, static_cast<uint64_t>(epoch)));
  if (replacement_) return randint(0, n_, {num_samples_}, kInt64, &gen).to_vector<int64_t>();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  // Whole permutations, then the start of one more, as torch.
  while (static_cast<int64_t>(out.size()) < num_samples_) {
    std::vector<int64_t> perm = randperm(n_, kInt64, &gen).to_vector<int64_t>();
    const size_t take = std::min(perm.size(), static_cast<size_t>(num_samples_) - out.size());
    out.insert(out.end(), perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return out;
}

DistributedSampler::DistributedSampler(int64_t num_items, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(num_items), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  KILN_CHECK(n_ >= 0, "DistributedSampler: num_items must be non-negative, got ", n_);
  KILN_CHECK(num_replicas_ >= 1, "DistributedSampler: num_replicas must be at least 1, got ", num_replicas_);
  KILN_CHECK(rank_ >= 0 && rank_ < num_replicas_, "DistributedSampler: invalid rank ", rank_,
             ", rank should be in the interval [0, ", num_replicas_ - 1, "]");
  // torch: ceil((n - R) / R) with drop_last and an uneven split, which is floor(n / R); else ceil(n / R).
  num_samples_ =
      (drop_last_ && n_ % num_replicas_ != 0) ? n_ / num_replicas_ : (n_ + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all;
  if (shuffle_) {
    Generator gen(seed_ + static_cast<uint64_t>(epoch));
    all = randperm(n_, kInt64, &gen).to_vector<int64_t>();
  } else {
    all = iota_indices(n_);
  }
  const auto total = static_cast<size_t>(total_size());
  if (!drop_last_) {
    // Pad by repeating the order from its start (as many times as needed) to a multiple of R.
    const size_t n = all.size();
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i % n]);
  } else {
    all.resize(total);
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(num_replicas_)) out.push_back(all[i]);
  return out;
}

BatchSampler::BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  KILN_CHECK(sampler_ != nullptr, "BatchSampler: the sampler is null");
  KILN_CHECK(batch_size_ >= 1,
             "BatchSampler: batch_size should be a positive integer value, but got batch_size=", batch_size_);
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<std::vector<int64_t>> BatchSampler::batches(int64_t epoch) const {
  std::vector<int64_t> idx = sampler_->indices(epoch);
  // The batch count (DataLoader::size, resume positions) is computed from size(); hold samplers to it.
  KILN_CHECK(static_cast<int64_t>(idx.size()) == sampler_->size(), "BatchSampler: the sampler gave ", idx.size(),
             " indices for epoch ", epoch, " but its size() is ", sampler_->size());
  const int64_t num_batches = size();
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(num_batches));
  for (int64_t b = 0; b < num_batches; ++b) {
    const auto from = static_cast<size_t>(b * batch_size_);
    const size_t to = std::min(idx.size(), from + static_cast<size_t>(batch_size_));
    out.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(from), idx.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return out;
}

}  // namespace kiln::data
