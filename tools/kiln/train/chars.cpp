// `kiln train --task chars`: a character-level GPT (the zoo's GPT at a small size) on tiny
// Shakespeare, 90/10 train/validation split; prints generated text at the end.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "models/gpt.h"
#include "tools/kiln/train/train.h"

namespace kiln::train {

namespace {

constexpr int64_t kBlock = 64;
constexpr int64_t kWarmup = 30;  // linear warm-up steps; the schedule never depends on --steps
constexpr int64_t kValBatches = 8;
constexpr int64_t kSampleChars = 240;

class CharsTask : public Task {
 public:
  CharsTask(const Options& o, const std::string& dir)
      : batch_(o.batch), lr_(o.lr), seed_(o.seed), device_(o.device) {
    auto path = std::filesystem::path(dir) / "tinyshakespeare.txt";
    std::ifstream f(path, std::ios::binary);
    KILN_CHECK(f, "kiln train: cannot open ", path.string());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    KILN_CHECK(static_cast<int64_t>(text.size()) > 20 * kBlock, "kiln train: ", path.string(), " is too short (",
               text.size(), " bytes)");
    bool seen[256] = {};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) {
        index_of_[c] = static_cast<int64_t>(vocab_.size());
        vocab_.push_back(static_cast<char>(c));
      }
    Tensor all = empty({static_cast<int64_t>(text.size())}, kInt64);
    auto* p = all.data_ptr<int64_t>();
    for (size_t i = 0; i < text.size(); ++i) p[i] = index_of_[static_cast<unsigned char>(text[i])];
    int64_t n_train = all.size(0) * 9 / 10;
    train_ = all.slice(0, 0, n_train);
    val_ = all.slice(0, n_train);
    models::GPTConfig cfg{.vocab_size = static_cast<int64_t>(vocab_.size()),
                          .block_size = kBlock,
                          .n_embd = 128,
                          .n_head = 4,
                          .n_layer = 4};
    model_ = std::make_shared<models::GPT>(cfg);
    // The zoo's GPT keeps torch_zoo's init (N(0, 1) embeddings, tied to the head), which starts
    // a small model at a loss near 80; GPT-2's N(0, 0.02) for matrices starts it at ln(vocab).
    NoGradGuard no_grad;
    for (auto& [name, p] : model_->named_parameters()) {
      if (p.dim() >= 2)
        nn::init::normal_(p, 0.0, 0.02);
      else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0)
        nn::init::zeros_(p);
    }
    model_->to(device_);  // initialised on the CPU: the same weights on every device
  }

  nn::Module& model() override { return *model_; }
  int64_t samples_per_step() const override { return batch_; }
  double lr_at(int64_t step) const override {
    return lr_ * std::min(1.0, static_cast<double>(step + 1) / kWarmup);
  }

  Tensor loss_for_step(int64_t step) override {
    Generator g(seed_ * 1000003 + 29);
    g.set_offset(static_cast<uint64_t>(step) * 64);  // step s draws from its own Philox range
    return window_loss(train_, batch_, g);
  }

  void finish(Summary& s, std::ostream& out) override {
    Generator g(7);
    double total = 0;
    for (int64_t i = 0; i < kValBatches; ++i) total += window_loss(val_, 32, g).item<float>();
    s.val_loss = total / kValBatches;
    s.sample = generate("\n", kSampleChars);
    char buf[96];
    std::snprintf(buf, sizeof buf, "validation loss %.4f\n--- sample ---\n", *s.val_loss);
    out << buf << s.sample << "\n--------------\n";
  }

  std::map<std::string, std::string> config() const override {
    return {{"model", "char_gpt_v1"}, {"vocab", std::string(vocab_.begin(), vocab_.end())}};
  }

 private:
  // Random windows of kBlock + 1 characters: inputs are the first kBlock, targets the next.
  Tensor window_loss(const Tensor& data, int64_t batch, Generator& g) {
    Tensor starts = randint(0, data.size(0) - kBlock - 1, {batch}, kInt64, &g);
    Tensor idx = starts.unsqueeze(1) + arange(kBlock, kInt64).unsqueeze(0);  // [B, T]
    Tensor x = data.index_select(0, idx.flatten()).view({batch, kBlock});
    Tensor y = data.index_select(0, (idx + 1).flatten());
    Tensor logits = model_->forward(x.to(device_));
    return cross_entropy(logits.view({batch * kBlock, -1}), y.to(device_));
  }

  // Samples with temperature 0.8 from a fixed generator, so the text is reproducible.
  std::string generate(const std::string& prompt, int64_t n) {
    std::vector<int64_t> ctx;
    for (unsigned char c : prompt) ctx.push_back(index_of_[c]);
    Generator g(seed_ + 12345);
    std::string text;
    for (int64_t i = 0; i < n; ++i) {
      int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ctx.size()) - kBlock);
      std::vector<int64_t> window(ctx.begin() + start, ctx.end());
      Tensor x = tensor_from(window);
      Tensor logits = model_->forward(x.to(device_)).select(1, x.size(1) - 1).select(0, 0);
      std::vector<float> probs = softmax(logits / 0.8, 0).cpu().to_vector<float>();
      double u = rand({1}, kFloat64, &g).item<double>(), acc = 0;
      int64_t pick = static_cast<int64_t>(probs.size()) - 1;
      for (size_t k = 0; k < probs.size(); ++k) {
        acc += probs[k];
        if (u < acc) {
          pick = static_cast<int64_t>(k);
          break;
        }
      }
      ctx.push_back(pick);
      text += vocab_[static_cast<size_t>(pick)];
    }
    return text;
  }

  static Tensor tensor_from(const std::vector<int64_t>& v) {
    Tensor t = empty({1, static_cast<int64_t>(v.size())}, kInt64);
    std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
    return t;
  }

  int64_t batch_;
  double lr_;
  uint64_t seed_;
  Device device_;
  std::vector<char> vocab_;
  int64_t index_of_[256] = {};
  Tensor train_, val_;
  std::shared_ptr<models::GPT> model_;
};

}  // namespace

std::unique_ptr<Task> make_chars_task(const Options& o, const std::string& dir) {
  return std::make_unique<CharsTask>(o, dir);
}

}  // namespace kiln::train
