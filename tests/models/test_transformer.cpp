// The Transformer reproduces fairseq 0.12.2's own numbers (../shared/fixtures/fairseq/model_transformer.json)
// and step-by-step decoding equals the teacher-forced pass, also after a beam reorder and in chunks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/embeddings.h"
#include "support/fairseq_models.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::models;

namespace {
std::shared_ptr<Seq2SeqModel> fixture_model(const test::Fixture& fx) {
  return test::fairseq_transformer(fx, "model_transformer.json");
}
}  // namespace

TEST(Transformer, ReproducesFairseqForward) {
  LEANSEQ_REQUIRE_FIXTURE("model_transformer", fx);
  auto model = fixture_model(fx);
  torch::NoGradGuard g;
  auto src = fx.inputs["src_tokens"], lengths = fx.inputs["src_lengths"], prev = fx.inputs["prev_output_tokens"];
  auto enc = model->encode(src, lengths);
  // fairseq's encoder output is S x B x C.
  EXPECT_LT(test::max_abs_diff(enc.out.transpose(0, 1), fx.outputs["encoder_out"]), 1e-5);
  EXPECT_TRUE(enc.padding_mask.to(torch::kLong).equal(fx.outputs["encoder_padding_mask"]));
  auto out = model->decode(prev, enc, true);
  EXPECT_LT(test::max_abs_diff(out.logits, fx.outputs["decoder_logits"]), 1e-5);
  EXPECT_LT(test::max_abs_diff(torch::log_softmax(out.logits, -1), fx.outputs["decoder_lprobs"]), 1e-5);
  EXPECT_LT(test::max_abs_diff(out.attn, fx.outputs["decoder_attn"]), 1e-5);
}

TEST(Transformer, ReproducesFairseqIncrementalAndGreedy) {
  LEANSEQ_REQUIRE_FIXTURE("model_transformer", fx);
  auto model = fixture_model(fx);
  torch::NoGradGuard g;
  auto src = fx.inputs["src_tokens"], prev = fx.inputs["prev_output_tokens"];
  auto enc = model->encode(src, fx.inputs["src_lengths"]);
  auto state = model->init_state(enc);
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < prev.size(1); ++t) steps.push_back(model->step(prev.narrow(1, t, 1), enc, state).logits);
  EXPECT_LT(test::max_abs_diff(torch::cat(steps, 1), fx.outputs["incremental_teacher_forced_logits"]), 1e-5);

  // Greedy: 4 steps, argmax with the pad column excluded.
  auto state2 = model->init_state(enc);
  auto tokens = torch::full({src.size(0), 1}, 2, torch::kLong);
  std::vector<torch::Tensor> logits;
  for (int s = 0; s < 4; ++s) {
    auto l = model->step(tokens.narrow(1, s, 1), enc, state2).logits;  // [B, 1, V]
    logits.push_back(l);
    auto masked = l.squeeze(1).clone();
    masked.select(1, 1).fill_(-std::numeric_limits<float>::infinity());
    tokens = torch::cat({tokens, masked.argmax(1, true)}, 1);
  }
  EXPECT_TRUE(tokens.equal(fx.outputs["greedy_tokens"]));
  EXPECT_LT(test::max_abs_diff(torch::cat(logits, 1), fx.outputs["greedy_step_logits"]), 1e-5);
  EXPECT_LT(test::max_abs_diff(model->decode(tokens.narrow(1, 0, 4), enc).logits, fx.outputs["greedy_full_logits"]),
            1e-5);
}

namespace {
// Step-by-step decoding (in chunks of `chunk` tokens, with a random beam reorder half-way) equals
// the teacher-forced pass over the reordered prefixes.
void check_incremental(Seq2SeqModel& model, int64_t V, int64_t chunk) {
  torch::manual_seed(7);
  const int64_t B = 4, S = 7, T = 9;
  auto src = torch::randint(4, V, {B, S}, torch::kLong);
  src.select(1, S - 1).fill_(2);
  src[1].narrow(0, 4, 3).fill_(1);  // right padding in one row
  src[1][3] = 2;
  auto prev = torch::randint(4, V, {B, T}, torch::kLong);
  prev.select(1, 0).fill_(2);
  torch::NoGradGuard g;
  model.eval();
  auto enc = model.encode(src, torch::full({B}, S, torch::kLong));
  auto state = model.init_state(enc);
  auto order = torch::tensor({2, 0, 3, 3}, torch::kLong);
  auto full_enc = model.encode(src.index_select(0, order), torch::full({B}, S, torch::kLong));
  auto full = model.decode(prev.index_select(0, order), full_enc).logits;
  auto full_before = model.decode(prev, enc).logits;
  int64_t t = 0;
  const int64_t reorder_at = 4;
  std::vector<torch::Tensor> after;
  while (t < T) {
    int64_t n = std::min(chunk, (t < reorder_at ? reorder_at : T) - t);
    auto tokens = (t < reorder_at ? prev : prev.index_select(0, order)).narrow(1, t, n);
    auto l = model.step(tokens, enc, state).logits;
    if (t < reorder_at) {
      EXPECT_LT(test::max_abs_diff(l, full_before.narrow(1, t, n)), 1e-5) << "before reorder, t=" << t;
    } else {
      EXPECT_LT(test::max_abs_diff(l, full.narrow(1, t, n)), 1e-5) << "after reorder, t=" << t;
    }
    t += n;
    if (t == reorder_at) model.reorder(enc, state, order, false);
  }
}
}  // namespace

TEST(Transformer, IncrementalEqualsFullForwardAfterReorderAndInChunks) {
  auto cfg = registry().preset_config("transformer_tiny");
  for (bool pre_norm : {false, true}) {
    auto& tc = static_cast<TransformerConfig&>(*cfg);
    tc.encoder.normalize_before = tc.decoder.normalize_before = pre_norm;
    auto model = build_model(*cfg, {30, 30, true});
    for (int64_t chunk : {1, 3}) check_incremental(*model, 30, chunk);
  }
}

TEST(Transformer, ParameterNamesFollowFairseq) {
  auto model = build_model(*registry().preset_config("transformer_tiny"), {30, 30, true});
  auto names = model->named_parameters().keys();
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  EXPECT_TRUE(has("encoder.layers.1.self_attn.k_proj.weight"));
  EXPECT_TRUE(has("decoder.layers.0.encoder_attn_layer_norm.bias"));
  EXPECT_TRUE(has("decoder.layers.1.fc2.weight"));
  EXPECT_TRUE(has("decoder.output_projection.weight"));
  // Tied: one tensor under both names.
  EXPECT_TRUE(model->named_parameters()["decoder.output_projection.weight"].is_same(
      model->named_parameters()["decoder.embed_tokens.weight"]));
}

TEST(Registry, UnknownArchSuggests) {
  try {
    registry().preset("transformer_iwslt_de_eng");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'transformer_iwslt_de_en'"), std::string::npos);
  }
}

TEST(Positions, SinusoidalMatchesFairseq) {
  for (int64_t D : {8, 16}) {
    std::string name = "sinusoidal_positional_embedding_D" + std::to_string(D);
    test::Fixture fx;
    if (!test::load_fixture(name, fx)) GTEST_SKIP() << "../shared/fixtures/fairseq is absent";
    auto tokens = fx.inputs["tokens"];
    EXPECT_TRUE(nn::make_positions(tokens, 1).equal(fx.outputs["positions"]));
    EXPECT_LT(test::max_abs_diff(nn::sinusoidal_table(10, D, 1), fx.outputs["table"]), 1e-6);
    nn::PositionalEmbedding pe(D, 1, 64, false);
    EXPECT_LT(test::max_abs_diff(pe(tokens), fx.outputs["embeddings"]), 1e-6);
    EXPECT_LT(test::max_abs_diff(pe->at_steps(0, 6, 1).squeeze(0), fx.outputs["incremental_embeddings"]), 1e-6);
  }
}
