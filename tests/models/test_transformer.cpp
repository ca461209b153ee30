// The Transformer reproduces fairseq 0.12.2's own numbers (../shared/fixtures/fairseq/model_transformer.json)
// and step-by-step decoding equals the teacher-forced pass, also after a beam reorder and in chunks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/packed_weight.h"
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

// fairseq's --layernorm-embedding and --decoder-output-dim: their parameters under fairseq's
// names, and step-by-step decoding still equals the teacher-forced pass.
TEST(Transformer, LayernormEmbeddingAndDecoderOutputDimDecodeIncrementally) {
  auto cfg = registry().preset_config("transformer_tiny");
  auto& tc = static_cast<TransformerConfig&>(*cfg);
  tc.layernorm_embedding = true;
  tc.share_decoder_input_output_embed = false;
  tc.decoder.output_dim = 16;
  auto model = build_model(*cfg, {30, 30, false});
  const auto params = model->named_parameters();
  for (const char* name : {"encoder.layernorm_embedding.weight", "decoder.layernorm_embedding.bias",
                           "decoder.project_out_dim.weight"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  EXPECT_EQ(params["decoder.project_out_dim.weight"].sizes(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(params["decoder.output_projection.weight"].sizes(), (std::vector<int64_t>{30, 16}));
  for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  tc.share_decoder_input_output_embed = true;  // a 16-wide output cannot share 32-wide embeddings
  EXPECT_THROW(cfg->validate(), ConfigError);
}

// fairseq's --encoder-embed-dim 16 --decoder-embed-dim 24 --decoder-output-dim 16, pre-norm: the
// encoder-decoder attention takes keys and values of the encoder's width (kdim = vdim), and
// step-by-step decoding equals the teacher-forced pass, in float32 and in int8; one embedding for
// both sides needs one width.
TEST(Transformer, EncoderAndDecoderOfDifferentWidthsDecodeIncrementally) {
  auto cfg = registry().preset_config("transformer_tiny");
  auto& tc = static_cast<TransformerConfig&>(*cfg);
  tc.encoder.embed_dim = 16, tc.decoder.embed_dim = 24, tc.decoder.output_dim = 16;
  tc.encoder.attention_heads = tc.decoder.attention_heads = 2;
  tc.encoder.normalize_before = tc.decoder.normalize_before = true;
  tc.share_decoder_input_output_embed = tc.share_all_embeddings = false;
  cfg->validate();
  auto model = build_model(*cfg, {30, 30, false});
  auto params = model->named_parameters();
  EXPECT_EQ(params["decoder.layers.0.encoder_attn.k_proj.weight"].sizes(), (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(params["decoder.layers.0.encoder_attn.v_proj.weight"].sizes(), (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(params["decoder.layers.0.encoder_attn.q_proj.weight"].sizes(), (std::vector<int64_t>{24, 24}));
  EXPECT_EQ(params["decoder.project_out_dim.weight"].sizes(), (std::vector<int64_t>{16, 24}));
  for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  EXPECT_GT(nn::set_compute_type(*model, kernels::ComputeType::int8), 0);
  test::check_incremental(*model, 30, 1);
  nn::set_compute_type(*model, kernels::ComputeType::float32);
  tc.share_all_embeddings = true;
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

// The self-attention cache appends into a buffer with room to spare: after appends of one and
// several positions, growth past the room, and reorders that repeat and drop rows, it holds what
// torch::cat and index_select would, bit for bit. A CPU reorder moves no rows: until tensor()
// gathers them, the origin table says where each row's positions are stored, also after appends
// and reorders that follow.
// In bfloat16 (an int8 model's keys and values) too: the positions as ATen's cast rounds them.
TEST(IncrementalState, AppendBufferHoldsWhatCatAndIndexSelectWould) {
  for (auto type : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(31);
    nn::AppendBuffer buffer;
    torch::Tensor expected;
    // Each row's positions read through the origin table without gathering.
    auto through_origin = [&]() {
      const auto& stored = buffer.stored();
      const auto& origin = buffer.origin();
      auto out = torch::empty_like(expected);
      for (int64_t b = 0; b < expected.size(0); ++b) {
        for (int64_t t = 0; t < expected.size(2); ++t) {
          out[b].select(1, t).copy_(stored[origin.defined() ? origin[b][t].item<int64_t>() : b].select(1, t));
        }
      }
      return out;
    };
    // Appended positions, a reorder after them, and whether to gather with tensor() afterwards.
    struct Step {
      int64_t n;
      std::vector<int64_t> order;
      bool gather;
    };
    const std::vector<Step> steps = {{1, {}, true},      {3, {1, 1, 0, 2}, false}, {1, {}, false},
                                     {1, {3, 2}, false}, {6, {}, false},          {1, {0, 0, 1}, true},
                                     {2, {2, 0}, false}, {9, {1, 1}, false},      {1, {}, true}};
    int64_t rows = 3, i = 0;
    for (const auto& [n, order, gather] : steps) {
      // New positions as they come: contiguous, heads split from [rows, n, 2 x 5] as attention
      // splits them (a strided view), and with a strided last dimension (the composite's copy).
      const int64_t form = i++ % 3;
      auto x = form == 0   ? torch::randn({rows, 2, n, 5})
               : form == 1 ? torch::randn({rows, n, 10}).view({rows, n, 2, 5}).transpose(1, 2)
                           : torch::randn({rows, 2, 5, n}).transpose(2, 3);
      buffer.append(x, type);
      expected = expected.defined() ? torch::cat({expected, x.to(type)}, 2) : x.to(type);
      ASSERT_TRUE(torch::equal(through_origin(), expected)) << "after appending " << n;
      if (!order.empty()) {
        auto o = torch::tensor(order, torch::kLong);
        const int64_t stored_rows = buffer.stored().size(0);
        buffer.reorder(o);
        expected = expected.index_select(0, o);
        rows = static_cast<int64_t>(order.size());
        ASSERT_TRUE(torch::equal(through_origin(), expected)) << "after a reorder";
        // Rows are gathered only when there are more of them than are stored.
        EXPECT_EQ(buffer.origin().defined(), rows <= stored_rows) << "a reorder to " << rows << " rows";
      }
      if (gather) {
        ASSERT_TRUE(torch::equal(buffer.tensor(), expected)) << "gathered";
        EXPECT_FALSE(buffer.origin().defined());
      }
    }
    EXPECT_EQ(buffer.length(), 25);
    EXPECT_TRUE(torch::equal(buffer.tensor(), expected));
    EXPECT_EQ(buffer.tensor().scalar_type(), type);
  }
}

// Once sentences of a batch have finished, the buffer stores more rows than are live; growing past
// its room keeps only the live ones (a long last sentence of a large batch allocated and copied
// room for every row it started with, hundreds of megabytes, at each growth), and holds the same.
TEST(IncrementalState, AppendBufferGrowsOnlyTheLiveRows) {
  torch::manual_seed(33);
  nn::AppendBuffer buffer;
  auto expected = torch::randn({40, 2, 1, 5});
  buffer.append(expected);
  const int64_t room = buffer.stored().size(0);
  EXPECT_EQ(room, 40);
  auto order = torch::tensor(std::vector<int64_t>{7, 7, 3}, torch::kLong);
  buffer.reorder(order);
  expected = expected.index_select(0, order);
  for (int step = 0; step < 20; ++step) {
    auto x = torch::randn({3, 2, 1, 5});
    buffer.append(x);
    expected = torch::cat({expected, x}, 2);
  }
  EXPECT_EQ(buffer.stored().size(0), 3) << "rows stored after growing";
  EXPECT_TRUE(torch::equal(buffer.tensor(), expected));
}

// Encoder-decoder attention keeps one copy of a source's keys and values for the rows that decode
// it (a sentence's beams): the same results as one copy per row, also after a reorder that drops a
// sentence (the groups stay) and one that breaks the groups (one copy per row from then on).
TEST(IncrementalState, StaticAttentionKeepsOneCopyPerSourceForItsRows) {
  torch::manual_seed(32);
  torch::NoGradGuard no_grad;
  nn::MultiheadAttention att(16, 4, 0.0, true);
  att->eval();
  auto memory = torch::randn({3, 5, 16}).repeat_interleave(2, 0);  // 3 sources, 2 rows each
  auto padding = torch::zeros({6, 5}, torch::kBool);
  padding.narrow(0, 2, 2).select(1, 4).fill_(true);  // the second source is a token shorter
  nn::IncrementalState grouped, per_row;
  grouped.rows_per_source = 2;
  auto step = [&](nn::IncrementalState& state, const torch::Tensor& q) {
    return att->step_static(q, memory, padding, state.get<nn::StaticAttentionCache>("a"), true);
  };
  auto check = [&](int64_t rows, const char* when) {
    auto q = torch::randn({rows, 1, 16});
    auto a = step(grouped, q), b = step(per_row, q);
    EXPECT_TRUE(torch::allclose(a.out, b.out, 1e-6, 1e-6)) << when;
    EXPECT_TRUE(torch::allclose(a.weights, b.weights, 1e-6, 1e-6)) << when;
  };
  check(6, "first step");
  const auto& cache = grouped.get<nn::StaticAttentionCache>("a");
  EXPECT_EQ(cache.k.size(0), 3);
  EXPECT_EQ(cache.mask.size(0), 3);
  for (auto* s : {&grouped, &per_row}) s->reorder(torch::tensor({5, 4, 4, 5, 0, 1}, torch::kLong), true);
  check(6, "within sentences");
  for (auto* s : {&grouped, &per_row}) s->reorder(torch::tensor({4, 5, 0, 0}, torch::kLong), false);
  EXPECT_EQ(cache.k.size(0), 2) << "the third and first sources stay, once each";
  EXPECT_EQ(cache.rows, 2);
  check(4, "after a sentence was dropped");
  for (auto* s : {&grouped, &per_row}) s->reorder(torch::tensor({0, 3, 2}, torch::kLong), false);
  EXPECT_EQ(cache.rows, 1) << "rows that are not grouped by source get a copy each";
  EXPECT_EQ(cache.k.size(0), 3);
  check(3, "after the groups broke");
}

// The beam search's first step is made once per sentence: encoder-decoder attention then holds one
// row per source, and the reorder that makes the beam rows (each source's row repeated, the state
// then counting that many rows per source) keeps one copy per source, with the results of one copy
// per row.
TEST(IncrementalState, StaticAttentionFromOneRowPerSourceToBeamRowsKeepsOneCopy) {
  torch::manual_seed(33);
  torch::NoGradGuard no_grad;
  nn::MultiheadAttention att(16, 4, 0.0, true);
  att->eval();
  auto sources = torch::randn({3, 5, 16});
  auto padding = torch::zeros({3, 5}, torch::kBool);
  padding[1][4] = true;
  nn::IncrementalState once, per_row;
  auto& cache = once.get<nn::StaticAttentionCache>("a");
  auto q0 = torch::randn({3, 1, 16});
  auto first = att->step_static(q0, sources, padding, cache, true);
  auto beams = torch::tensor({0, 0, 1, 1, 2, 2}, torch::kLong);
  once.rows_per_source = 2;
  once.reorder(beams, false);
  EXPECT_EQ(cache.rows, 2);
  EXPECT_EQ(cache.k.size(0), 3) << "one copy per source";
  auto memory = sources.index_select(0, beams), memory_padding = padding.index_select(0, beams);
  auto& reference = per_row.get<nn::StaticAttentionCache>("a");
  auto q1 = torch::randn({6, 1, 16});
  auto a = att->step_static(q1, memory, memory_padding, cache, true);
  auto b = att->step_static(q1, memory, memory_padding, reference, true);
  EXPECT_TRUE(torch::allclose(a.out, b.out, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(a.weights, b.weights, 1e-6, 1e-6));
  auto c = att->step_static(q0, sources, padding, per_row.get<nn::StaticAttentionCache>("b"), true);
  EXPECT_TRUE(torch::allclose(first.out, c.out, 1e-6, 1e-6));
}

// fairseq's transformer_lm: the decoder alone, without encoder attention, its embeddings of
// decoder.input_dim projected to the model's width (fairseq 0.12's 512 default beside a 64-wide
// model), tied to the output through decoder.output_dim; incremental decoding exact.
TEST(TransformerLanguageModel, DecoderOnlyWithInputAndOutputWidthsAndExactIncrementalDecoding) {
  auto cfg = registry().preset_config("transformer_lm_tiny");
  EXPECT_TRUE(cfg->language_model());
  auto& c = static_cast<TransformerLMConfig&>(*cfg);
  for (bool widths : {false, true}) {
    c.decoder.input_dim = c.decoder.output_dim = widths ? 48 : 0;
    c.share_decoder_input_output_embed = widths;
    c.validate();
    auto model = build_model(*cfg, {30, 30, true});
    auto names = model->named_parameters().keys();
    for (const auto& n : names) {
      EXPECT_EQ(n.rfind("decoder.", 0), 0u) << n;
      EXPECT_EQ(n.find("encoder_attn"), std::string::npos) << n;
    }
    EXPECT_NE(std::find(names.begin(), names.end(), "decoder.layer_norm.weight"), names.end());  // pre-norm's final norm
    const bool projected = std::find(names.begin(), names.end(), "decoder.project_in_dim.weight") != names.end();
    EXPECT_EQ(projected, widths);
    EXPECT_EQ(std::find(names.begin(), names.end(), "decoder.project_out_dim.weight") != names.end(), widths);
    for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  }
  c.decoder.output_dim = 40;  // tied to embeddings 48 wide
  EXPECT_THROW(c.validate(), ConfigError);
}
