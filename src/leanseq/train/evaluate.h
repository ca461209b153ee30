// Teacher-forced loss of a model over a whole dataset: the trainer's validation and `leanseq
// eval-lm` (perplexity of a language model) share it.
#pragma once
#include <cmath>
#include <cstdint>

#include "leanseq/data/batching.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::train {

struct LossTotals {
  double loss = 0, nll = 0;  // sums in nats (loss label-smoothed)
  int64_t tokens = 0;        // non-pad target tokens, </s> included
  // Per token, base 2 (as fairseq reports); perplexity = 2^nll_base2().
  double loss_base2() const { return tokens > 0 ? loss / tokens / std::log(2.0) : 0; }
  double nll_base2() const { return tokens > 0 ? nll / tokens / std::log(2.0) : 0; }
  double perplexity() const { return std::pow(2.0, nll_base2()); }
};

// Evaluation mode, no gradients, batched as `batching` says (pairs over its length limits are
// left out). With num_shards > 1, only the batches i with i % num_shards == shard (one rank's part
// of a distributed validation; the parts' totals add up to the whole).
LossTotals dataset_loss(models::Seq2SeqModel& model, const data::PairDataset& dataset,
                        const data::BatchingOptions& batching, double label_smoothing, int shard = 0,
                        int num_shards = 1);

}  // namespace leanseq::train
