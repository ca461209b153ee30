// The interface every architecture implements; beam search, the trainer and the server know only
// this. Public tensors are batch-first.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>

#include "leanseq/core/config.h"
#include "leanseq/nn/incremental_state.h"

namespace leanseq::models {

struct EncoderOut {
  torch::Tensor out;           // [B, S, C]
  torch::Tensor padding_mask;  // [B, S] bool, true at pads
  torch::Tensor values;        // [B, S, C'] attention values when they differ from `out` (ConvS2S)
  // Consecutive rows that are copies of one source's (a sentence's beams after their expansion).
  int64_t rows = 1;
  // Selects rows `order` of every tensor (beam expansion, dropping finished sentences); after it
  // every rows_after consecutive rows are copies of one another where `order` takes each such group
  // from one group of copies. Sentences that leave a batch of beams are dropped in place
  // (nn::keep_rows_in_place): the rows of the others move up, with nothing allocated.
  void reorder(const torch::Tensor& order, int64_t rows_after = 1) {
    // Within a group the rows are copies, so a tensor left to index_select holds what moving its
    // groups would have given.
    const auto sources = nn::grouped_sources(order, rows, rows_after);
    const bool drop = sources.defined() && rows_after == rows;
    for (auto* t : {&out, &padding_mask, &values}) {
      if (t->defined() && !(drop && nn::keep_rows_in_place(*t, sources, rows))) *t = t->index_select(0, order);
    }
    rows = sources.defined() ? rows_after : 1;
  }
};

struct DecoderOut {
  torch::Tensor logits;  // [B, T, V]
  torch::Tensor attn;    // [B, T, S] encoder attention (averaged over heads), when asked for
  // `logits` hold log-probabilities (log_softmax over V): a step asked for them through its state
  // (IncrementalState::log_probs) and the model's output layer gave them.
  bool log_probs = false;
};

// Language models implement the same interface with an empty encoder output, so that the trainer,
// checkpoints and evaluation serve both.
class Seq2SeqModel : public torch::nn::Module {
 public:
  // src: [B, S] int64 (pads anywhere: masks and positions ignore them); src_lengths: [B].
  virtual EncoderOut encode(const torch::Tensor& src, const torch::Tensor& src_lengths) = 0;
  // Teacher-forced decoder pass. prev_tokens: [B, T] = [</s>, y1 .. y(T-1)].
  virtual DecoderOut decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn = false) = 0;
  // A fresh incremental state for `enc`.
  virtual nn::IncrementalState init_state(const EncoderOut& enc) = 0;
  // Feeds n new target tokens ([B, n]) and returns their logits [B, n, V]; advances `state`. With
  // state.log_probs, a model may return their log-probabilities instead, and says so in the result.
  virtual DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                          bool need_attn = false) = 0;
  // Reorders the batch rows of the encoder output and the state (order: [B'] int64). With
  // within_sentence, `order` keeps every row inside its sentence's group of beams, so what is
  // the same for all beams of a sentence (encoder output, encoder-side caches) stays as it is.
  virtual void reorder(EncoderOut& enc, nn::IncrementalState& state, const torch::Tensor& order,
                       bool within_sentence) {
    if (!within_sentence) enc.reorder(order, state.rows_per_source);
    state.reorder(order, within_sentence);
  }
  virtual int64_t max_target_positions() const = 0;
  // Whether step() reads the encoder output only on a state's first step (to fill the state's
  // caches of it): a decoder may then let it go after that step, and reorders no longer move it.
  virtual bool steps_read_encoder_out_once() const { return false; }

  // Convenience: encode + teacher-forced decode.
  DecoderOut forward(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& prev_tokens,
                     bool need_attn = false) {
    return decode(prev_tokens, encode(src, src_lengths), need_attn);
  }
};

// A family's typed config; fields are listed once in visit().
class ModelConfig : public Configurable {
 public:
  virtual std::string family() const = 0;
  virtual std::shared_ptr<ModelConfig> clone() const = 0;
  // One line of key dimensions for list-archs.
  virtual std::string summary() const = 0;
  // Throws ConfigError when the values are inconsistent.
  virtual void validate() const {}
  // A decoder-only language model (trained on monolingual data prepared with --lm; its
  // encode() ignores the source).
  virtual bool language_model() const { return false; }
};

}  // namespace leanseq::models
