// The sequence-to-sequence task of the training engine: translation on a prepared parallel corpus,
// or language modelling on a prepared monolingual one (the model ignores the source). Label-smoothed
// cross-entropy per target token; validation loss (and BLEU with valid.bleu) on the valid split;
// Adam or NAG with the configured schedule.
#pragma once
#include <memory>

#include "leanseq/checkpoint/run_config.h"
#include "leanseq/train/task.h"

namespace leanseq::train {

class TranslationTask : public Task {
 public:
  explicit TranslationTask(checkpoint::RunConfig cfg);
  ~TranslationTask() override;

  void setup(const checkpoint::Checkpoint* resumed, const std::string& resumed_path) override;
  torch::nn::Module& model() override;
  std::string describe() const override;
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params) override;
  double learning_rate(const checkpoint::TrainerProgress& progress) const override;
  bool begin_epoch(int64_t epoch) override;  // moves to the epoch's shard of sharded data
  std::vector<std::vector<int64_t>> train_batches() const override;
  BatchLoss loss(const std::vector<int64_t>& batch, const torch::Device& device, const MixedPrecision& amp) override;
  size_t sum_count() const override { return 2; }  // label-smoothed loss, nll (nats)
  std::vector<Stat> train_stats(const std::vector<double>& sums, double weight) const override;
  std::string weight_unit() const override { return "tokens"; }
  Validation validate(const torch::Device& device, Distributed* dist) override;
  std::string metric_name() const override;
  bool higher_is_better() const override;
  void after_validation(const Validation& v, bool better, bool epoch_end, checkpoint::TrainerProgress& progress) override;
  std::string config_yaml() override;
  checkpoint::VocabFiles vocab() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::train
