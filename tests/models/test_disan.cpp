// DiSAN blocks and the sentence classifiers: masks, feature-wise softmax, empty rows, a reference
// computation written out element by element, and padding invariance of every encoder.
#include <gtest/gtest.h>

#include "leanseq/core/error.h"
#include "leanseq/models/classifier.h"
#include "leanseq/nn/disan.h"
#include "support/fixtures.h"

using namespace leanseq;
using test::max_abs_diff;

TEST(Disan, DirectionalMasksExcludeTheDiagonal) {
  auto fw = nn::directional_mask(5, true), bw = nn::directional_mask(5, false);
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(fw[i][j].item<bool>(), j < i) << i << "," << j;
      EXPECT_EQ(bw[i][j].item<bool>(), j > i) << i << "," << j;
    }
  }
}

TEST(Disan, FeatureWiseSoftmaxSumsToOneOverAllowedKeysAndEmptyRowsAreZero) {
  torch::manual_seed(3);
  for (bool forward : {true, false}) {
    nn::DirectionalSelfAttention block(6, 8, forward, nn::Activation::elu, 0.0);
    auto x = torch::randn({2, 5, 6}, torch::requires_grad());
    auto pads = torch::zeros({2, 5}, torch::kBool);
    pads[1][4] = true;  // row 1 has 4 tokens
    auto r = block->forward(x, pads, true);
    ASSERT_EQ(r.probs.sizes(), (std::vector<int64_t>{2, 5, 5, 8}));
    auto sums = r.probs.sum(2);  // [B, T, H]
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t len = b == 0 ? 5 : 4;
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t keys = forward ? i : len - 1 - i;  // the first (forward) or last (backward) has none
        if (i < len) {
          EXPECT_LT((sums[b][i] - (keys > 0 ? 1.0 : 0.0)).abs().max().item<double>(), 1e-5) << "b " << b << " i " << i;
        }
        for (int64_t j = 0; j < 5; ++j) {
          const bool allowed = (forward ? j < i : j > i) && j < len;
          if (!allowed) {
            EXPECT_EQ(r.probs[b][i][j].abs().max().item<double>(), 0.0) << b << " " << i << " " << j;
          }
        }
      }
      EXPECT_EQ(r.out[1][4].abs().max().item<double>(), 0.0);  // pads are zero
    }
    r.out.sum().backward();
    EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(r.out).all().item<bool>());
    for (const auto& p : block->parameters()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
}

TEST(Disan, BlockMatchesTheFormulaElementByElement) {
  torch::manual_seed(5);
  const int64_t T = 4, C = 3, H = 2;
  nn::DirectionalSelfAttention block(C, H, true, nn::Activation::relu, 0.0);
  torch::NoGradGuard ng;
  torch::nn::init::normal_(block->attn_bias);
  auto x = torch::randn({1, T, C}, torch::kDouble);
  block->to(torch::kDouble);
  auto out = block->forward(x, torch::Tensor()).out;
  auto h = torch::relu(block->map(x))[0];
  auto dep = block->dependent(h), hd = block->head(h);
  auto logit = [&](int64_t i, int64_t j, int64_t c) {
    return 5.0 * std::tanh((dep[j][c].item<double>() + hd[i][c].item<double>() + block->attn_bias[c].item<double>()) / 5.0);
  };
  for (int64_t i = 0; i < T; ++i) {
    // s_i, channel by channel: a softmax over the keys j < i (none for i = 0: s_0 = 0)
    std::vector<double> s(static_cast<size_t>(H), 0.0);
    for (int64_t c = 0; c < H; ++c) {
      double z = 0;
      for (int64_t j = 0; j < i; ++j) z += std::exp(logit(i, j, c));
      for (int64_t j = 0; j < i; ++j) s[static_cast<size_t>(c)] += std::exp(logit(i, j, c)) / z * h[j][c].item<double>();
    }
    auto gate_logits = block->fusion_h(h[i]) + block->fusion_s(torch::tensor(s, torch::kDouble));
    for (int64_t c = 0; c < H; ++c) {
      const double g = 1.0 / (1.0 + std::exp(-gate_logits[c].item<double>()));
      const double want = g * h[i][c].item<double>() + (1 - g) * s[static_cast<size_t>(c)];
      EXPECT_NEAR(out[0][i][c].item<double>(), want, 1e-10) << "i " << i << " c " << c;
    }
  }
}

TEST(Disan, Source2TokenWeightsSumToOnePerChannelAndIgnorePads) {
  torch::manual_seed(7);
  nn::Source2Token s2t(4, nn::Activation::elu, 0.0);
  auto x = torch::randn({3, 5, 4});
  auto pads = torch::zeros({3, 5}, torch::kBool);
  pads.index_put_({1, torch::indexing::Slice(2)}, true);  // 2 tokens
  pads[2].fill_(true);                                      // nothing at all
  auto w = s2t->weights(x, pads);
  EXPECT_LT((w[0].sum(0) - 1).abs().max().item<double>(), 1e-5);
  EXPECT_LT((w[1].sum(0) - 1).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(w[1].narrow(0, 2, 3).abs().max().item<double>(), 0.0);
  auto v = s2t->forward(x, pads);
  EXPECT_EQ(v[2].abs().max().item<double>(), 0.0);
  EXPECT_TRUE(torch::isfinite(v).all().item<bool>());
  // pads do not matter: row 1 equals its 2 tokens alone
  auto alone = s2t->forward(x[1].narrow(0, 0, 2).unsqueeze(0), torch::Tensor());
  EXPECT_LT(max_abs_diff(alone[0], v[1]), 1e-6);
}

TEST(Classifier, EveryEncoderIgnoresPaddingAndPairsWork) {
  for (const std::string enc : {"disan", "transformer", "lightconv"}) {
    for (bool pair : {false, true}) {
      models::ClassifierConfig cfg;
      cfg.encoder = enc, cfg.embed_dim = 12, cfg.hidden_dim = 16, cfg.heads = 4, cfg.ffn_dim = 20, cfg.layers = 2;
      cfg.classifier_hidden = 10, cfg.num_classes = 3, cfg.pair = pair;
      torch::manual_seed(11);
      auto model = models::build_classifier(cfg, 30);
      model->eval();
      auto a = torch::tensor({{5, 6, 7, 8}}, torch::kLong);
      auto b = torch::tensor({{9, 10, 11}}, torch::kLong);
      auto padded_a = torch::tensor({{5, 6, 7, 8, 1, 1}, {12, 13, 1, 1, 1, 1}}, torch::kLong);
      auto padded_b = torch::tensor({{9, 10, 11, 1}, {14, 15, 16, 17}}, torch::kLong);
      torch::NoGradGuard ng;
      auto alone = model->forward(a, pair ? b : torch::Tensor());
      auto batched = model->forward(padded_a, pair ? padded_b : torch::Tensor());
      ASSERT_EQ(batched.sizes(), (std::vector<int64_t>{2, 3})) << enc;
      EXPECT_LT(max_abs_diff(alone[0], batched[0]), 1e-5) << enc << " pair " << pair;
    }
  }
}

TEST(Classifier, ConfigErrorsNameTheKey) {
  models::ClassifierConfig cfg;
  cfg.encoder = "rnn";
  EXPECT_THROW(cfg.validate(), ConfigError);
  cfg.encoder = "transformer";
  cfg.hidden_dim = 10, cfg.heads = 4;
  try {
    cfg.validate();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.hidden_dim"), std::string::npos);
  }
}
