// DataLoader, its epoch iterator and worker threads, and default_collate
// (include/kiln/data/dataloader.h).
#include "kiln/data/dataloader.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/tensor_impl.h"
#include "kiln/ops/shape.h"

namespace kiln::data {

Batch default_collate(const std::vector<Sample>& samples) {
  KILN_CHECK(!samples.empty(), "default_collate: got no samples");
  const Sample& first = samples[0];
  for (size_t s = 1; s < samples.size(); ++s)
    KILN_CHECK(samples[s].size() == first.size(), "default_collate: sample ", s, " has ", samples[s].size(),
               " fields but sample 0 has ", first.size());
  Batch batch;
  batch.reserve(first.size());
  std::vector<Tensor> column(samples.size());
  for (size_t f = 0; f < first.size(); ++f) {
    for (size_t s = 0; s < samples.size(); ++s) {
      const Tensor& t = samples[s][f];
      KILN_CHECK(t.defined(), "default_collate: field ", f, " of sample ", s, " is an undefined tensor");
      const Tensor& t0 = samples[0][f];
      KILN_CHECK(t.sizes() == t0.sizes(), "default_collate: field ", f, " has shape ", shape_str(t.sizes()),
                 " in sample ", s, " but ", shape_str(t0.sizes()),
                 " in sample 0; stacking needs equal shapes (pass a custom collate to pad them)");
      KILN_CHECK(t.dtype() == t0.dtype(), "default_collate: field ", f, " has dtype ", t.dtype(), " in sample ", s,
                 " but ", t0.dtype(), " in sample 0");
      KILN_CHECK(t.device() == t0.device(), "default_collate: field ", f, " is on ", t.device(), " in sample ", s,
                 " but on ", t0.device(), " in sample 0");
      column[s] = t;
    }
    batch.push_back(stack(column, 0));
  }
  return batch;
}

namespace detail {

struct LoaderCore {
  std::shared_ptr<Dataset> dataset;
  DataLoaderOptions options;
  std::shared_ptr<Sampler> sampler;  // options.sampler, or the one shuffle/sequential implies
  BatchSampler batch_sampler;
  CollateFn collate;
};

// Note [Ordered prefetch]: workers claim batches in order (next_claim_), never more than
// window_ ahead of the consumer, and park each result in the slot of its batch; the consumer
// waits for its slot only. Delivery order is thus the sampler's whatever thread finishes first,
// and at most window_ batches exist beyond the one the consumer holds.
class EpochRun {
 public:
  EpochRun(std::shared_ptr<const LoaderCore> core, std::vector<std::vector<int64_t>> batches)
      : core_(std::move(core)), batches_(std::move(batches)), slots_(batches_.size()) {
    const DataLoaderOptions& o = core_->options;
    if (o.num_workers == 0 || batches_.empty()) return;
    window_ = o.num_workers * o.prefetch_factor;
    const auto num_threads = std::min<size_t>(static_cast<size_t>(o.num_workers), batches_.size());
    try {
      for (size_t i = 0; i < num_threads; ++i) threads_.emplace_back([this] { worker_loop(); });
    } catch (...) {
      stop_and_join();
      throw;
    }
  }
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;
  ~EpochRun() { stop_and_join(); }

  // Batch k of this run; k goes 0, 1, 2, ... (a failed batch still counts as taken).
  Batch take(size_t k) {
    if (threads_.empty()) return fetch(batches_[k]);
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock, [&] { return slots_[k].done; });
      slot = std::move(slots_[k]);
      slots_[k] = Slot{};
      taken_ = k + 1;
    }
    claim_cv_.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

 private:
  struct Slot {
    bool done = false;
    Batch batch;
    std::exception_ptr error;
  };

  Batch fetch(const std::vector<int64_t>& indices) const {
    std::vector<Sample> samples;
    samples.reserve(indices.size());
    for (int64_t i : indices) {
      if (stop_.load(std::memory_order_relaxed)) return {};  // nobody will read this batch
      KILN_CHECK(i >= 0, "DataLoader: the sampler gave a negative index ", i);
      samples.push_back(core_->dataset->get(static_cast<size_t>(i)));
    }
    return core_->collate(samples);
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      claim_cv_.wait(lock,
                     [&] { return stop_.load() || next_claim_ >= batches_.size() || next_claim_ < taken_ + window_; });
      if (stop_.load() || next_claim_ >= batches_.size()) return;
      const size_t k = next_claim_++;
      lock.unlock();
      Slot slot;
      try {
        slot.batch = fetch(batches_[k]);
      } catch (...) {
        slot.error = std::current_exception();
      }
      slot.done = true;
      lock.lock();
      slots_[k] = std::move(slot);
      ready_cv_.notify_all();
    }
  }

  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    claim_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  std::shared_ptr<const LoaderCore> core_;
  const std::vector<std::vector<int64_t>> batches_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable claim_cv_;  // workers wait here for room in the window
  std::condition_variable ready_cv_;  // the consumer waits here for its batch
  std::vector<Slot> slots_;           // guarded by mu_
  size_t next_claim_ = 0;             // guarded by mu_
  size_t taken_ = 0;                  // guarded by mu_
  size_t window_ = 0;
  std::atomic<bool> stop_{false};  // also read without mu_ between samples, to stop sooner
};

}  // namespace detail

// ---- Iterator ----

DataLoader::Iterator::Iterator() = default;
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

DataLoader::Iterator::Iterator(std::shared_ptr<const detail::LoaderCore> core, int64_t epoch, int64_t start_batch)
    : epoch_(epoch), start_(start_batch), index_(start_batch) {
  const int64_t num_batches = core->batch_sampler.size();
  KILN_CHECK(start_batch >= 0 && start_batch <= num_batches, "DataLoader: start_batch ", start_batch,
             " is out of range for an epoch of ", num_batches, " batches");
  std::vector<std::vector<int64_t>> batches = core->batch_sampler.batches(epoch);
  batches.erase(batches.begin(), batches.begin() + start_batch);
  end_ = num_batches;
  run_ = std::make_unique<detail::EpochRun>(std::move(core), std::move(batches));
  if (index_ < end_) load();
}

bool DataLoader::Iterator::at_end() const { return !run_ || index_ >= end_; }

void DataLoader::Iterator::load() { batch_ = run_->take(static_cast<size_t>(index_ - start_)); }

Batch& DataLoader::Iterator::operator*() const {
  KILN_CHECK(!at_end(), "DataLoader: dereferencing an iterator past the last batch");
  return batch_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  KILN_CHECK(!at_end(), "DataLoader: incrementing an iterator past the last batch");
  ++index_;
  batch_.clear();
  if (index_ < end_) load();
  return *this;
}

// ---- DataLoader ----

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options) {
  KILN_CHECK(dataset != nullptr, "DataLoader: the dataset is null");
  const DataLoaderOptions& o = options;
  KILN_CHECK(o.batch_size >= 1,
             "DataLoader: batch_size should be a positive integer value, but got batch_size=", o.batch_size);
  KILN_CHECK(o.num_workers >= 0, "DataLoader: num_workers option should be non-negative, got ", o.num_workers,
             "; use num_workers=0 to load in the calling thread");
  KILN_CHECK(o.num_workers == 0 || o.prefetch_factor >= 1,
             "DataLoader: prefetch_factor must be at least 1 with num_workers > 0, got ", o.prefetch_factor);
  KILN_CHECK(!(o.sampler && o.shuffle), "DataLoader: sampler option is mutually exclusive with shuffle");
  std::shared_ptr<Sampler> sampler = o.sampler;
  if (!sampler && o.shuffle) {
    const auto n = static_cast<int64_t>(dataset->size());
    if (o.seed) {
      Generator gen(*o.seed);
      sampler = std::make_shared<RandomSampler>(n, false, std::nullopt, &gen);
    } else {
      sampler = std::make_shared<RandomSampler>(n);
    }
  } else if (!sampler) {
    sampler = std::make_shared<SequentialSampler>(*dataset);
  }
  // An epoch with no batches would make a training loop spin without training (torch allows it).
  KILN_CHECK(!o.drop_last || sampler->size() >= o.batch_size,
             "DataLoader: drop_last=true with batch_size=", o.batch_size, " and ", sampler->size(),
             " samples per epoch gives no batches");
  BatchSampler batch_sampler(sampler, o.batch_size, o.drop_last);
  CollateFn collate = o.collate ? o.collate : CollateFn(default_collate);
  core_ = std::make_shared<const detail::LoaderCore>(detail::LoaderCore{
      std::move(dataset), std::move(options), std::move(sampler), std::move(batch_sampler), std::move(collate)});
}

int64_t DataLoader::size() const { return core_->batch_sampler.size(); }

DataLoader::Iterator DataLoader::begin() {
  const int64_t epoch = epoch_, start = start_batch_;
  epoch_ = epoch + 1;  // each begin() is a new epoch, even if this one fails to start
  start_batch_ = 0;
  return Iterator(core_, epoch, start);
}

DataLoader::EpochRange DataLoader::iterate(int64_t epoch, int64_t start_batch) const {
  KILN_CHECK(start_batch >= 0 && start_batch <= size(), "DataLoader::iterate: start_batch ", start_batch,
             " is out of range for an epoch of ", size(), " batches");
  return EpochRange(core_, epoch, start_batch);
}

int64_t DataLoader::EpochRange::size() const { return core_->batch_sampler.size() - start_batch_; }

void DataLoader::set_epoch(int64_t epoch, int64_t start_batch) {
  KILN_CHECK(start_batch >= 0 && start_batch <= size(), "DataLoader::set_epoch: start_batch ", start_batch,
             " is out of range for an epoch of ", size(), " batches");
  epoch_ = epoch;
  start_batch_ = start_batch;
}

const std::shared_ptr<Dataset>& DataLoader::dataset() const { return core_->dataset; }
const std::shared_ptr<Sampler>& DataLoader::sampler() const { return core_->sampler; }
const DataLoaderOptions& DataLoader::options() const { return core_->options; }

}  // namespace kiln::data
