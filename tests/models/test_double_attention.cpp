// A2 double attention: the two softmax axes against a reference written out, pads, the causal
// form against its step-by-step decoding (also after a reorder), the 2D form and its row-by-row
// steps, and its insertion into the Transformer, LightConv and Pervasive models and the classifiers.
#include <gtest/gtest.h>

#include "leanseq/core/error.h"
#include "leanseq/models/layer_spec.h"
#include "leanseq/models/classifier.h"
#include "leanseq/models/fconv.h"
#include "leanseq/models/lightconv.h"
#include "leanseq/models/pervasive.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/double_attention.h"
#include "support/fixtures.h"
#include "support/model_checks.h"

using namespace leanseq;
using test::max_abs_diff;

namespace {
// The message of the ConfigError that validating `cfg` throws ("" if none).
std::string config_error(const models::ModelConfig& cfg) {
  try {
    cfg.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// out_t = x_t + proj(sum_k softmax_k(V_t)_k * sum_s softmax_s(Bg_:k)_s A_s), one element at a time.
// Pre-norm: the maps read LayerNorm(x); post-norm: LayerNorm of the sum.
torch::Tensor reference(nn::DoubleAttentionImpl& blk, const torch::Tensor& x, bool causal, nn::BlockNorm norm) {
  auto h = norm == nn::BlockNorm::pre ? blk.layer_norm(x) : x;
  auto a = blk.phi(h)[0], bg = blk.theta(h)[0], v = blk.rho(h)[0];
  const int64_t T = x.size(1), m = a.size(1), n = bg.size(1);
  auto z = torch::zeros({T, m}, x.options());
  for (int64_t t = 0; t < T; ++t) {
    const int64_t last = causal ? t : T - 1;
    auto dist = torch::softmax(v[t], 0);  // over the n descriptors
    for (int64_t k = 0; k < n; ++k) {
      auto w = torch::softmax(bg.narrow(0, 0, last + 1).select(1, k), 0);  // over positions
      auto g = (w.unsqueeze(1) * a.narrow(0, 0, last + 1)).sum(0);         // [m]
      z[t] += dist[k] * g;
    }
  }
  auto out = x + blk.proj(z).unsqueeze(0);
  return norm == nn::BlockNorm::post ? blk.layer_norm(out) : out;
}

// A block in evaluation mode, its parameters drawn from `seed`.
nn::DoubleAttention eval_block(uint64_t seed, int64_t dim, int64_t m, int64_t n, bool causal,
                               nn::BlockNorm norm = nn::BlockNorm::none) {
  torch::manual_seed(seed);
  nn::DoubleAttention blk(dim, m, n, causal, 0.0, norm);
  blk->eval();
  return blk;
}
}  // namespace

TEST(DoubleAttention, GatherOverPositionsAndDistributeOverDescriptorsMatchTheFormula) {
  torch::manual_seed(1);
  for (auto norm : {nn::BlockNorm::none, nn::BlockNorm::pre, nn::BlockNorm::post}) {
    for (bool causal : {false, true}) {
      nn::DoubleAttention blk(6, 4, 3, causal, 0.0, norm);
      blk->to(torch::kDouble);
      torch::NoGradGuard ng;
      if (blk->layer_norm) {  // not the identity LayerNorm of a fresh block
        blk->layer_norm->weight.normal_();
        blk->layer_norm->bias.normal_();
      }
      auto x = torch::randn({1, 5, 6}, torch::kDouble);
      EXPECT_LT(max_abs_diff(blk(x), reference(*blk, x, causal, norm)), 1e-12)
          << "causal " << causal << " norm " << static_cast<int>(norm);
      auto d = blk->distribute_weights(x);
      EXPECT_LT((d.sum(-1) - 1).abs().max().item<double>(), 1e-12);
    }
  }
}

TEST(DoubleAttention, PadsDoNotGatherAndKeepTheirInput) {
  auto blk = eval_block(2, 6, 4, 3, false, nn::BlockNorm::post);
  torch::NoGradGuard ng;
  auto x = torch::randn({2, 5, 6});
  auto pads = torch::zeros({2, 5}, torch::kBool);
  pads.index_put_({1, torch::indexing::Slice(3)}, true);
  auto out = blk(x, pads);
  auto alone = blk(x[1].narrow(0, 0, 3).unsqueeze(0));
  EXPECT_LT(max_abs_diff(out[1].narrow(0, 0, 3), alone[0]), 1e-6);
  EXPECT_LT(max_abs_diff(out[1].narrow(0, 3, 2), x[1].narrow(0, 3, 2)), 1e-7);
}

// At inference (float32, CPU, no gradient) the gather over the whole sequence runs in a fixed
// order: the training pass's values within rounding, and a padded sentence's output the same bits
// as the sentence alone, for every norm placement and a sequence and a grid.
TEST(DoubleAttention, AtInferenceTheGatherIsTheTrainingOneAndIgnoresThePadding) {
  for (auto norm : {nn::BlockNorm::none, nn::BlockNorm::pre, nn::BlockNorm::post}) {
    auto blk = eval_block(7, 16, 8, 6, false, norm);
    auto x = torch::randn({3, 11, 16});
    auto pads = torch::zeros({3, 11}, torch::kBool);
    pads.index_put_({1, torch::indexing::Slice(4)}, true);
    pads.index_put_({2, torch::indexing::Slice(9)}, true);
    auto grid = torch::randn({2, 3, 5, 16});
    auto trained = blk(x.clone().requires_grad_(), pads);  // ATen's products, recorded
    auto grid_trained = blk->forward_grid(grid.clone().requires_grad_(), {}, false);
    torch::NoGradGuard ng;
    auto out = blk(x, pads);
    EXPECT_LT(max_abs_diff(out, trained), 1e-5) << static_cast<int>(norm);
    for (int64_t b : {0, 1, 2}) {
      const int64_t len = b == 0 ? 11 : b == 1 ? 4 : 9;
      auto alone = blk(x[b].narrow(0, 0, len).unsqueeze(0));
      EXPECT_TRUE(torch::equal(out[b].narrow(0, 0, len), alone[0])) << "sentence " << b << " " << static_cast<int>(norm);
    }
    EXPECT_LT(max_abs_diff(blk->forward_grid(grid, {}, false), grid_trained), 1e-5);
  }
}

TEST(DoubleAttention, CausalStepsEqualTheFullFormAlsoAfterAReorder) {
  auto blk = eval_block(3, 8, 4, 5, true, nn::BlockNorm::pre);
  torch::NoGradGuard ng;
  auto x = torch::randn({3, 7, 8});
  auto full = blk(x);
  for (int64_t chunk : {1, 3}) {
    nn::DoubleAttentionCache st;
    std::vector<torch::Tensor> outs;
    for (int64_t t = 0; t < 7; t += chunk) outs.push_back(blk->step(x.narrow(1, t, std::min(chunk, 7 - t)), st));
    EXPECT_LT(max_abs_diff(torch::cat(outs, 1), full), 1e-5) << "chunk " << chunk;
  }
  // Later inputs change nothing before them.
  auto y = x.clone();
  y.narrow(1, 4, 3).normal_();
  EXPECT_LT(max_abs_diff(blk(y).narrow(1, 0, 4), full.narrow(1, 0, 4)), 1e-6);
  // A beam reorder after 4 steps.
  auto order = torch::tensor({2, 0, 0}, torch::kLong);
  nn::IncrementalState state;
  blk->step(x.narrow(1, 0, 4), state.get<nn::DoubleAttentionCache>("a2"));
  state.reorder(order);
  auto rest = blk->step(x.index_select(0, order).narrow(1, 4, 3), state.get<nn::DoubleAttentionCache>("a2"));
  // A name holds one cache type; an unnamed cache is refused.
  EXPECT_EQ(state.size(), 1u);
  EXPECT_THROW(state.get<nn::ConvWindowCache>("a2"), std::logic_error);
  EXPECT_THROW(state.get<nn::ConvWindowCache>(""), std::logic_error);
  EXPECT_LT(max_abs_diff(rest, blk(x.index_select(0, order)).narrow(1, 4, 3)), 1e-5);
}

TEST(DoubleAttention, ChunkedCausalPassEqualsTheMaskedOneWithItsGradients) {
  // The linear-time form (running sums across chunks) against the whole-sequence masked [T, T]
  // product, with pads, chunks that do and do not divide the length, values and gradients.
  torch::manual_seed(7);
  nn::DoubleAttention blk(8, 4, 5, true, 0.0, nn::BlockNorm::pre);
  blk->train(false);
  auto x0 = torch::randn({3, 23, 8}) * 2;
  auto pads = torch::zeros({3, 23}, torch::kBool);
  pads.index_put_({2, torch::indexing::Slice(17)}, true);
  auto run = [&](int64_t chunk) {
    blk->set_causal_chunk(chunk);
    blk->zero_grad();
    auto x = x0.clone().requires_grad_(true);
    auto y = blk(x, pads);
    (y * torch::linspace(-1, 1, y.numel()).view(y.sizes())).sum().backward();
    return std::make_pair(y.detach(), x.grad());
  };
  const auto [masked, masked_grad] = run(0);
  const auto masked_phi = blk->phi->weight.grad().clone();
  EXPECT_EQ(nn::DoubleAttentionImpl::kDefaultCausalChunk, 64);
  for (int64_t chunk : {1, 4, 5, 22, 64}) {
    const auto [y, grad] = run(chunk);
    EXPECT_LT(max_abs_diff(y, masked), 1e-5) << "chunk " << chunk;
    EXPECT_LT(max_abs_diff(grad, masked_grad), 1e-5) << "chunk " << chunk;
    EXPECT_LT(max_abs_diff(blk->phi->weight.grad(), masked_phi), 1e-5) << "chunk " << chunk;
  }
}

TEST(DoubleAttention, GridFormGathersFromTheGridOrItsEarlierRows) {
  auto blk = eval_block(4, 6, 4, 3, true);
  torch::NoGradGuard ng;
  auto grid = torch::randn({2, 3, 4, 6});  // [B, H, W, C], channels last
  auto flat = grid.reshape({2, 12, 6});
  nn::DoubleAttention whole(6, 4, 3, false, 0.0);
  whole->eval();
  for (const auto& p : whole->named_parameters()) p.value().copy_(blk->named_parameters()[p.key()]);
  auto out = blk->forward_grid(grid, {}, false);
  EXPECT_LT(max_abs_diff(out.reshape({2, 12, 6}), whole(flat)), 1e-5);
  // Causal rows: row r gathers from all cells of rows <= r, so later rows change nothing before them
  // (and the whole grid does change them).
  auto causal = blk->forward_grid(grid, {}, true);
  auto changed = grid.clone();
  changed.narrow(1, 2, 1).normal_();  // the last row
  EXPECT_LT(max_abs_diff(blk->forward_grid(changed, {}, true).narrow(1, 0, 2), causal.narrow(1, 0, 2)), 1e-6);
  EXPECT_GT(max_abs_diff(blk->forward_grid(changed, {}, false).narrow(1, 0, 2), out.narrow(1, 0, 2)), 1e-4);
  // The first row of the causal grid is the whole-grid form of that row alone.
  EXPECT_LT(max_abs_diff(causal.narrow(1, 0, 1), blk->forward_grid(grid.narrow(1, 0, 1), {}, false)), 1e-5);
}

TEST(DoubleAttention, GridStepsEqualTheCausalGridWithMaskedCells) {
  auto blk = eval_block(6, 6, 4, 3, true);
  torch::NoGradGuard ng;
  auto grid = torch::randn({2, 5, 4, 6});
  auto source_pad = torch::zeros({2, 1, 4}, torch::kBool);
  source_pad.index_put_({1, 0, torch::indexing::Slice(2)}, true);  // the second source has 2 tokens
  auto full = blk->forward_grid(grid, source_pad, true);
  // Masked cells keep their input, and what they hold does not matter to the others.
  EXPECT_LT(max_abs_diff(full[1].narrow(1, 2, 2), grid[1].narrow(1, 2, 2)), 1e-7);
  auto noisy = grid.clone();
  noisy[1].narrow(1, 2, 2).normal_();
  EXPECT_LT(max_abs_diff(blk->forward_grid(noisy, source_pad, true)[1].narrow(1, 0, 2), full[1].narrow(1, 0, 2)), 1e-6);
  for (int64_t chunk : {1, 2}) {
    nn::DoubleAttentionCache st;
    std::vector<torch::Tensor> rows;
    for (int64_t t = 0; t < 5; t += chunk) {
      rows.push_back(blk->step_grid(grid.narrow(1, t, std::min(chunk, 5 - t)), source_pad, st));
    }
    EXPECT_LT(max_abs_diff(torch::cat(rows, 1), full), 1e-5) << "chunk " << chunk;
  }
}

TEST(DoubleAttention, InsertedIntoTheTransformerAndTheClassifiers) {
  auto cfg = models::registry().preset_config("transformer_tiny");
  auto& tc = static_cast<models::TransformerConfig&>(*cfg);
  tc.encoder.a2.layers = "1";
  auto model = models::build_model(*cfg, {30, 30, true});
  EXPECT_NE(model->named_parameters().find("encoder.a2_1.theta.weight"), nullptr);
  EXPECT_EQ(model->named_parameters().find("encoder.a2_0.theta.weight"), nullptr);
  test::check_incremental(*model, 30, 1);
  tc.decoder.a2.layers = "0,1";  // causal, decoded step by step, with the host's (post-)norm
  tc.decoder.a2.norm = "host";
  model = models::build_model(*cfg, {30, 30, true});
  EXPECT_NE(model->named_parameters().find("decoder.a2_0.theta.weight"), nullptr);
  EXPECT_NE(model->named_parameters().find("decoder.a2_0.layer_norm.weight"), nullptr);
  EXPECT_EQ(model->named_parameters().find("encoder.a2_1.layer_norm.weight"), nullptr);
  for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  tc.encoder.a2.layers = "2";
  EXPECT_THROW(cfg->validate(), ConfigError);

  // After the DiSAN encoder, which is one block (layer 0); pads neither give nor change.
  tc.encoder_type = "disan";
  tc.encoder.a2.layers = "1";
  EXPECT_THROW(cfg->validate(), ConfigError);
  tc.encoder.a2.layers = "0";
  tc.encoder.a2.norm = "host";
  cfg->validate();
  torch::manual_seed(3);
  model = models::build_model(*cfg, {30, 30, true});
  EXPECT_NE(model->named_parameters().find("encoder.a2_0.layer_norm.weight"), nullptr);
  test::check_incremental(*model, 30, 1);
  {
    model->eval();
    torch::NoGradGuard ng;
    auto alone = model->encode(torch::tensor({{5, 6, 7, 2}}, torch::kLong), torch::tensor({4}));
    auto padded = model->encode(torch::tensor({{5, 6, 7, 2, 1}, {8, 9, 10, 11, 2}}, torch::kLong), torch::tensor({4, 5}));
    EXPECT_LT(max_abs_diff(alone.out[0], padded.out[0].narrow(0, 0, 4)), 1e-5);
    model->named_parameters()["encoder.a2_0.proj.weight"].zero_();  // the block is in the path
    auto without = model->encode(torch::tensor({{5, 6, 7, 2}}, torch::kLong), torch::tensor({4}));
    EXPECT_GT(max_abs_diff(alone.out, without.out), 1e-4);
  }
  tc.encoder_type = "transformer";

  for (const std::string enc : {"disan", "transformer", "lightconv"}) {
    models::ClassifierConfig cc;
    cc.encoder = enc, cc.embed_dim = 12, cc.hidden_dim = 16, cc.heads = 4, cc.ffn_dim = 20, cc.classifier_hidden = 8;
    cc.a2.layers = "0";
    torch::manual_seed(5);
    auto clf = models::build_classifier(cc, 30);
    clf->eval();
    EXPECT_NE(clf->named_parameters().find("a2_0.rho.weight"), nullptr);
    torch::NoGradGuard ng;
    auto alone = clf->forward(torch::tensor({{5, 6, 7}}, torch::kLong));
    auto padded = clf->forward(torch::tensor({{5, 6, 7, 1}, {8, 9, 10, 11}}, torch::kLong));
    EXPECT_LT(max_abs_diff(alone[0], padded[0]), 1e-5) << enc;
  }
}

TEST(DoubleAttention, InsertedIntoLightConvAndThePervasiveGrid) {
  for (const char* preset : {"lightconv_tiny", "dynamicconv_tiny"}) {
    auto cfg = models::registry().preset_config(preset);
    auto& lc = static_cast<models::LightConvConfig&>(*cfg);
    lc.encoder.a2.layers = "0";
    lc.encoder.a2.norm = "host";
    lc.decoder.a2.layers = "0,1";
    cfg->validate();
    auto model = models::build_model(*cfg, {30, 30, true});
    EXPECT_NE(model->named_parameters().find("encoder.a2_0.phi.weight"), nullptr);
    EXPECT_NE(model->named_parameters().find("decoder.a2_1.proj.weight"), nullptr);
    for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
    lc.decoder.a2.layers = "2";
    EXPECT_THROW(cfg->validate(), ConfigError);
    lc.decoder.a2.layers = "1";
    lc.decoder.a2.norm = "after";
    EXPECT_THROW(cfg->validate(), ConfigError);
  }

  auto cfg = models::registry().preset_config("pervasive_tiny");
  auto& pc = static_cast<models::PervasiveConfig&>(*cfg);
  pc.a2.layers = "1";
  pc.a2.features = 6;
  cfg->validate();
  auto model = models::build_model(*cfg, {30, 30, true});
  const auto named = model->named_parameters();  // find() points into it: it must outlive phi
  auto phi = named.find("decoder.net.a2_1.phi.weight");
  ASSERT_NE(phi, nullptr);
  EXPECT_EQ(phi->size(0), 6);
  for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  // The block is used: silencing its output projection changes the logits.
  model->eval();
  torch::NoGradGuard ng;
  auto src = torch::tensor({{5, 6, 7, 2}}, torch::kLong), prev = torch::tensor({{2, 8, 9}}, torch::kLong);
  auto logits = [&] { return model->decode(prev, model->encode(src, torch::tensor({4}))).logits; };
  auto with = logits();
  model->named_parameters()["decoder.net.a2_1.proj.weight"].zero_();
  model->named_parameters()["decoder.net.a2_1.proj.bias"].zero_();
  EXPECT_GT(max_abs_diff(with, logits()), 1e-4);
  pc.a2.norm = "host";  // the grid has no LayerNorm
  EXPECT_EQ(config_error(*cfg), "model.a2_norm: the grid's layers have no LayerNorm; only none");

  // The 2018 DenseNet: a block after a layer takes the features so far, whose width grows by the
  // growth rate at each layer (8 grid channels + 4 per layer in pervasive_densenet_tiny).
  auto dcfg = models::registry().preset_config("pervasive_densenet_tiny");
  auto& dc = static_cast<models::PervasiveConfig&>(*dcfg);
  dc.a2.layers = "0,2";
  dcfg->validate();
  auto dense = models::build_model(*dcfg, {30, 30, true});
  auto params = dense->named_parameters();
  ASSERT_NE(params.find("decoder.net.a2_0.phi.weight"), nullptr);
  EXPECT_EQ(params["decoder.net.a2_0.phi.weight"].size(1), 12);
  EXPECT_EQ(params["decoder.net.a2_0.phi.weight"].size(0), 3);  // m: a quarter of the width
  EXPECT_EQ(params["decoder.net.a2_2.proj.weight"].size(0), 20);
  EXPECT_EQ(params.find("decoder.net.a2_1.phi.weight"), nullptr);
  for (int64_t chunk : {1, 3}) test::check_incremental(*dense, 30, chunk);
  dense->eval();
  auto dense_logits = [&] { return dense->decode(prev, dense->encode(src, torch::tensor({4}))).logits; };
  auto dense_with = dense_logits();
  params["decoder.net.a2_0.proj.weight"].zero_();
  params["decoder.net.a2_0.proj.bias"].zero_();
  EXPECT_GT(max_abs_diff(dense_with, dense_logits()), 1e-4);
  dc.a2.layers = "3";
  EXPECT_THROW(dcfg->validate(), ConfigError);
}

TEST(DoubleAttention, InsertedIntoConvS2S) {
  // fconv_tiny: encoder layers of 32, 32 and 48 channels, decoder layers of 32, 48 and 32.
  auto cfg = models::registry().preset_config("fconv_tiny");
  auto& fc = static_cast<models::FConvConfig&>(*cfg);
  fc.encoder_a2.layers = "0,2";
  fc.decoder_a2.layers = "1-2";
  cfg->validate();
  torch::manual_seed(9);
  auto model = models::build_model(*cfg, {30, 30, true});
  auto params = model->named_parameters();
  ASSERT_NE(params.find("encoder.a2_2.phi.weight"), nullptr);
  EXPECT_EQ(params["encoder.a2_2.phi.weight"].size(1), 48);
  EXPECT_EQ(params["encoder.a2_0.phi.weight"].size(1), 32);
  EXPECT_EQ(params["decoder.a2_1.proj.weight"].size(0), 48);
  EXPECT_EQ(params.find("decoder.a2_0.phi.weight"), nullptr);
  for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
  model->eval();
  torch::NoGradGuard ng;
  // Source pads change nothing for the sentence they pad.
  auto alone = model->encode(torch::tensor({{5, 6, 7, 2}}, torch::kLong), torch::tensor({4}));
  auto padded = model->encode(torch::tensor({{5, 6, 7, 2, 1}, {8, 9, 10, 11, 2}}, torch::kLong), torch::tensor({4, 5}));
  EXPECT_LT(max_abs_diff(alone.out[0], padded.out[0].narrow(0, 0, 4)), 1e-5);
  // Both sides' blocks are in the path.
  auto src = torch::tensor({{5, 6, 7, 2}}, torch::kLong), prev = torch::tensor({{2, 8, 9}}, torch::kLong);
  auto logits = [&] { return model->decode(prev, model->encode(src, torch::tensor({4}))).logits; };
  for (const char* block : {"encoder.a2_0", "decoder.a2_2"}) {
    auto before = logits();
    params[std::string(block) + ".proj.weight"].zero_();
    params[std::string(block) + ".proj.bias"].zero_();
    EXPECT_GT(max_abs_diff(before, logits()), 1e-4) << block;
  }
  fc.decoder_a2.norm = "host";  // no LayerNorm in ConvS2S
  EXPECT_EQ(config_error(*cfg), "model.decoder.a2_norm: ConvS2S's layers have no LayerNorm; only none");
  fc.decoder_a2.norm = "none";
  fc.encoder_a2.layers = "3";
  EXPECT_THROW(cfg->validate(), ConfigError);
}

TEST(DoubleAttention, LayerListsTakeIndicesAndRanges) {
  EXPECT_EQ(models::parse_layer_list("0-2,4", 6, "k"), (std::vector<bool>{true, true, true, false, true, false}));
  EXPECT_EQ(models::parse_layer_list("", 3, "k"), std::vector<bool>(3, false));
  for (const char* bad : {"2-1", "0-6", "6", "a", "1-", "-1", "1,,2"}) {
    EXPECT_THROW(models::parse_layer_list(bad, 6, "model.encoder.a2_layers"), ConfigError) << bad;
  }
}
