// The attention analysis behind SAN's sharing policy: a trained Transformer runs teacher-forced
// over held-out pairs and, for each kind of attention, every pair of layers gets its mean
// similarity (1 - Jensen-Shannon divergence of their distributions, over heads and positions).
#pragma once
#include <string>
#include <vector>

#include "leanseq/data/batching.h"
#include "leanseq/eval/attention_similarity.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::analyze {

struct AttentionSimilarity {
  std::string kind;        // encoder_self_attention, decoder_self_attention, encoder_decoder_attention
  std::string side, key;   // its grouping goes to model.<side>.<key>
  eval::Matrix matrix;     // layers x layers
  int64_t positions = 0;   // query positions x heads averaged over
};

// Over the first `max_sentences` pairs of `dataset` (0: all), in batches of at most max_tokens.
// Throws ConfigError when the model is not a Transformer. Decoder self-attention is left out for
// an average-attention decoder.
std::vector<AttentionSimilarity> attention_similarity(models::Seq2SeqModel& model, const data::PairDataset& dataset,
                                                      int64_t max_sentences, int64_t max_tokens);

}  // namespace leanseq::analyze
