#include "leanseq/nn/targeted_dropout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "leanseq/core/error.h"

namespace leanseq::nn {

void TargetedDropoutOptions::visit(ConfigVisitor& v, const std::string& prefix) {
  v.field(prefix + "type", type,
          "targeted dropout: none, weight, unit (targeted), untargeted_weight or untargeted_unit (plain baselines)");
  v.field(prefix + "gamma", gamma, "targeted fraction of each unit's weights (weight) or of the units (unit)");
  v.field(prefix + "alpha", alpha, "drop probability of a targeted weight or unit");
  v.field(prefix + "ramp_updates", ramp_updates,
          "ramp gamma and alpha up over 2x this many updates, as the reference code (0: no ramp)");
  v.field(prefix + "eval_prune", eval_prune, "targeted types: prune the targeted weights at evaluation");
}

void TargetedDropoutOptions::validate() const {
  if (type != "none" && type != "weight" && type != "unit" && type != "untargeted_weight" && type != "untargeted_unit") {
    throw ConfigError("td.type: '" + type + "' is not none, weight, unit, untargeted_weight or untargeted_unit");
  }
  if (gamma < 0 || gamma > 1) throw ConfigError("td.gamma must be in [0, 1]");
  if (alpha < 0 || alpha >= 1) throw ConfigError("td.alpha must be in [0, 1)");
  if (ramp_updates < 0) throw ConfigError("td.ramp_updates must be 0 (no ramp) or positive");
}

std::string TargetedDropoutOptions::summary() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s, gamma %.2f, alpha %.2f", type.c_str(), gamma, alpha);
  std::string s = buf;
  if (ramp_updates > 0) s += ", ramped over " + std::to_string(2 * ramp_updates) + " updates";
  if (prunes_at_eval()) s += "; validation prunes the targeted weights";
  return s;
}

std::pair<double, double> targeted_rates_at(const TargetedDropoutOptions& o, int64_t step) {
  if (o.ramp_updates <= 0) return {o.gamma, o.alpha};
  const double r = static_cast<double>(o.ramp_updates), s = static_cast<double>(step);
  const double gamma = 0.95 * o.gamma * std::min(1.0, s / r) + 0.05 * o.gamma * std::clamp((s - r) / r, 0.0, 1.0);
  const double alpha = o.alpha * std::min(1.0, s / (2 * r));
  return {gamma, alpha};
}

namespace {
torch::Tensor rows_of(const torch::Tensor& w) { return w.reshape({w.size(0), -1}); }
}  // namespace

torch::Tensor targeted_weight_mask(const torch::Tensor& w, double gamma) {
  auto rows = rows_of(w.detach());
  const int64_t n = rows.size(1), k = static_cast<int64_t>(std::floor(gamma * static_cast<double>(n) + 1e-9));
  auto mask = torch::zeros(rows.sizes(), rows.options().dtype(torch::kBool));
  if (k > 0) {
    auto order = std::get<1>(rows.abs().sort(/*stable=*/true, 1, /*descending=*/false));
    mask.scatter_(1, order.narrow(1, 0, k), true);
  }
  return mask.view(w.sizes());
}

torch::Tensor targeted_unit_mask(const torch::Tensor& w, double gamma) {
  auto rows = rows_of(w.detach());
  const int64_t n = rows.size(0), k = static_cast<int64_t>(std::floor(gamma * static_cast<double>(n) + 1e-9));
  auto unit = torch::zeros({n}, rows.options().dtype(torch::kBool));
  if (k > 0) {
    auto order = std::get<1>(rows.norm(2, 1).sort(/*stable=*/true, 0, false));
    unit.index_fill_(0, order.narrow(0, 0, k), true);
  }
  return unit.unsqueeze(1).expand(rows.sizes()).reshape(w.sizes());
}

namespace {
// The targeted weights of `w` by method ("weight" or "unit").
torch::Tensor targeted_mask(const std::string& method, const torch::Tensor& w, double fraction) {
  return method == "weight" ? targeted_weight_mask(w, fraction) : targeted_unit_mask(w, fraction);
}
}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> prunable_parameters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters(true)) {
    const auto& name = p.key();
    if (p.value().dim() < 2) continue;
    if (name.find("embed_tokens") != std::string::npos || name.find("embed_positions") != std::string::npos ||
        name.find("output_projection") != std::string::npos) {
      continue;
    }
    out.emplace_back(name, p.value());
  }
  return out;
}

double prune_in_place(torch::nn::Module& model, const std::string& method, double fraction) {
  if (method != "weight" && method != "unit") throw ConfigError("--method: '" + method + "' is not weight or unit");
  if (fraction < 0 || fraction > 1) throw ConfigError("--sparsity must be in [0, 1]");
  torch::NoGradGuard no_grad;
  for (auto& [name, w] : prunable_parameters(model)) {
    w.masked_fill_(targeted_mask(method, w, fraction), 0.0);
  }
  return prunable_sparsity(model);
}

void prune_as_evaluated(torch::nn::Module& model, const TargetedDropoutOptions& o) {
  if (o.prunes_at_eval()) prune_in_place(model, o.type, o.gamma);
}

double prunable_sparsity(torch::nn::Module& model) {
  double zeros = 0, total = 0;
  for (auto& [name, w] : prunable_parameters(model)) {
    zeros += static_cast<double>(w.eq(0).sum().item<int64_t>());
    total += static_cast<double>(w.numel());
  }
  return total > 0 ? zeros / total : 0.0;
}

TargetedDropout::TargetedDropout(TargetedDropoutOptions o, torch::nn::Module& model)
    : o_(std::move(o)), params_(prunable_parameters(model)) {
  o_.validate();
  enabled_ = o_.enabled();
  whole_units_ = o_.type == "unit" || o_.type == "untargeted_unit";
  targeted_ = o_.targeted();
}

void TargetedDropout::begin_update(int64_t step) {
  if (!enabled_) return;
  torch::NoGradGuard no_grad;
  const auto [gamma, alpha] = targeted_rates_at(o_, step);
  saved_.clear(), scales_.clear();
  for (auto& [name, w] : params_) {
    torch::Tensor scale;
    if (!whole_units_) {
      auto drop = torch::rand(w.sizes(), w.options()).lt(alpha);
      if (targeted_) drop.logical_and_(targeted_weight_mask(w, gamma));
      scale = drop.logical_not().to(w.dtype());
    } else {
      auto drop = torch::rand({w.size(0)}, w.options()).lt(alpha);
      if (targeted_) drop.logical_and_(targeted_unit_mask(w, gamma).reshape({w.size(0), -1}).select(1, 0));
      std::vector<int64_t> shape(static_cast<size_t>(w.dim()), 1);
      shape[0] = w.size(0);
      scale = drop.logical_not().to(w.dtype()).view(shape).expand(w.sizes()).contiguous();
    }
    if (!targeted_) scale.div_(1.0 - alpha);
    saved_.push_back(w.clone());
    w.mul_(scale);
    scales_.push_back(scale);
  }
}

void TargetedDropout::end_update() {
  if (saved_.empty()) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& w = params_[i].second;
    if (w.grad().defined()) w.mutable_grad().mul_(scales_[i]);
    w.copy_(saved_[i]);
  }
  saved_.clear(), scales_.clear();
}

void TargetedDropout::prune_for_eval() {
  if (!o_.prunes_at_eval() || !saved_.empty()) return;
  torch::NoGradGuard no_grad;
  for (auto& [name, w] : params_) {
    saved_.push_back(w.clone());
    w.masked_fill_(targeted_mask(o_.type, w, o_.gamma), 0.0);
  }
}

void TargetedDropout::restore() {
  if (saved_.empty()) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].second.copy_(saved_[i]);
  saved_.clear();
}

}  // namespace leanseq::nn
