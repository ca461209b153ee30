// Targeted Dropout (Gomez et al. 2019) and magnitude pruning over the weights of any model.
//
// The weights it applies to are the parameters of 2 or more dimensions (linear, convolution and
// lightweight-convolution kernels) except embeddings and output projections; each is viewed as
// [output units, -1]. Targeted weight dropout drops, per output unit, the bottom gamma fraction of
// its weights by magnitude, each with probability alpha; the unit variant drops the bottom gamma
// fraction of output units by L2 norm. At evaluation the targeted weights (units) are pruned.
//
// It works on the parameters in place, so no layer needs to know about it: for an update, each
// weight W is replaced by W * s (s: 0 for a dropped weight, 1 or the inverted-dropout scale
// otherwise), the forward and backward passes run, and then the gradient is multiplied by s
// (the chain rule of W * s) and W gets its values back before the optimizer step.
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "leanseq/core/config.h"

namespace leanseq::nn {

struct TargetedDropoutOptions {
  // none | weight | unit (targeted) | untargeted_weight | untargeted_unit (plain dropout of
  // weights or units, rescaled by 1 / (1 - alpha): the baselines of the paper)
  std::string type = "none";
  double gamma = 0.5;          // targeted fraction
  double alpha = 0.5;          // drop probability
  int64_t ramp_updates = 0;    // the reference code's ramp (there 20000): see rates_at; 0: no ramp
  bool eval_prune = true;      // targeted types: prune the targeted weights (units) at evaluation
  void visit(ConfigVisitor& v, const std::string& prefix);
  void validate() const;
  bool targeted() const { return type == "weight" || type == "unit"; }
  bool prunes_at_eval() const { return targeted() && eval_prune; }
  // One line for the training log: the type, rates, ramp and whether evaluation prunes.
  std::string summary() const;
  bool enabled() const { return type != "none"; }
};

// {gamma, alpha} at update `step`: without a ramp, the configured ones. With ramp R, as the
// reference's piecewise schedules: gamma reaches 95% of its value linearly over R updates and
// the last 5% over the next R; alpha grows linearly to its value over 2R updates.
std::pair<double, double> targeted_rates_at(const TargetedDropoutOptions& o, int64_t step);

// Boolean masks of w's shape, true where targeted. Weight: in every output unit (row of w viewed
// as [rows, -1]), the floor(gamma * n) weights of smallest magnitude (ties: lower index first).
// Unit: every weight of the floor(gamma * rows) rows of smallest L2 norm.
torch::Tensor targeted_weight_mask(const torch::Tensor& w, double gamma);
torch::Tensor targeted_unit_mask(const torch::Tensor& w, double gamma);

// The weights Targeted Dropout and pruning apply to, by name.
std::vector<std::pair<std::string, torch::Tensor>> prunable_parameters(torch::nn::Module& model);

// Zeroes, in place, the targeted weights of every prunable parameter at fraction `fraction`
// (method "weight" or "unit"). Returns the fraction of prunable weights that are zero afterwards.
double prune_in_place(torch::nn::Module& model, const std::string& method, double fraction);

// A loaded model trained with `o`: pruned in place as its validation was (when o.prunes_at_eval()).
void prune_as_evaluated(torch::nn::Module& model, const TargetedDropoutOptions& o);
// The fraction of prunable weights that are exactly zero.
double prunable_sparsity(torch::nn::Module& model);

class TargetedDropout {
 public:
  TargetedDropout(TargetedDropoutOptions o, torch::nn::Module& model);
  // Before an update's forward passes: scales the parameters by this update's masks.
  void begin_update(int64_t step);
  // After its backward passes: scales the gradients by the same masks and restores the values.
  void end_update();
  // Evaluation (targeted types with eval_prune): prunes in place until restore().
  void prune_for_eval();
  void restore();
  const TargetedDropoutOptions& options() const { return o_; }

 private:
  TargetedDropoutOptions o_;
  // o_.type, parsed once: what is dropped (single weights or whole units), and whether only among
  // the targeted ones (else all, rescaled by 1 / (1 - alpha)).
  bool enabled_, whole_units_, targeted_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> saved_, scales_;
};

// Prunes for evaluation while in scope (nothing when td is null or does not prune at evaluation).
class ScopedEvalPrune {
 public:
  explicit ScopedEvalPrune(TargetedDropout* td) : td_(td) {
    if (td_) td_->prune_for_eval();
  }
  ~ScopedEvalPrune() {
    if (td_) td_->restore();
  }
  ScopedEvalPrune(const ScopedEvalPrune&) = delete;
  ScopedEvalPrune& operator=(const ScopedEvalPrune&) = delete;

 private:
  TargetedDropout* td_;
};

}  // namespace leanseq::nn
