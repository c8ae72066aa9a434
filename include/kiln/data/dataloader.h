// DataLoader, as torch.utils.data.DataLoader: batches of a Dataset in sampler order, optionally
// fetched and collated ahead by background threads.
//
//   auto ds = std::make_shared<data::TensorDataset>(std::vector<Tensor>{images, labels});
//   data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .drop_last = true, .seed = 0});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto& batch : loader) train_step(batch[0], batch[1]);  // each loop is a new epoch
//
// Epochs. Every begin() (every range-for over the loader) runs the next epoch: 0, 1, 2, ...
// epoch() says which one the next loop gets and set_epoch() changes it. An epoch's batches depend
// only on the seed and the epoch number (Note [Epoch-keyed sampling] in sampler.h), never on what
// ran before in the process.
//
// Resuming. To continue a run that stopped after consuming k batches of epoch e, build the loader
// with the same dataset, options and seed, and either call set_epoch(e, k) before the next loop,
// or iterate the rest of that epoch explicitly with iterate(e, k); both yield exactly batches
// k, k+1, ... of epoch e as an uninterrupted run saw them, and the loop after set_epoch(e, k) is
// followed by epoch e+1 from its start. For a step-counted run with a fixed batch count per epoch
// (size()), global step s is epoch s / size(), batch s % size(). Without .seed, a shuffling loader
// takes its seed from the default generator when constructed, so a resumed run must also
// kiln::manual_seed the same way before building it; passing .seed avoids that dependence.
//
// Workers. With num_workers > 0, that many threads fetch samples and collate batches ahead, at
// most num_workers * prefetch_factor batches beyond the one the consumer holds. Batches are
// delivered in sampler order whatever thread finishes first, so the batches are exactly those of
// num_workers = 0. An exception thrown by Dataset::get or the collate is rethrown, unchanged, by
// the iterator step (begin() or ++) that reaches the failing batch; the loop may continue past it.
// Destroying an iterator mid-epoch (break, exception) stops the threads and joins them; a worker
// finishes at most the sample it is fetching. The dataset must be safe to read from several
// threads (Dataset::get is const), and so must the collate.
//
// Batches never share storage with the dataset or with each other when the default collate is
// used (kiln::stack copies), so a batch may be kept or modified in place freely. A custom collate's
// result is passed on as it is.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/data/dataset.h"
#include "kiln/data/sampler.h"

namespace kiln::data {

using Batch = std::vector<Tensor>;
using CollateFn = std::function<Batch(const std::vector<Sample>& samples)>;

// Stacks field f of every sample along a new dim 0 (kiln::stack), as torch's default_collate
// does for tensors. Every sample must have the same number of fields, and field f the same shape,
// dtype and device in every sample; a mismatch is a kiln::Error naming the field and the shapes.
Batch default_collate(const std::vector<Sample>& samples);

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;  // a RandomSampler; mutually exclusive with `sampler`
  bool drop_last = false;
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;  // batches in flight per worker; used only with num_workers > 0
  // Every field has an initializer so that GCC's -Wmissing-field-initializers accepts designated
  // initializers that leave some out.
  std::optional<uint64_t> seed = std::nullopt;  // shuffle seed; default: drawn from the default generator
  std::shared_ptr<Sampler> sampler = nullptr;
  CollateFn collate = nullptr;  // default: default_collate
};

namespace detail {
struct LoaderCore;
class EpochRun;
}  // namespace detail

class DataLoader {
 public:
  // One pass over batches [start_batch, size()) of one epoch. Move-only: it owns the worker
  // threads of that pass, which its destructor stops and joins.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator();
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    // Position of the current batch within its epoch (start_batch for the first one).
    int64_t batch_index() const { return index_; }
    int64_t epoch() const { return epoch_; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return it.at_end(); }

   private:
    friend class DataLoader;
    Iterator(std::shared_ptr<const detail::LoaderCore> core, int64_t epoch, int64_t start_batch);
    bool at_end() const;
    void load();
    std::unique_ptr<detail::EpochRun> run_;
    mutable Batch batch_;
    int64_t epoch_ = 0;
    int64_t start_ = 0;  // the batch index run_ counts from
    int64_t index_ = 0;
    int64_t end_ = 0;
  };

  // The batches of one epoch from start_batch on; each begin() starts a fresh pass.
  class EpochRange {
   public:
    Iterator begin() const { return Iterator(core_, epoch_, start_batch_); }
    std::default_sentinel_t end() const { return {}; }
    int64_t size() const;  // batches this range yields

   private:
    friend class DataLoader;
    EpochRange(std::shared_ptr<const detail::LoaderCore> core, int64_t epoch, int64_t start_batch)
        : core_(std::move(core)), epoch_(epoch), start_batch_(start_batch) {}
    std::shared_ptr<const detail::LoaderCore> core_;
    int64_t epoch_;
    int64_t start_batch_;
  };

  explicit DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {});

  // Batches per epoch (torch's len(loader)).
  int64_t size() const;
  // Runs epoch epoch() (from the start batch set_epoch gave, else 0), then advances epoch().
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }
  // Batches [start_batch, size()) of `epoch`; leaves epoch() alone.
  EpochRange iterate(int64_t epoch, int64_t start_batch = 0) const;
  // The next begin() runs `epoch` from batch `start_batch`; the ones after it start at batch 0.
  void set_epoch(int64_t epoch, int64_t start_batch = 0);
  int64_t epoch() const { return epoch_; }

  const std::shared_ptr<Dataset>& dataset() const;
  const std::shared_ptr<Sampler>& sampler() const;
  const DataLoaderOptions& options() const;

 private:
  std::shared_ptr<const detail::LoaderCore> core_;
  int64_t epoch_ = 0;
  int64_t start_batch_ = 0;
};

}  // namespace kiln::data
