// TensorDataset, Subset and random_split (include/kiln/data/dataset.h).
#include "kiln/data/dataset.h"

#include <cmath>
#include <numeric>

#include "core/tensor_impl.h"
#include "kiln/ops/creation.h"

namespace kiln::data {

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  KILN_CHECK(!tensors_.empty(), "TensorDataset: needs at least one tensor, got none");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    KILN_CHECK(t.defined(), "TensorDataset: tensor ", i, " is undefined");
    KILN_CHECK(t.dim() >= 1, "TensorDataset: tensor ", i, " is 0-D; every tensor needs a first dimension to index");
    KILN_CHECK(t.sizes()[0] == tensors_[0].sizes()[0], "TensorDataset: size mismatch between tensors: tensor ", i,
               " has shape ", shape_str(t.sizes()), " but tensor 0 has shape ", shape_str(tensors_[0].sizes()),
               "; their first dimensions must be equal");
  }
}

size_t TensorDataset::size() const { return static_cast<size_t>(tensors_[0].sizes()[0]); }

Sample TensorDataset::get(size_t index) const {
  KILN_CHECK(index < size(), "TensorDataset: index ", index, " is out of range for a dataset of size ", size());
  Sample sample;
  sample.reserve(tensors_.size());
  for (const Tensor& t : tensors_) sample.push_back(t.select(0, static_cast<int64_t>(index)));
  return sample;
}

Subset::Subset(std::shared_ptr<Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  KILN_CHECK(dataset_ != nullptr, "Subset: the dataset is null");
  const auto n = static_cast<int64_t>(dataset_->size());
  for (size_t i = 0; i < indices_.size(); ++i)
    KILN_CHECK(indices_[i] >= 0 && indices_[i] < n, "Subset: indices[", i, "] = ", indices_[i],
               " is out of range for a dataset of size ", n);
}

Sample Subset::get(size_t index) const {
  KILN_CHECK(index < indices_.size(), "Subset: index ", index, " is out of range for a subset of size ",
             indices_.size());
  return dataset_->get(static_cast<size_t>(indices_[index]));
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths, Generator& generator) {
  KILN_CHECK(dataset != nullptr, "random_split: the dataset is null");
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    KILN_CHECK(lengths[i] >= 0, "random_split: length at index ", i, " is negative (", lengths[i], ")");
    total += lengths[i];
  }
  const auto n = static_cast<int64_t>(dataset->size());
  KILN_CHECK(total == n, "random_split: sum of input lengths (", total,
             ") does not equal the length of the input dataset (", n, ")");
  std::vector<int64_t> perm = randperm(n, kInt64, &generator).to_vector<int64_t>();
  std::vector<std::shared_ptr<Subset>> out;
  out.reserve(lengths.size());
  auto from = perm.begin();
  for (int64_t len : lengths) {
    out.push_back(std::make_shared<Subset>(dataset, std::vector<int64_t>(from, from + len)));
    from += len;
  }
  return out;
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<double>& fractions, Generator& generator) {
  KILN_CHECK(dataset != nullptr, "random_split: the dataset is null");
  const double sum = std::accumulate(fractions.begin(), fractions.end(), 0.0);
  // math.isclose(sum, 1) with its default rel_tol, and sum <= 1, as torch tests.
  KILN_CHECK(std::abs(sum - 1.0) <= 1e-9 * std::max(std::abs(sum), 1.0) && sum <= 1.0,
             "random_split: fractions must sum to 1, but they sum to ", sum,
             " (pass integer lengths to split by counts)");
  const auto n = static_cast<int64_t>(dataset->size());
  std::vector<int64_t> lengths;
  lengths.reserve(fractions.size());
  for (size_t i = 0; i < fractions.size(); ++i) {
    KILN_CHECK(fractions[i] >= 0.0 && fractions[i] <= 1.0, "random_split: fraction at index ", i, " (", fractions[i],
               ") is not between 0 and 1");
    lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(n) * fractions[i])));
  }
  // The items floor() left over go one each to the splits in order.
  const int64_t remainder = n - std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  for (int64_t i = 0; i < remainder; ++i) lengths[static_cast<size_t>(i) % lengths.size()] += 1;
  return random_split(dataset, lengths, generator);
}

}  // namespace kiln::data
