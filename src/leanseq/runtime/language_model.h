// A language model's scores of given text: the log-probability of every token of fairseq's
// language-modeling blocks (data/lm_blocks.h), as fairseq-eval-lm's SequenceScorer computes them.
#pragma once
#include <cstdint>
#include <vector>

#include "leanseq/data/lm_blocks.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::runtime {

// Each block's target tokens' natural log-probabilities, in order, one full (teacher-forced) pass
// per batch of consecutive blocks: at most `max_tokens` padded input tokens per batch (fewer when
// the batch's logits would pass 2^24 floats; one block at least), in evaluation mode without gradients.
// `batches`, when given, counts the batches.
std::vector<std::vector<float>> score_lm_blocks(models::Seq2SeqModel& model, const std::vector<data::LmBlock>& blocks,
                                                int64_t max_tokens, int64_t vocab, int64_t* batches = nullptr);

}  // namespace leanseq::runtime
