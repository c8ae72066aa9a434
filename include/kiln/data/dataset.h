// Datasets, as torch.utils.data: a Dataset maps an index to one sample, and a sample is a list
// of tensors (e.g. {image, label}) that the DataLoader's collate turns into a batch.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln::data {

using Sample = std::vector<Tensor>;

// The map-style dataset (torch's Dataset with __len__ and __getitem__). get() must throw a
// kiln::Error for an index >= size(). With DataLoader(num_workers > 0) get() is called from
// several threads at once, so it must be safe to call concurrently (it is const for that reason).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Sample get(size_t index) const = 0;
};

// Wraps tensors that share their first dimension; sample i is {t[i] for t in tensors}.
// The sample's tensors are views of the dataset's tensors (as torch's tensor[i]).
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);
  size_t size() const override;
  Sample get(size_t index) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
};

// The samples of `dataset` at `indices`, in that order (indices may repeat). Unlike torch,
// indices are checked against the dataset's size here, and negative ones are rejected.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<Dataset> dataset, std::vector<int64_t> indices);
  size_t size() const override { return indices_.size(); }
  Sample get(size_t index) const override;
  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// Splits `dataset` into non-overlapping random Subsets of the given lengths (which must sum to
// its size), drawing one randperm from `generator`, as torch.utils.data.random_split.
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  Generator& generator = default_generator());
// Fractions summing to 1: each split gets floor(size * fraction) items and the remainder is
// dealt one by one to the splits in order, as torch does.
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<double>& fractions,
                                                  Generator& generator = default_generator());
// Braced lists pick the overload by element type: random_split(ds, {800, 200}, gen) splits by
// lengths, random_split(ds, {0.8, 0.2}, gen) by fractions.
template <std::integral T>
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  std::initializer_list<T> lengths,
                                                  Generator& generator = default_generator()) {
  return random_split(dataset, std::vector<int64_t>(lengths.begin(), lengths.end()), generator);
}
template <std::floating_point T>
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  std::initializer_list<T> fractions,
                                                  Generator& generator = default_generator()) {
  return random_split(dataset, std::vector<double>(fractions.begin(), fractions.end()), generator);
}

}  // namespace kiln::data
