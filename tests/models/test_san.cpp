// SAN (attention shared within blocks of layers) and the Average Attention Network decoder:
// what a shared layer computes, which parameters it lacks, exact incremental decoding, the
// block specs and presets.
#include <gtest/gtest.h>

#include <cmath>

#include "leanseq/core/error.h"
#include "leanseq/models/layer_spec.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/transformer_layer.h"
#include "support/fixtures.h"
#include "support/model_checks.h"

using namespace leanseq;
using namespace leanseq::models;
using test::max_abs_diff;

namespace {
nn::TransformerLayerOptions tiny_options() {
  nn::TransformerLayerOptions o;
  o.embed_dim = 8, o.ffn_dim = 16, o.heads = 2, o.dropout = 0;
  return o;
}

// softmax(q k^T / sqrt(d)) per head from a layer's own projections: [B, H, T, S].
torch::Tensor distribution(nn::MultiheadAttention& a, const torch::Tensor& q_in, const torch::Tensor& k_in,
                           int64_t heads, const torch::Tensor& additive_mask) {
  auto split = [&](const torch::Tensor& x) {
    return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
  };
  const double d = static_cast<double>(q_in.size(2) / heads);
  auto scores = torch::matmul(split(a->q_proj(q_in)), split(a->k_proj(k_in)).transpose(-1, -2)) / std::sqrt(d);
  if (additive_mask.defined()) scores = scores + additive_mask;
  return torch::softmax(scores, -1);
}

// probs over layer `a`'s values of v_in, through its output projection: [B, T, C].
torch::Tensor apply_values(nn::MultiheadAttention& a, const torch::Tensor& probs, const torch::Tensor& v_in,
                           int64_t heads) {
  const int64_t B = v_in.size(0), S = v_in.size(1), C = v_in.size(2);
  auto v = a->v_proj(v_in).view({B, S, heads, C / heads}).transpose(1, 2);
  auto ctx = torch::matmul(probs, v).transpose(1, 2).reshape({B, probs.size(2), C});
  return a->out_proj(ctx);
}

std::vector<std::string> names(const std::string& arch) {
  auto model = build_model(*registry().preset_config(arch), {30, 30, true});
  return model->named_parameters().keys();
}
bool has(const std::vector<std::string>& v, const std::string& n) { return std::find(v.begin(), v.end(), n) != v.end(); }
}  // namespace

TEST(San, SharedEncoderLayerAppliesTheFirstLayersDistributionToItsOwnValues) {
  torch::manual_seed(0);
  auto o = tiny_options();
  nn::TransformerEncoderLayer first(o);
  o.reuse_self_attn = true;
  nn::TransformerEncoderLayer shared_layer(o);
  first->eval(), shared_layer->eval();
  torch::NoGradGuard g;
  auto x = torch::randn({2, 5, 8});
  auto pad = torch::zeros({2, 5}, torch::kBool);
  pad[1][4] = true;
  nn::SharedAttention shared;
  auto y1 = first->forward(x, pad, shared);
  auto y2 = shared_layer->forward(y1, pad, shared);

  auto probs = distribution(first->self_attn, x, x, 2, nn::padding_to_additive(pad, x.options()));
  EXPECT_LT(max_abs_diff(shared.self_probs, probs), 1e-6);
  auto h = shared_layer->self_attn_layer_norm(y1 + apply_values(shared_layer->self_attn, probs, y1, 2));
  auto expected = nn::feed_forward(h, shared_layer->fc1, shared_layer->fc2, shared_layer->final_layer_norm, o, false);
  EXPECT_LT(max_abs_diff(y2, expected), 1e-5);
}

TEST(San, SharedDecoderLayerReusesSelfDistributionAndEncoderAttentionOutput) {
  torch::manual_seed(1);
  auto o = tiny_options();
  nn::TransformerDecoderLayer first(o);
  o.reuse_self_attn = o.reuse_encoder_attn = true;
  nn::TransformerDecoderLayer shared_layer(o);
  first->eval(), shared_layer->eval();
  torch::NoGradGuard g;
  auto x = torch::randn({2, 4, 8}), memory = torch::randn({2, 6, 8});
  nn::SharedAttention shared;
  auto y1 = first->forward(x, {}, memory, {}, true, shared).out;
  auto r2 = shared_layer->forward(y1, {}, memory, {}, true, shared);

  auto probs = distribution(first->self_attn, x, x, 2, nn::causal_mask(4, 4, 0, x.options()));
  auto h = shared_layer->self_attn_layer_norm(y1 + apply_values(shared_layer->self_attn, probs, y1, 2));
  // The encoder attention of the first layer, from its own input after its self-attention.
  auto h_first = first->self_attn_layer_norm(x + first->self_attn->forward(x, x, torch::Tensor(), true, false).out);
  auto enc_probs = distribution(first->encoder_attn, h_first, memory, 2, {});
  auto enc_out = apply_values(first->encoder_attn, enc_probs, memory, 2);
  h = shared_layer->encoder_attn_layer_norm(h + enc_out);
  auto expected = nn::feed_forward(h, shared_layer->fc1, shared_layer->fc2, shared_layer->final_layer_norm, o, false);
  EXPECT_LT(max_abs_diff(r2.out, expected), 1e-5);
  // The attention a shared layer returns is its block's.
  EXPECT_LT(max_abs_diff(r2.weights, enc_probs.mean(1)), 1e-6);
}

TEST(San, SharedLayersHaveNoQueryKeyOrEncoderAttentionParameters) {
  auto n = names("transformer_tiny_san");  // 2+2 layers: one block each
  EXPECT_TRUE(has(n, "encoder.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(has(n, "encoder.layers.1.self_attn.q_proj.weight"));
  EXPECT_FALSE(has(n, "encoder.layers.1.self_attn.k_proj.bias"));
  EXPECT_TRUE(has(n, "encoder.layers.1.self_attn.v_proj.weight"));
  EXPECT_TRUE(has(n, "encoder.layers.1.self_attn.out_proj.weight"));
  EXPECT_FALSE(has(n, "decoder.layers.1.self_attn.k_proj.weight"));
  EXPECT_TRUE(has(n, "decoder.layers.1.self_attn.v_proj.weight"));
  EXPECT_TRUE(has(n, "decoder.layers.0.encoder_attn.q_proj.weight"));
  for (const auto& k : n) EXPECT_EQ(k.find("decoder.layers.1.encoder_attn."), std::string::npos) << k;
  EXPECT_TRUE(has(n, "decoder.layers.1.encoder_attn_layer_norm.weight"));
  auto base = names("transformer_tiny");
  EXPECT_EQ(base.size() - n.size(), 4u /* q,k of 2 layers */ * 2 + 8u /* 4 linears of encoder_attn */);

  auto aan = names("transformer_tiny_aan");
  EXPECT_TRUE(has(aan, "decoder.layers.0.avg_attn.gate.weight"));
  EXPECT_TRUE(has(aan, "decoder.layers.0.avg_attn.fc1.weight"));
  for (const auto& k : aan) EXPECT_EQ(k.find("decoder.layers.0.self_attn."), std::string::npos) << k;
}

TEST(San, PresetsCarryTheBlocks) {
  auto cfg = registry().preset_config("transformer_iwslt_de_en_san");
  const auto& c = static_cast<const TransformerConfig&>(*cfg);
  EXPECT_EQ(c.encoder.self_attn_groups, "0-1,2-3,4-5");
  EXPECT_EQ(c.decoder.self_attn_groups, "0-1,2-3,4-5");
  EXPECT_EQ(c.decoder.encoder_attn_groups, "0-1,2-5");
  EXPECT_EQ(c.decoder.embed_dim, 512);
  auto both = registry().preset_config("transformer_small_san_aan");
  const auto& b = static_cast<const TransformerConfig&>(*both);
  EXPECT_TRUE(b.decoder.average_attention);
  EXPECT_TRUE(b.decoder.self_attn_groups.empty());
  EXPECT_EQ(b.decoder.encoder_attn_groups, "0,1-2");
  EXPECT_EQ(b.encoder.self_attn_groups, "0-1,2");
}

TEST(San, AverageAttentionIsTheGatedCumulativeMean) {
  torch::manual_seed(2);
  nn::AverageAttention aan(4, 6, 0.0);
  aan->eval();
  torch::NoGradGuard g;
  auto x = torch::randn({2, 5, 4});
  auto pad = torch::zeros({2, 5}, torch::kBool);
  pad[0][2] = true;  // a fed pad does not count in the average
  auto out = aan->forward(x, pad);
  for (int64_t b = 0; b < 2; ++b) {
    auto sum = torch::zeros({4});
    int64_t n = 0;
    for (int64_t t = 0; t < 5; ++t) {
      if (!pad[b][t].item<bool>()) sum += x[b][t], ++n;
      auto avg = n ? sum / n : sum;
      auto gv = aan->fc2(torch::relu(aan->fc1(avg)));
      auto gates = torch::sigmoid(aan->gate(torch::cat({x[b][t], gv})));
      auto expected = gates.narrow(0, 0, 4) * x[b][t] + gates.narrow(0, 4, 4) * gv;
      EXPECT_LT(max_abs_diff(out[b][t], expected), 1e-6) << b << " " << t;
    }
  }
  // Step by step, with the running average.
  nn::AverageCache cache;
  for (int64_t t = 0; t < 5; ++t) {
    auto s = aan->step(x.narrow(1, t, 1), pad.narrow(1, t, 1), cache);
    EXPECT_LT(max_abs_diff(s, out.narrow(1, t, 1)), 1e-6);
  }
  EXPECT_EQ(cache.mean.size(1), 1);
}

// The folded decoding step ([fc1 ; W_x] and [fc2 ; W_g fc2]) equals the layer's full pass, after
// unfolded steps of several positions, with the fold turned off, and after a parameter changes.
TEST(San, TheFoldedAverageAttentionStepEqualsTheFullPass) {
  torch::manual_seed(3);
  for (bool fold : {true, false}) {
    nn::AverageAttention aan(8, 16, 0.0, fold);
    aan->eval();
    torch::NoGradGuard g;
    for (auto& p : aan->parameters()) p.normal_(0.0, 0.5);  // biases too (they start at zero)
    auto x = torch::randn({3, 7, 8});
    for (int round = 0; round < 2; ++round) {
      if (round == 1) aan->gate->weight.mul_(1.5);  // a modified parameter makes new folded weights
      auto out = aan->forward(x, {});
      nn::AverageCache cache;
      int64_t t = 0;
      for (int64_t n : {2, 1, 1, 3}) {  // a chunk of two, two single steps, a chunk of three
        auto s = aan->step(x.narrow(1, t, n), {}, cache);
        EXPECT_LT(max_abs_diff(s, out.narrow(1, t, n)), 1e-5) << fold << " " << round << " t=" << t;
        if (n == 1) {
          EXPECT_EQ(cache.fc1_mean.defined(), fold) << "the folded step ran (or not)";
        }
        t += n;
      }
      EXPECT_FALSE(cache.fc1_mean.defined()) << "a chunk of several positions drops the folded running product";
      // Single steps from the start, with a beam reorder half-way.
      nn::AverageCache single;
      auto order = torch::tensor({2, 2, 0}, torch::kLong);
      auto reordered = aan->forward(x.index_select(0, order), {});
      for (int64_t i = 0; i < 7; ++i) {
        if (i == 3) {  // as IncrementalState::reorder does
          single.for_each_tensor([&](torch::Tensor& c) {
            if (c.defined()) c = c.index_select(0, order);
          });
        }
        auto xi = (i < 3 ? x : x.index_select(0, order)).narrow(1, i, 1);
        auto s = aan->step(xi, {}, single);
        EXPECT_LT(max_abs_diff(s, (i < 3 ? out : reordered).narrow(1, i, 1)), 1e-5) << fold << " i=" << i;
      }
    }
  }
}

TEST(San, IncrementalEqualsFullForwardForEveryVariant) {
  for (const char* arch : {"transformer_tiny_san", "transformer_tiny_aan", "transformer_tiny_san_aan"}) {
    for (bool pre_norm : {false, true}) {
      for (int ffn = 0; ffn < 3; ++ffn) {  // without, with, with the folded decoding step
        auto cfg = registry().preset_config(arch);
        auto& c = static_cast<TransformerConfig&>(*cfg);
        c.encoder.layers = c.decoder.layers = 3;
        if (!c.decoder.average_attention) c.decoder.self_attn_groups = "0,1-2";
        c.encoder.self_attn_groups = "0-1,2";
        c.decoder.encoder_attn_groups = "0-2";
        c.decoder.average_attention_ffn = ffn > 0;
        c.decoder.average_attention_fold = ffn == 2;
        c.encoder.normalize_before = c.decoder.normalize_before = pre_norm;
        auto model = build_model(*cfg, {30, 30, true});
        for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
      }
    }
  }
}

namespace {
// A transformer_tiny of `decoder_layers` decoder layers (`groups`: its encoder-attention blocks)
// in inference, and the attention its teacher-forced pass returns over random tokens (2
// sentences, 6 source and 5 target tokens) with every layer's distributions.
struct AttentionPass {
  std::shared_ptr<Seq2SeqModel> model;
  torch::Tensor src, src_lengths, prev, attn;
  AttentionMaps maps;
};
AttentionPass attention_pass(int64_t decoder_layers, const std::string& groups, int64_t alignment_layer = -1,
                             int64_t alignment_heads = 0) {
  auto cfg = registry().preset_config("transformer_tiny");
  auto& c = static_cast<TransformerConfig&>(*cfg);
  c.decoder.layers = decoder_layers, c.decoder.attention_heads = 4, c.decoder.encoder_attn_groups = groups;
  c.decoder.alignment_layer = alignment_layer, c.decoder.alignment_heads = alignment_heads;
  cfg->validate();
  AttentionPass p{build_model(*cfg, {30, 30, true})};
  p.model->eval();
  torch::NoGradGuard g;
  p.src = torch::randint(4, 30, {2, 6}, torch::kLong);
  p.src_lengths = torch::full({2}, 6, torch::kLong);
  p.prev = torch::randint(4, 30, {2, 5}, torch::kLong);
  p.attn = p.model->forward(p.src, p.src_lengths, p.prev, true).attn;
  p.maps = static_cast<TransformerModel&>(*p.model).attention_maps(p.src, p.prev);
  return p;
}
}  // namespace

TEST(San, ReturnsTheAttentionOfTheLastBlock) {
  const auto p = attention_pass(3, "0,1-2");
  ASSERT_TRUE(p.attn.defined());
  EXPECT_LT(max_abs_diff(p.attn.sum(-1), torch::ones({2, 5})), 1e-5);
  ASSERT_EQ(p.maps.encoder_decoder.size(), 3u);
  EXPECT_TRUE(p.maps.encoder_decoder[2].equal(p.maps.encoder_decoder[1]));  // layer 2 reuses layer 1's
  EXPECT_LT(max_abs_diff(p.attn, p.maps.encoder_decoder[1].mean(1)), 1e-6);
  EXPECT_EQ(p.maps.encoder_self.size(), 2u);
  EXPECT_EQ(p.maps.decoder_self.size(), 3u);
}

TEST(San, AlignmentLayerAndHeadsChooseTheReturnedAttention) {
  // Layer 1 (-2 of 3), its first two heads; under SAN it reuses its block's owner's (layer 0).
  for (const char* groups : {"", "0-1,2"}) {
    const auto p = attention_pass(3, groups, -2, 2);
    const auto expected = p.maps.encoder_decoder[1].narrow(1, 0, 2).mean(1);  // [B, T, S]
    EXPECT_LT(max_abs_diff(p.attn, expected), 1e-6) << groups;
    EXPECT_GT(max_abs_diff(p.attn, p.maps.encoder_decoder[2].mean(1)), 1e-3) << groups;
    // Step by step: each step's attention is the full pass's row.
    torch::NoGradGuard g;
    auto enc = p.model->encode(p.src, p.src_lengths);
    auto state = p.model->init_state(enc);
    for (int64_t t = 0; t < 5; ++t) {
      auto step = p.model->step(p.prev.narrow(1, t, 1), enc, state, true);
      EXPECT_LT(max_abs_diff(step.attn.squeeze(1), expected.select(1, t)), 1e-5) << groups << " step " << t;
    }
  }
  for (int64_t layer : {3, -4}) EXPECT_THROW(attention_pass(3, "", layer), ConfigError) << layer;
  EXPECT_THROW(attention_pass(3, "", -1, 5), ConfigError);
}

TEST(LayerGroups, ParsesFormatsAndRejects) {
  EXPECT_EQ(parse_layer_groups("0-1,2-5", 6, "k"), (std::vector<int64_t>{0, 0, 2, 2, 2, 2}));
  EXPECT_EQ(parse_layer_groups("", 3, "k"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parse_layer_groups("0,1-2", 3, "k"), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(format_layer_groups({{0, 1}, {2, 2}, {3, 5}}), "0-1,2,3-5");
  for (const char* bad : {"0-1,3-5", "0-6", "1-5", "a-b", "0-1,,2-5", "0-1,2-3", "2-1", "0--1"}) {
    try {
      parse_layer_groups(bad, 6, "model.decoder.self_attn_groups");
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.decoder.self_attn_groups"), std::string::npos) << e.what();
    }
  }
  auto cfg = registry().preset_config("transformer_tiny_aan");
  static_cast<TransformerConfig&>(*cfg).decoder.self_attn_groups = "0-1";
  EXPECT_THROW(cfg->validate(), ConfigError);
}
