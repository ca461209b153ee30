// Token and positional embeddings with fairseq's conventions.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <mutex>

namespace leanseq::nn {

// fairseq's make_positions: pads get padding_idx, the j-th non-pad token of a row gets
// padding_idx + j (j = 1, 2, ...). tokens: [B, T] -> [B, T].
torch::Tensor make_positions(const torch::Tensor& tokens, int64_t padding_idx);

// The sinusoidal table [num, dim]: row p = [sin(p f) | cos(p f)], f_i = exp(-i ln(10000)/(half-1));
// row padding_idx is zero.
torch::Tensor sinusoidal_table(int64_t num, int64_t dim, int64_t padding_idx);

// Positional embedding: sinusoidal (a non-persistent buffer, grown on demand) or learned
// (a parameter named "weight" with max_positions + padding_idx + 1 rows).
class PositionalEmbeddingImpl : public torch::nn::Module {
 public:
  PositionalEmbeddingImpl(int64_t dim, int64_t padding_idx, int64_t max_positions, bool learned);
  // tokens: [B, T] -> [B, T, dim], positions from make_positions.
  torch::Tensor forward(const torch::Tensor& tokens);
  // Embeddings of positions padding_idx + start + 1 ... + n (incremental decoding ignores pads).
  // [batch, n, dim] on `device`: rows of the table viewed in place, without a lookup kernel or a
  // read-back of the largest position (a decoding step calls it once).
  torch::Tensor at_steps(int64_t start, int64_t n, int64_t batch, const torch::Device& device = torch::kCPU);
  bool learned() const { return learned_; }
  torch::Tensor weight;  // learned only

 private:
  torch::Tensor lookup(const torch::Tensor& positions);
  // The table of embeddings: the learned weight, or the sinusoidal table with at least `rows` rows
  // on `device` (grown or moved under a lock: threads decode with one model).
  torch::Tensor table(int64_t rows, const torch::Device& device);
  int64_t dim_, padding_idx_;
  bool learned_;
  torch::Tensor table_;  // sinusoidal only
  std::shared_ptr<std::mutex> table_mutex_ = std::make_shared<std::mutex>();
};
TORCH_MODULE(PositionalEmbedding);

// fairseq's `embed_scale * embed_tokens(x) + embed_positions(x)` as one operator.
inline torch::Tensor scaled_plus_positions(const torch::Tensor& token_embeddings, double scale,
                                           const torch::Tensor& positions) {
  return torch::add(positions, token_embeddings, scale);
}

// Embedding with fairseq's init: N(0, dim^-0.5), the padding row zero.
torch::nn::Embedding make_embedding(int64_t num, int64_t dim, int64_t padding_idx);

// Registers the decoder's output projection as `<owner>.output_projection.weight` [vocab, dim]:
// the token embedding itself when tied, else a new N(0, dim^-0.5) matrix. Returns the weight.
torch::Tensor register_output_projection(torch::nn::Module& owner, const torch::nn::Embedding& embed, bool tied,
                                         int64_t vocab, int64_t dim);

}  // namespace leanseq::nn
