// A training task: what the engine (train/trainer.h) trains and how it is judged. The engine owns
// the loop (epochs of shuffled batches, gradient accumulation, mixed precision, clipping, the
// optimizer step, distributed all-reduce, validation and patience, checkpoints and resume, signals,
// logging); a task supplies the model, its data as batches, the loss of one batch and the
// validation. Translation and language modelling (train/translation_task.h) and text
// classification (train/classification_task.h) are the tasks.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "leanseq/checkpoint/file.h"

namespace leanseq::train {

class Distributed;
class MixedPrecision;

// What one batch adds to an update.
struct BatchLoss {
  torch::Tensor loss;        // summed over the batch (backward runs on it)
  double weight = 0;         // what the gradient is divided by, summed over the update's batches and
                             // ranks: target tokens (fairseq's sample_size) or examples
  std::vector<double> sums;  // the task's running statistics (Task::train_stats reads their totals)
};

// One named figure of a log line and record.
struct Stat {
  std::string key;    // JSON key of the record
  std::string label;  // in the text line
  double value = 0;
  int precision = 3;  // digits after the point in the text line
};

struct Validation {
  double loss = 0;             // the task's validation loss
  double metric = 0;           // what checkpoint_best, stop.patience and LR shrinking judge
  double bleu = -1;            // detokenized BLEU when the task computed it
  std::vector<Stat> stats;     // the record's and the log line's figures, in order
};

class Task {
 public:
  virtual ~Task() = default;

  // Reads the data and builds the model (the engine has seeded the RNG). `resumed`: the checkpoint
  // a resumed run continues (read from `resumed_path`), whose model config and vocabularies win;
  // null for a new run.
  virtual void setup(const checkpoint::Checkpoint* resumed, const std::string& resumed_path) = 0;
  virtual torch::nn::Module& model() = 0;
  virtual std::string describe() const = 0;  // arch, parameters and data sizes, for the start-up log
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params) = 0;
  virtual double learning_rate(const checkpoint::TrainerProgress& progress) const = 0;

  // Before each epoch's batches (epochs count from 1): a task whose data changes from epoch to
  // epoch (shards read in turn) moves to the epoch's data; whether train_batches() changed.
  virtual bool begin_epoch(int64_t epoch) {
    (void)epoch;
    return false;
  }
  // Every training batch (example indices), in length order; the engine shuffles them per epoch.
  virtual std::vector<std::vector<int64_t>> train_batches() const = 0;
  // Runs the model on a batch in training mode (its forward under `amp`'s autocast).
  virtual BatchLoss loss(const std::vector<int64_t>& batch, const torch::Device& device, const MixedPrecision& amp) = 0;
  // How many running statistics BatchLoss::sums holds.
  virtual size_t sum_count() const = 0;
  // The figures of a train log line from the sums of `loss` over an interval and their weight.
  virtual std::vector<Stat> train_stats(const std::vector<double>& sums, double weight) const = 0;
  // "tokens" or "examples": what BatchLoss::weight counts (the log's "<unit>_per_second").
  virtual std::string weight_unit() const = 0;

  // Validation in evaluation mode; every rank calls it and gets the same answer (`dist`: null for
  // one process).
  virtual Validation validate(const torch::Device& device, Distributed* dist) = 0;
  virtual std::string metric_name() const = 0;  // "loss", "bleu", "accuracy"
  virtual bool higher_is_better() const = 0;
  // After each validation: a task's rules for shrinking the learning rate (TrainerProgress::lr_shrinks).
  virtual void after_validation(const Validation& v, bool better, bool epoch_end, checkpoint::TrainerProgress& progress) {
    (void)v, (void)better, (void)epoch_end, (void)progress;
  }

  // What checkpoints carry.
  virtual std::string config_yaml() = 0;
  virtual checkpoint::VocabFiles vocab() const = 0;

  // On rank 0 once training ended without a signal (e.g. the test set scored with checkpoint_best).
  virtual void finish(const std::string& save_dir, const torch::Device& device) { (void)save_dir, (void)device; }
};

}  // namespace leanseq::train
