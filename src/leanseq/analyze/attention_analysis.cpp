#include "leanseq/analyze/attention_analysis.h"

#include <optional>

#include "leanseq/core/error.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/functional.h"

namespace leanseq::analyze {

std::vector<AttentionSimilarity> attention_similarity(models::Seq2SeqModel& model, const data::PairDataset& dataset,
                                                      int64_t max_sentences, int64_t max_tokens) {
  auto* transformer = dynamic_cast<models::TransformerModel*>(&model);
  if (!transformer) throw ConfigError("attention analysis needs a Transformer (an arch of the transformer family)");
  if (!dataset.has_target()) throw ConfigError("attention analysis needs a split with targets");
  torch::NoGradGuard no_grad;
  model.eval();
  const auto lengths = dataset.lengths(max_sentences > 0 ? static_cast<size_t>(max_sentences) : SIZE_MAX);
  data::BatchingOptions bo;
  bo.max_tokens = max_tokens;

  struct Kind {
    const char *name, *side, *key;
    std::vector<torch::Tensor> models::AttentionMaps::*maps;
    bool source_queries;  // queries are source positions (else target positions)
    std::optional<eval::LayerSimilarity> sim;
  };
  std::vector<Kind> kinds = {
      {"encoder_self_attention", "encoder", "self_attn_groups", &models::AttentionMaps::encoder_self, true, {}},
      {"decoder_self_attention", "decoder", "self_attn_groups", &models::AttentionMaps::decoder_self, false, {}},
      {"encoder_decoder_attention", "decoder", "encoder_attn_groups", &models::AttentionMaps::encoder_decoder, false,
       {}}};
  for (const auto& ids : data::batch_by_size(lengths, bo)) {
    auto b = dataset.batch(ids);
    auto maps = transformer->attention_maps(b.src, b.prev_output);
    for (auto& k : kinds) {
      const auto& m = maps.*(k.maps);
      if (m.empty()) continue;
      if (!k.sim) k.sim.emplace(m.size());
      k.sim->add(m, (k.source_queries ? b.src : b.target).ne(nn::kPadIndex));
    }
  }
  std::vector<AttentionSimilarity> out;
  for (auto& k : kinds) {
    if (k.sim) out.push_back({k.name, k.side, k.key, k.sim->matrix(), k.sim->positions()});
  }
  return out;
}

}  // namespace leanseq::analyze
