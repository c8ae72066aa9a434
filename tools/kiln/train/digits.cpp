// `kiln train --task digits`: a small CNN on the 8×8 handwritten digits (data/digits.u8:
// 1797 rows of 64 pixels valued 0–16 and a label), 80/20 train/test split.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "kiln/data.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "tools/kiln/train/train.h"

namespace kiln::train {

namespace {

constexpr int64_t kImages = 1797;
constexpr int64_t kRow = 65;
constexpr uint64_t kSplitSeed = 20261202;  // the split never changes with --seed

std::shared_ptr<nn::Sequential> digits_cnn() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 32, 3, 1, 1), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(32, 64, 3, 1, 1), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(64 * 4 * 4, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 10)});
}

class DigitsTask : public Task {
 public:
  DigitsTask(const Options& o, const std::string& dir)
      : batch_(o.batch), lr_(o.lr), seed_(o.seed), device_(o.device) {
    auto path = std::filesystem::path(dir) / "digits.u8";
    std::ifstream f(path, std::ios::binary);
    KILN_CHECK(f, "kiln train: cannot open ", path.string());
    std::vector<uint8_t> raw(kImages * kRow);
    f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    KILN_CHECK(f.gcount() == static_cast<std::streamsize>(raw.size()) && f.peek() == EOF, "kiln train: ",
               path.string(), " is not ", raw.size(), " bytes (1797 rows of 64 pixels and a label)");
    Tensor pixels = empty({kImages, 64}, kFloat32);
    Tensor labels = empty({kImages}, kInt64);
    auto* px = pixels.data_ptr<float>();
    auto* lb = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < kImages; ++i) {
      for (int64_t j = 0; j < 64; ++j) {
        uint8_t v = raw[i * kRow + j];
        KILN_CHECK(v <= 16, "kiln train: ", path.string(), ": pixel value ", int(v), " in row ", i, " (expected 0-16)");
        px[i * 64 + j] = static_cast<float>(v) / 16.0f;
      }
      uint8_t y = raw[i * kRow + 64];
      KILN_CHECK(y <= 9, "kiln train: ", path.string(), ": label ", int(y), " in row ", i, " (expected 0-9)");
      lb[i] = y;
    }
    Tensor images = pixels.view({kImages, 1, 8, 8});
    Generator split(kSplitSeed);
    Tensor perm = randperm(kImages, kInt64, &split);
    int64_t n_test = kImages / 5;
    Tensor test_idx = perm.slice(0, 0, n_test), train_idx = perm.slice(0, n_test);
    train_x_ = images.index_select(0, train_idx);
    train_y_ = labels.index_select(0, train_idx);
    test_x_ = images.index_select(0, test_idx);
    test_y_ = labels.index_select(0, test_idx);
    KILN_CHECK(batch_ <= train_x_.size(0), "--batch: ", batch_, " is larger than the ", int64_t(train_x_.size(0)),
               " training images");
    auto train_set = std::make_shared<data::TensorDataset>(std::vector<Tensor>{train_x_, train_y_});
    loader_ = std::make_unique<data::DataLoader>(
        train_set, data::DataLoaderOptions{.batch_size = batch_, .shuffle = true, .drop_last = true,
                                           .num_workers = 1, .seed = seed_ * 1000003 + 17});
    model_ = digits_cnn();
    // The data stays on the CPU (the loader shuffles there); each batch moves to the device.
    model_->to(device_);
    test_x_ = test_x_.to(device_);
    test_y_ = test_y_.to(device_);
  }

  nn::Module& model() override { return *model_; }
  int64_t samples_per_step() const override { return batch_; }
  double lr_at(int64_t) const override { return lr_; }

  // A DataLoader over the training images (shuffled per epoch from --seed, last partial batch
  // dropped); step s is batch s mod size() of epoch s / size(), so a resumed run picks up the
  // same batch (DataLoader::iterate).
  Tensor loss_for_step(int64_t step) override {
    int64_t per_epoch = loader_->size(), epoch = step / per_epoch, b = step % per_epoch;
    if (!it_ || it_->epoch() != epoch || it_->batch_index() != b) {
      range_.reset(new data::DataLoader::EpochRange(loader_->iterate(epoch, b)));
      it_.reset(new data::DataLoader::Iterator(range_->begin()));
    }
    data::Batch batch = std::move(**it_);
    ++*it_;
    if (*it_ == std::default_sentinel) it_.reset();
    return cross_entropy(model_->forward(batch[0].to(device_)), batch[1].to(device_));
  }

  void finish(Summary& s, std::ostream& out) override {
    Tensor pred = model_->forward(test_x_).argmax(1);
    double acc = pred.eq(test_y_).to(kFloat64).mean().item<double>();
    s.test_accuracy = acc;
    char buf[128];
    std::snprintf(buf, sizeof buf, "test accuracy %.2f%% (%lld held-out images)\n", acc * 100,
                  static_cast<long long>(test_x_.size(0)));
    out << buf;
  }

  std::map<std::string, std::string> config() const override { return {{"model", "digits_cnn_v1"}}; }

 private:
  int64_t batch_;
  double lr_;
  uint64_t seed_;
  Device device_;
  Tensor train_x_, train_y_, test_x_, test_y_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<data::DataLoader::EpochRange> range_;
  std::unique_ptr<data::DataLoader::Iterator> it_;
  std::shared_ptr<nn::Sequential> model_;
};

}  // namespace

std::unique_ptr<Task> make_digits_task(const Options& o, const std::string& dir) {
  return std::make_unique<DigitsTask>(o, dir);
}

}  // namespace kiln::train
