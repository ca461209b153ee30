// Beam search with fairseq's SequenceGenerator semantics, over a narrow step interface so that it
// can be tested with a scripted decoder.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/decode/constraints.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::decode {

struct SearchOptions {
  int64_t beam = 5;
  double lenpen = 1.0;      // final score = sum log p / len^lenpen (len counts </s>)
  // CTranslate2's search (its models'): a hypothesis that reaches max_len ends there, without
  // </s>'s log-probability and length (fairseq's gets </s> forced), every hypothesis of a step's
  // top `beam` that ends is kept, even past `beam` of them, before the best are picked, and
  // before min_len the other tokens share </s>'s probability (CTranslate2 leaves </s> out before
  // its softmax; fairseq after).
  bool max_len_cuts = false;
  double max_len_a = 0.0;   // max_len = a * src_len + b (src_len: padded source length of the batch)
  int64_t max_len_b = 200;
  int64_t min_len = 1;
  double unk_penalty = 0.0; // subtracted from <unk>'s log-prob
  int64_t nbest = 1;
  bool need_attn = false;   // collect encoder attention per output token (alignments)
  // The source's framing (with src_lengths): alignments point at its tokens, not at a <s> before
  // them or the </s> after them; a position counts from the first token.
  bool source_bos = false, source_eos = true;
  int64_t no_repeat_ngram_size = 0;  // no hypothesis repeats an n-gram of this size (0: off)
  double temperature = 1.0;          // logits divided by it before the softmax
  // Sampling instead of beam search (fairseq's --sampling): `beam` samples per sentence, each
  // token drawn from the model's distribution, restricted to the `sampling_topk` most likely
  // tokens (> 0) or to the smallest set whose probability reaches `sampling_topp` (> 0).
  bool sampling = false;
  int64_t sampling_topk = -1;
  double sampling_topp = -1.0;
  // Lexically constrained search (fairseq's --constraints): each sentence's translations contain
  // its constraints, in their order or in any. Every sentence of the batch is searched so, also one
  // without constraints.
  ConstraintOrder constraint_order = ConstraintOrder::none;
  // Diverse beam search (fairseq's --diverse-beam-groups, Vijayakumar et al. 2016): the beam is
  // split into this many groups (> 1: on; it divides beam), each searched in turn with its
  // tokens' log-probabilities lowered by diverse_beam_strength per earlier group's candidate of
  // the same token at this step; the penalties count in the scores, as fairseq's.
  int64_t diverse_beam_groups = -1;
  double diverse_beam_strength = 0.5;
  // Diverse siblings (fairseq's --diversity-rate, Li et al. 2016; > -1: on): after the first step,
  // the k-th best continuation of each row loses k x diversity_rate before the rows' candidates
  // are ranked together; the penalties count in the scores, as fairseq's.
  double diversity_rate = -1;
  // Asked before each step when set: true stops the search with decode::Cancelled (a server's
  // request that timed out).
  std::function<bool()> cancelled;
};

// A search stopped by SearchOptions::cancelled.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// For sampling: the probabilities of each row's tokens restricted to the smallest set, in
// descending order, whose mass reaches p (the others 0), and their vocabulary ids; fairseq's top-p.
// probs: [..., V] -> ([..., K], [..., K]) with K the largest set size of any row.
std::pair<torch::Tensor, torch::Tensor> top_p(const torch::Tensor& probs, double p);

struct Hypothesis {
  std::vector<int64_t> tokens;          // without the leading </s>, ending with </s>
  double score = 0;                     // normalized by length^lenpen
  std::vector<float> positional_scores; // per-token log-probs
  std::vector<int64_t> alignment;       // per token: the source position attended most (need_attn)
};

// What beam search needs from a decoder. Rows are sentence-major: row = sentence * beam + k.
class StepDecoder {
 public:
  virtual ~StepDecoder() = default;
  // Feeds the last token of every row ([N] int64); returns log-probs [N, V] (float) and, when
  // `attn` is non-null, the encoder attention of this step [N, S].
  virtual torch::Tensor step(const torch::Tensor& last_tokens, torch::Tensor* attn) = 0;
  // Keeps rows `order` ([N'] int64). within_sentence: every row stays in its sentence's group.
  virtual void reorder(const torch::Tensor& order, bool within_sentence) = 0;
  // Whether the first step may feed one row per sentence (its beams are all the same there): step
  // then returns one row per sentence, and the first reorder, whose `order` still counts beam
  // rows (sentence * beam + 0), makes the beam rows from them.
  virtual bool first_step_per_sentence() const { return false; }
};

// Decodes `bsz` sentences; returns, per sentence, its finalized hypotheses best first (beam of
// them). max_positions bounds max_len as in fairseq (max_len <= max_positions - 1).
// `prefixes` (one per sentence, may be empty, without </s>): target tokens every hypothesis of the
// sentence starts with, as fairseq's prefix_tokens (forced with their own log-probabilities).
// `src_lengths` (one per sentence, </s> included): with opt.need_attn, a hypothesis' alignment
// points at a source token, never its </s> (fairseq's hard alignment); without, any position.
// `constraints` (one per sentence, or nullptr for none) with opt.constraint_order. A sentence whose
// constraints no hypothesis has met by max_len ends unconstrained there (fairseq stops with an
// AssertionError).
std::vector<std::vector<Hypothesis>> beam_search(StepDecoder& decoder, int64_t bsz, int64_t src_len,
                                                 int64_t max_positions, int64_t vocab, const SearchOptions& opt,
                                                 const std::vector<std::vector<int64_t>>* prefixes = nullptr,
                                                 const std::vector<int64_t>* src_lengths = nullptr,
                                                 const std::vector<Constraints>* constraints = nullptr);

// A model's log-probabilities from its logits [..., V], divided by `temperature` first; logits
// moved in (referred to by nothing else) are overwritten (kernels::log_softmax).
torch::Tensor log_probs(torch::Tensor logits, double temperature);
// Several models' log-probabilities as one (fairseq's EnsembleModel): the log of their mean probability.
torch::Tensor ensemble_log_probs(const std::vector<torch::Tensor>& lprobs);

// A StepDecoder over a Seq2SeqModel: encodes once, steps with the model's incremental state, and
// expands the encoder output and the state to `beam` rows per sentence at the first reorder (or at
// a first step fed beam rows). With `output_ids` (a vocabulary
// shortlist: [V'] int64 ascending), its log-probabilities are over those tokens only, column k for
// output_ids[k], and the tokens it is fed are such columns.
class ModelStepDecoder : public StepDecoder {
 public:
  ModelStepDecoder(models::Seq2SeqModel& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                   int64_t beam, double temperature = 1.0, const torch::Tensor& output_ids = {});
  torch::Tensor step(const torch::Tensor& last_tokens, torch::Tensor* attn) override;
  void reorder(const torch::Tensor& order, bool within_sentence) override;
  bool first_step_per_sentence() const override { return true; }

 private:
  // From one row per sentence to the beam rows `rows` ([N'] sentence indices).
  void expand(const torch::Tensor& rows);
  // Whether the encoder output and the state have beam rows per sentence.
  bool expanded() const { return state_.rows_per_source == beam_; }
  models::Seq2SeqModel& model_;
  double temperature_;
  int64_t sentences_, beam_;
  models::EncoderOut enc_;  // let go after the first step where the model reads it only then
  nn::IncrementalState state_;
  torch::Tensor output_ids_;
  torch::Device device_;  // the model's
};

// Several models decoding together (fairseq's EnsembleModel): each with its own encoder output
// and incremental state; at every step the log of their mean probability, and their mean
// attention. All must share the target dictionary.
class EnsembleStepDecoder : public StepDecoder {
 public:
  EnsembleStepDecoder(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                      const torch::Tensor& src_lengths, int64_t beam, double temperature = 1.0,
                      const torch::Tensor& output_ids = {});
  torch::Tensor step(const torch::Tensor& last_tokens, torch::Tensor* attn) override;
  void reorder(const torch::Tensor& order, bool within_sentence) override;
  bool first_step_per_sentence() const override { return true; }

 private:
  std::vector<std::unique_ptr<ModelStepDecoder>> members_;
};

// Search over several models as one (an ensemble when there is more than one). `output_ids` (a
// vocabulary shortlist, [V'] int64 ascending, the special tokens 0-3 and every prefix and
// constraint token among them): the translations use those tokens only, each normalised over them.
std::vector<std::vector<Hypothesis>> generate(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes = nullptr,
                                              const std::vector<Constraints>* constraints = nullptr,
                                              const torch::Tensor& output_ids = {});

// Convenience: beam search over a model for one padded source batch.
std::vector<std::vector<Hypothesis>> generate(models::Seq2SeqModel& model, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes = nullptr);

}  // namespace leanseq::decode
