// Samplers, as torch.utils.data: a sampler gives the dataset indices of one epoch, in order.
//
// Note [Epoch-keyed sampling]: unlike torch, whose RandomSampler draws each epoch's order from a
// generator that advances as epochs go by, indices(epoch) here is a pure function of the sampler's
// seed and `epoch`. Epoch 7 therefore has the same order whether or not epochs 0-6 ran in this
// process, which is what lets a resumed training run see exactly the batches an uninterrupted one
// would have (DataLoader::iterate). DistributedSampler already works this way in torch.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/data/dataset.h"
#include "kiln/generator.h"

namespace kiln::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Number of indices one epoch yields (torch's len(sampler)).
  virtual int64_t size() const = 0;
  // The indices of epoch `epoch`; the DataLoader passes its own epoch counter here.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;

  // torch's sampler.set_epoch(e), for iterating a sampler by hand: indices() uses this epoch.
  // A DataLoader ignores it and passes its own epoch (DataLoader::set_epoch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  std::vector<int64_t> indices() const { return indices(epoch_); }

 private:
  int64_t epoch_ = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t num_items);
  explicit SequentialSampler(const Dataset& data_source)
      : SequentialSampler(static_cast<int64_t>(data_source.size())) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;

 private:
  int64_t n_;
};

// A random order of [0, n), as torch.utils.data.RandomSampler. Without replacement an epoch is
// a permutation of [0, n) (several, concatenated and cut, when num_samples > n); with replacement
// it is num_samples independent uniform draws. num_samples defaults to n and must be positive.
// The seed is drawn from `generator` (the default CPU generator when null) at construction, so
// samplers built from generators with the same seed give the same order; each epoch then gets a
// new order derived from that seed and the epoch number (Note [Epoch-keyed sampling]).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t num_items, bool replacement = false, std::optional<int64_t> num_samples = std::nullopt,
                         Generator* generator = nullptr);
  explicit RandomSampler(const Dataset& data_source, bool replacement = false,
                         std::optional<int64_t> num_samples = std::nullopt, Generator* generator = nullptr)
      : RandomSampler(static_cast<int64_t>(data_source.size()), replacement, num_samples, generator) {}
  int64_t size() const override { return num_samples_; }
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;
  bool replacement() const { return replacement_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t n_;
  bool replacement_;
  int64_t num_samples_;
  uint64_t seed_;
};

// This replica's share of the dataset for data-parallel training, with torch's algorithm: the
// epoch's order is randperm(n) from a generator seeded with seed + epoch (or 0..n-1 without
// shuffle); without drop_last it is padded by repeating its own start up to a multiple of
// num_replicas, with drop_last its tail is cut to one; replica `rank` takes every num_replicas-th
// index starting at `rank`. Every replica thus gets size() indices and together they cover the
// dataset (disjoint unless padded). torch reads num_replicas and rank from the process group;
// kiln has none yet, so they are required.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t num_items, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  DistributedSampler(const Dataset& dataset, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false)
      : DistributedSampler(static_cast<int64_t>(dataset.size()), num_replicas, rank, shuffle, seed, drop_last) {}
  int64_t size() const override { return num_samples_; }
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t n_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

// Groups a sampler's indices into batches of batch_size, the last one shorter unless drop_last,
// as torch.utils.data.BatchSampler. The DataLoader batches through this.
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last);
  // Number of batches per epoch.
  int64_t size() const;
  std::vector<std::vector<int64_t>> batches(int64_t epoch) const;
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }

 private:
  std::shared_ptr<Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace kiln::data
