#include "leanseq/train/evaluate.h"

#include "leanseq/data/dictionary.h"
#include "leanseq/kernels/label_smoothed_ce.h"

namespace leanseq::train {

LossTotals dataset_loss(models::Seq2SeqModel& model, const data::PairDataset& dataset,
                        const data::BatchingOptions& batching, double label_smoothing, int shard,
                        int num_shards) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  LossTotals t;
  const auto device = model.parameters().front().device();
  const auto batches = data::batch_by_size(dataset.lengths(), batching);
  for (size_t i = static_cast<size_t>(shard); i < batches.size(); i += static_cast<size_t>(num_shards)) {
    auto b = dataset.batch(batches[i]).to(device);
    auto logits = kernels::cross_entropy_input(model.forward(b.src, b.src_lengths, b.prev_output).logits);
    auto l = kernels::label_smoothed_cross_entropy(logits.view({-1, logits.size(-1)}), b.target.view(-1),
                                                   label_smoothing, data::Dictionary::kPad);
    t.loss += l.loss.item<double>();
    t.nll += l.nll.item<double>();
    t.tokens += b.ntokens;
  }
  model.train(was_training);
  return t;
}

}  // namespace leanseq::train
