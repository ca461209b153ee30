// Text classifiers: a sentence encoder (DiSAN, or a Transformer or LightConv encoder), a pooling
// to one vector per sentence, and an MLP head. Sentence pairs are encoded by the same encoder and
// classified from [u; v; u - v; u * v] (as DiSAN's NLI model does).
#pragma once
#include <torch/torch.h>

#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/disan.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/linear.h"

namespace leanseq::models {

class Registry;

struct ClassifierConfig : ModelConfig {
  std::string encoder = "disan";  // disan | transformer | lightconv
  int64_t embed_dim = 300;
  int64_t hidden_dim = 300;       // DiSAN: per direction (tokens are 2x wide); others: layer width
  int64_t layers = 2, heads = 4, ffn_dim = 600, kernel_size = 3;  // transformer / lightconv
  std::string pooling;            // mean | max | source2token (empty: source2token for disan, mean otherwise)
  std::string activation = "elu"; // DiSAN blocks, source2token and the head
  double dropout = 0.3;
  int64_t classifier_hidden = 300;
  int64_t max_positions = 512;    // longer inputs are cut
  // A2 double-attention blocks after these encoder layers ("0,1"; DiSAN has one layer, its
  // forward/backward pair), with m features and n descriptors (0: a quarter of the width)
  A2Blocks a2;
  // Set from the training data (and stored in checkpoints):
  bool pair = false;
  int64_t num_classes = 2;

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "classifier"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<ClassifierConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  std::string pooling_kind() const;
  // Width of one sentence's token vectors and of its pooled vector.
  int64_t token_dim() const;
};

class SentenceClassifierImpl : public torch::nn::Module {
 public:
  SentenceClassifierImpl(const ClassifierConfig& cfg, int64_t vocab_size);
  // tokens: [B, T] int64 (pad = 1) -> per-token vectors [B, T, token_dim], zero at pads.
  torch::Tensor encode(const torch::Tensor& tokens);
  // One vector per sentence [B, token_dim].
  torch::Tensor sentence(const torch::Tensor& tokens);
  // Logits [B, num_classes]; tokens2 only for pairs.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& tokens2 = {});
  const ClassifierConfig& config() const { return cfg_; }

  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};  // transformer / lightconv
  nn::Linear input_proj{nullptr};              // when embed_dim != hidden_dim (transformer / lightconv)
  nn::DiSAEncoder disa{nullptr};
  torch::nn::ModuleList layers;
  std::vector<nn::DoubleAttention> a2;                // per layer; null where none follows it
  nn::Source2Token source2token{nullptr};
  nn::Linear pre_logits{nullptr}, out{nullptr};

 private:
  enum class Pooling { mean, max, source2token };
  ClassifierConfig cfg_;
  // The config's strings, parsed once.
  bool disan_;
  Pooling pooling_;
  nn::Activation activation_;
};
TORCH_MODULE(SentenceClassifier);

SentenceClassifier build_classifier(const ClassifierConfig& cfg, int64_t vocab_size);

void register_classifiers(Registry& reg);

}  // namespace leanseq::models
