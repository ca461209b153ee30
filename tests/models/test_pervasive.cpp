// Pervasive Attention: the masked 2D convolution (causality along the target axis, no gradient in
// the masked taps, exact steps), both networks, each aggregator against a direct computation,
// memory-efficient backward = plain backward, pads that do not change a sentence's outputs, and
// exact incremental decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "leanseq/core/error.h"
#include "leanseq/models/pervasive.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/masked_conv2d.h"
#include "support/fixtures.h"
#include "support/model_checks.h"

using namespace leanseq;
using namespace leanseq::models;
using test::max_abs_diff;

namespace {

std::shared_ptr<PervasiveConfig> config(const std::string& arch) {
  return std::static_pointer_cast<PervasiveConfig>(registry().preset_config(arch));
}

std::shared_ptr<Seq2SeqModel> build(const PervasiveConfig& c) { return build_model(c, {30, 30, true}); }

// The masked convolution written out: a full k x k Conv2d (symmetric padding) of the NCHW grid
// with the rows after the centre multiplied by zero.
torch::Tensor reference_masked_conv(nn::MaskedConv2d& conv, const torch::Tensor& x, int64_t groups) {
  const int64_t k = conv->kernel_size();
  auto mask = torch::ones_like(conv->weight);
  mask.narrow(2, k / 2 + 1, k / 2).zero_();
  auto y = torch::conv2d(x.permute({0, 3, 1, 2}).contiguous(), conv->weight * mask, conv->bias, 1, {k / 2, k / 2}, 1,
                         groups);
  return y.permute({0, 2, 3, 1});
}

}  // namespace

TEST(MaskedConv2d, EqualsTheMaskedKernelAndSeesNoLaterTargetRow) {
  torch::manual_seed(3);
  for (int64_t groups : {1, 4}) {
    nn::MaskedConv2d conv(4, 8, 5, groups, true);
    {
      torch::NoGradGuard g;
      conv->weight.normal_();  // masked rows too: the convolution must ignore them
    }
    auto x = torch::randn({2, 6, 7, 4});
    auto y = conv(x);
    EXPECT_LT(max_abs_diff(y, reference_masked_conv(conv, x, groups)), 1e-5);
    // Changing rows > 2 leaves output rows <= 2 as they were, and changes row 3.
    auto x2 = x.clone();
    x2.narrow(1, 3, 3).normal_();
    auto y2 = conv(x2);
    EXPECT_LT(max_abs_diff(y.narrow(1, 0, 3), y2.narrow(1, 0, 3)), 1e-6);
    EXPECT_GT(max_abs_diff(y.narrow(1, 3, 1), y2.narrow(1, 3, 1)), 1e-3);
  }
}

TEST(MaskedConv2d, MaskedTapsGetNoGradientAndStartAtZero) {
  torch::manual_seed(4);
  nn::MaskedConv2d conv(3, 5, 5, 1, false);
  EXPECT_EQ(conv->weight.narrow(2, 3, 2).abs().max().item<float>(), 0.0f);
  auto x = torch::randn({2, 4, 6, 3});
  conv(x).pow(2).sum().backward();
  EXPECT_EQ(conv->weight.grad().narrow(2, 3, 2).abs().max().item<float>(), 0.0f);
  EXPECT_GT(conv->weight.grad().narrow(2, 0, 3).abs().min().item<float>(), 0.0f);
  EXPECT_THROW(nn::MaskedConv2d(3, 5, 4), ConfigError);
  EXPECT_THROW(nn::MaskedConv2d(3, 5, 3, 2), ConfigError);
}

TEST(MaskedConv2d, StepsEqualTheFullConvolution) {
  torch::manual_seed(5);
  nn::MaskedConv2d conv(4, 4, 7, 4, true);
  auto x = torch::randn({3, 8, 5, 4});
  auto full = conv(x);
  nn::GridRowsCache cache;
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < 8;) {
    const int64_t n = t == 2 ? 3 : 1;  // a chunk of rows too
    rows.push_back(conv->step(x.narrow(1, t, n), cache));
    t += n;
  }
  EXPECT_LT(max_abs_diff(torch::cat(rows, 1), full), 1e-5);
  EXPECT_EQ(cache.rows.size(1), 3);
}

// At inference a full convolution is one product of each position's patch by the weight: equal to
// the convolution, and each position's bits independent of the batch and of the grid's width (a
// sentence padded in a batch decodes as it does alone, on every CPU).
TEST(MaskedConv2d, AtInferenceAFullConvolutionsRowsDoNotDependOnTheBatch) {
  torch::manual_seed(6);
  nn::MaskedConv2d conv(6, 8, 5, 1, true);
  {
    torch::NoGradGuard g;
    conv->weight.normal_();
  }
  auto x = torch::randn({3, 6, 9, 6});
  x.select(0, 1).narrow(1, 4, 5).zero_();  // image 1: 4 source columns, then padding
  const auto reference = reference_masked_conv(conv, x, 1);
  torch::NoGradGuard inference;
  const auto together = conv(x);
  // Sums of 3 x 5 x 6 terms of about 1 each.
  EXPECT_LT(max_abs_diff(together, reference), 1e-4);
  const auto alone = conv(x.narrow(0, 1, 1).narrow(2, 0, 4).contiguous());
  EXPECT_TRUE(torch::equal(alone, together.narrow(0, 1, 1).narrow(2, 0, 4)));
  // Steps: equal to the whole grid, and a step in a batch equal to the step alone.
  nn::GridRowsCache batch_cache, alone_cache;
  for (int64_t t = 0; t < 6; ++t) {
    const auto step = conv->step(x.narrow(1, t, 1), batch_cache);
    EXPECT_LT(max_abs_diff(step, together.narrow(1, t, 1)), 1e-5) << t;
    const auto one = conv->step(x.narrow(0, 1, 1).narrow(1, t, 1).narrow(2, 0, 4).contiguous(), alone_cache);
    EXPECT_TRUE(torch::equal(one, step.narrow(0, 1, 1).narrow(2, 0, 4))) << t;
  }
}

TEST(PervasiveModel, NetworkShapesAndParameterNames) {
  auto res = build(*config("pervasive_tiny"));
  auto dense = build(*config("pervasive_densenet_tiny"));
  auto names = [](const std::shared_ptr<Seq2SeqModel>& m) { return m->named_parameters().keys(); };
  auto has = [](const std::vector<std::string>& keys, const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  auto rn = names(res), dn = names(dense);
  EXPECT_TRUE(has(rn, "decoder.net.residual_blocks.1.mconv2.weight"));
  EXPECT_TRUE(has(rn, "decoder.net.residual_blocks.0.fc1.weight"));
  EXPECT_TRUE(has(dn, "decoder.aggregator.linear.weight") == false);  // max
  EXPECT_TRUE(has(dn, "decoder.net.dense_layers.2.norm1.weight"));
  EXPECT_TRUE(has(dn, "decoder.net.transition.weight"));
  // Depthwise masked convolution in the ResNet: [C, 1, k, k].
  auto& p = static_cast<PervasiveModel&>(*res);
  EXPECT_EQ(p.net->output_channels(), 16);
  auto w = res->named_parameters()["decoder.net.residual_blocks.0.mconv2.weight"];
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({16, 1, 3, 3}));
  // DenseNet: 8 grid channels + 3 layers x growth 4, halved by the transition.
  EXPECT_EQ(static_cast<PervasiveModel&>(*dense).net->output_channels(), 10);
  torch::NoGradGuard g;
  dense->eval();
  auto src = torch::randint(4, 30, {2, 5}, torch::kLong), prev = torch::randint(4, 30, {2, 4}, torch::kLong);
  auto out = dense->forward(src, torch::full({2}, 5, torch::kLong), prev, true);
  EXPECT_EQ(out.logits.sizes(), torch::IntArrayRef({2, 4, 30}));
  EXPECT_EQ(out.attn.sizes(), torch::IntArrayRef({2, 4, 5}));
}

TEST(PervasiveAggregator, EachKindEqualsADirectComputation) {
  torch::manual_seed(6);
  const int64_t B = 2, T = 3, S = 5, C = 4;
  auto x = torch::randn({B, T, S, C});
  auto pad = torch::zeros({B, 1, S, 1}, torch::kBool);
  pad[1].narrow(1, 3, 2).fill_(true);  // sentence 1 has 3 source tokens
  const std::vector<int64_t> len{5, 3};
  torch::NoGradGuard g;
  for (const std::string kind : {"max", "avg", "attn", "max-attn", "gated-max"}) {
    Aggregator agg(kind, C);
    auto [out, attn] = agg(x, pad, true);
    auto v = kind == "gated-max" ? torch::glu(agg->linear(x), -1) : x;
    for (int64_t b = 0; b < B; ++b) {
      auto row = v[b].narrow(1, 0, len[b]);  // [T, len, C]
      torch::Tensor want, want_attn;
      if (kind == "max" || kind == "gated-max") {
        auto [m, idx] = row.max(1);
        want = m;
        want_attn = torch::zeros({T, S});
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t c = 0; c < C; ++c) want_attn[t][idx[t][c].item<int64_t>()] += 1.0 / C;
        }
      } else if (kind == "avg") {
        want = row.mean(1) * std::sqrt(static_cast<double>(len[b]));
      } else {
        auto alpha = torch::softmax(agg->w2(agg->w1(row)).squeeze(-1), 1);  // [T, len]
        auto a = (alpha.unsqueeze(-1) * row).sum(1);
        want = kind == "attn" ? a : torch::cat({std::get<0>(row.max(1)), a}, -1);
        want_attn = torch::zeros({T, S});
        want_attn.narrow(1, 0, len[b]).copy_(alpha);
      }
      EXPECT_LT(max_abs_diff(out[b], want), 1e-5) << kind;
      if (want_attn.defined()) {
        EXPECT_LT(max_abs_diff(attn[b], want_attn), 1e-5) << kind;
      }
      EXPECT_LT(max_abs_diff(attn[b].sum(-1), torch::ones({T})), 1e-5) << kind;
    }
  }
}

TEST(PervasiveModel, MemoryEfficientBackwardEqualsThePlainBackward) {
  for (const std::string arch : {"pervasive_tiny", "pervasive_densenet_tiny", "pervasive_densenet_tiny+a2"}) {
    auto cfg = config(arch.substr(0, arch.find('+')));
    if (arch.find("+a2") != std::string::npos) cfg->a2.layers = "1";  // kept, not recomputed, between replayed layers
    cfg->convolution_dropout = 0.3;  // the replay must draw the same dropout masks
    auto plain = build(*cfg);
    cfg->memory_efficient = true;
    auto efficient = build(*cfg);
    {
      torch::NoGradGuard g;
      auto from = plain->named_parameters();
      for (auto& p : efficient->named_parameters()) p.value().copy_(from[p.key()]);
    }
    auto src = torch::randint(4, 30, {3, 6}, torch::kLong), prev = torch::randint(4, 30, {3, 5}, torch::kLong);
    src[2].narrow(0, 4, 2).fill_(1);
    auto run = [&](Seq2SeqModel& m) {
      m.train();
      torch::manual_seed(11);
      auto loss = m.forward(src, torch::full({3}, 6, torch::kLong), prev).logits.pow(2).mean();
      loss.backward();
      return loss.item<double>();
    };
    const double a = run(*plain), b = run(*efficient);
    EXPECT_NEAR(a, b, 1e-6) << arch;
    auto grads = plain->named_parameters();
    for (const auto& p : efficient->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << arch << " " << p.key();
      EXPECT_LT(max_abs_diff(p.value().grad(), grads[p.key()].grad()), 1e-5) << arch << " " << p.key();
    }
    // BatchNorm statistics moved once, as in the plain pass.
    auto buffers = plain->named_buffers();
    for (const auto& b : efficient->named_buffers()) {
      EXPECT_LT(max_abs_diff(b.value().to(torch::kDouble), buffers[b.key()].to(torch::kDouble)), 1e-6)
          << arch << " " << b.key();
    }
  }
}

TEST(PervasiveModel, PadsDoNotChangeASentencesOutputs) {
  for (const std::string arch : {"pervasive_tiny", "pervasive_densenet_tiny", "pervasive_tiny+a2", "pervasive_densenet_tiny+a2"}) {
    auto cfg = config(arch.substr(0, arch.find('+')));
    if (arch.find("+a2") != std::string::npos) cfg->a2.layers = "0-1";
    auto model = build(*cfg);
    model->eval();
    torch::NoGradGuard g;
    auto src = torch::tensor({{5, 6, 7, 2, 1, 1}}, torch::kLong), prev = torch::tensor({{2, 8, 9}}, torch::kLong);
    auto padded = model->forward(src, torch::tensor({4}), prev).logits;
    auto alone = model->forward(src.narrow(1, 0, 4), torch::tensor({4}), prev).logits;
    EXPECT_LT(max_abs_diff(padded, alone), 1e-5) << arch;
  }
}

TEST(PervasiveModel, IncrementalEqualsFullForwardForEveryNetworkAndAggregator) {
  for (const char* arch : {"pervasive_tiny", "pervasive_densenet_tiny"}) {
    for (const char* agg : {"max", "avg", "attn", "max-attn", "gated-max"}) {
      auto cfg = config(arch);
      cfg->aggregator = agg;
      auto model = build(*cfg);
      for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
    }
  }
}

TEST(PervasiveModel, ConfigErrorsNameTheKey) {
  auto expect_error = [](const std::function<void(PervasiveConfig&)>& edit, const std::string& key) {
    auto c = config("pervasive_tiny");
    edit(*c);
    try {
      c->validate();
      FAIL() << key;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error([](PervasiveConfig& c) { c.kernel_size = 4; }, "model.kernel_size");
  expect_error([](PervasiveConfig& c) { c.aggregator = "mean"; }, "model.aggregator");
  expect_error([](PervasiveConfig& c) { c.convnet = "unet"; }, "model.convnet");
  expect_error([](PervasiveConfig& c) { c.divide_channels = 3; }, "model.divide_channels");
  expect_error([](PervasiveConfig& c) { c.output_dim = 6; }, "model.output_dim");
  expect_error([](PervasiveConfig& c) { c.conv_groups = 3; }, "model.conv_groups");
}

TEST(PervasiveModel, PresetsFollowTheReferenceConfigurations) {
  auto p2018 = config("pervasive_iwslt_de_en_2018");
  EXPECT_EQ(p2018->convnet, "densenet");
  EXPECT_EQ(p2018->num_layers, 24);
  EXPECT_EQ(p2018->growth_rate, 32);
  EXPECT_EQ(p2018->kernel_size, 5);
  EXPECT_EQ(p2018->encoder_embed_dim, 128);
  auto p2020 = config("pervasive_iwslt_de_en");
  EXPECT_EQ(p2020->convnet, "resnet");
  EXPECT_EQ(p2020->num_layers, 14);
  EXPECT_EQ(p2020->kernel_size, 11);
  EXPECT_EQ(p2020->aggregator, "gated-max");
  for (const auto& p : registry().presets()) {
    if (p.family == "pervasive") {
      EXPECT_NO_THROW(registry().preset_config(p.name)->validate()) << p.name;
    }
  }
}
