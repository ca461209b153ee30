// The Transformer reproduces fairseq 0.12.2's own numbers (../shared/fixtures/fairseq/model_transformer.json)
// and step-by-step decoding equals the teacher-forced pass, also after a beam reorder and in chunks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/linear.h"
#include "support/fairseq_models.h"
#include "support/model_checks.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::models;

namespace {
std::shared_ptr<Seq2SeqModel> fixture_model(const test::Fixture& fx) {
  return test::fairseq_model(fx, "model_transformer.json");
}
}  // namespace

TEST(Transformer, LinearWithReluIsOneOperatorInInferenceAndTheCompositeInTraining) {
  torch::manual_seed(3);
  auto fc = nn::make_linear(12, 20);
  torch::nn::init::normal_(fc->bias);
  auto x = torch::randn({4, 3, 12}).transpose(0, 1);  // [3, 4, 12], not contiguous
  const auto ref = torch::relu(torch::linear(x, fc->weight, fc->bias));
  {
    torch::NoGradGuard no_grad;
    auto y = fc->forward_relu(x);
    ASSERT_EQ(y.sizes(), ref.sizes());
    EXPECT_LT(test::max_abs_diff(y, ref), 1e-6);
  }
  auto y = fc->forward_relu(x);  // recording: differentiable
  y.sum().backward();
  auto w = fc->weight.detach().clone().requires_grad_(true);
  torch::relu(torch::linear(x, w, fc->bias.detach())).sum().backward();
  EXPECT_LT(test::max_abs_diff(fc->weight.grad(), w.grad()), 1e-6);
}

TEST(Transformer, ReproducesFairseqForward) {
  LEANSEQ_REQUIRE_FIXTURE("model_transformer", fx);
  test::check_fairseq_forward(*fixture_model(fx), fx);
}

TEST(Transformer, ReproducesFairseqIncrementalAndGreedy) {
  LEANSEQ_REQUIRE_FIXTURE("model_transformer", fx);
  test::check_fairseq_incremental_and_greedy(*fixture_model(fx), fx, true);
}

TEST(Transformer, IncrementalEqualsFullForwardAfterReorderAndInChunks) {
  auto cfg = registry().preset_config("transformer_tiny");
  for (bool pre_norm : {false, true}) {
    auto& tc = static_cast<TransformerConfig&>(*cfg);
    tc.encoder.normalize_before = tc.decoder.normalize_before = pre_norm;
    auto model = build_model(*cfg, {30, 30, true});
    for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  }
}

TEST(Transformer, DisanEncoderDecodesIncrementallyAndIgnoresPads) {
  auto cfg = registry().preset_config("transformer_tiny");
  auto& tc = static_cast<TransformerConfig&>(*cfg);
  tc.encoder_type = "disan";
  auto model = build_model(*cfg, {30, 30, true});
  EXPECT_EQ(model->named_parameters().find("encoder.layers.0.self_attn.q_proj.weight"), nullptr);
  EXPECT_NE(model->named_parameters().find("encoder.disa.fw.map.weight"), nullptr);
  test::check_incremental(*model, 30, 1);
  // A padded source gives its tokens the encoding they get alone.
  model->eval();
  torch::NoGradGuard ng;
  auto alone = model->encode(torch::tensor({{5, 6, 7, 2}}, torch::kLong), torch::tensor({4}));
  auto padded = model->encode(torch::tensor({{5, 6, 7, 2, 1, 1}, {8, 9, 2, 1, 1, 1}}, torch::kLong), torch::tensor({4, 3}));
  ASSERT_EQ(alone.out.size(2), tc.encoder.embed_dim);
  EXPECT_LT(test::max_abs_diff(alone.out[0], padded.out[0].narrow(0, 0, 4)), 1e-6);
  tc.encoder.embed_dim = tc.decoder.embed_dim = 34;
  tc.encoder.attention_heads = tc.decoder.attention_heads = 2;
  tc.encoder_type = "lstm";
  EXPECT_THROW(cfg->validate(), ConfigError);
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
    if (!test::load_fixture(name, fx)) LEANSEQ_MISSING_SHARED("fixtures/fairseq/" << name);
    auto tokens = fx.inputs["tokens"];
    EXPECT_TRUE(nn::make_positions(tokens, 1).equal(fx.outputs["positions"]));
    EXPECT_LT(test::max_abs_diff(nn::sinusoidal_table(10, D, 1), fx.outputs["table"]), 1e-6);
    nn::PositionalEmbedding pe(D, 1, 64, false);
    EXPECT_LT(test::max_abs_diff(pe(tokens), fx.outputs["embeddings"]), 1e-6);
    EXPECT_LT(test::max_abs_diff(pe->at_steps(0, 6, 1).squeeze(0), fx.outputs["incremental_embeddings"]), 1e-6);
  }
}
