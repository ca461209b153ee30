// ConvS2S: ConvTBC and linearized convolutions and the whole fconv model reproduce fairseq's
// numbers (../shared/fixtures/fairseq conv_tbc_*, linearized_conv_*, model_fconv.json); weight
// normalisation and the encoder's gradient scaling against finite differences; step-by-step
// decoding equals the full pass; layer specs in fairseq's notation, with clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/models/fconv.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "support/fairseq_models.h"
#include "support/fixtures.h"
#include "support/model_checks.h"

using namespace leanseq;
using namespace leanseq::models;

namespace {
// A ConvTBC module whose normalised weight equals `weight` (g = ||weight|| per output channel).
nn::ConvTBC conv_with_weight(const torch::Tensor& weight, const torch::Tensor& bias) {
  nn::ConvTBC conv(weight.size(1), weight.size(2), weight.size(0));
  torch::NoGradGuard g;
  conv->weight_v.copy_(weight);
  conv->weight_g.copy_(torch::norm_except_dim(weight, 2, 2));
  conv->bias.copy_(bias);
  return conv;
}
}  // namespace

TEST(FConvLayers, ConvTBCReproducesFairseq) {
  for (const char* name : {"conv_tbc_Cin3_Cout5_K4_P0", "conv_tbc_Cin4_Cout6_K3_P1", "conv_tbc_Cin4_Cout6_K3_P2"}) {
    test::Fixture fx;
    if (!test::load_fixture(name, fx)) LEANSEQ_MISSING_SHARED("fixtures/fairseq/" << name);
    const int64_t P = nlohmann::json::parse(fx.json_text)["config"]["padding"];
    auto conv = conv_with_weight(fx.params["weight"], fx.params["bias"]);
    auto x = fx.inputs["x"].clone().requires_grad_(true);
    auto y = conv->forward(x, P, P);
    EXPECT_LT(test::max_abs_diff(y, fx.outputs["y"]), 1e-5) << name;
    (y * fx.inputs["g"]).sum().backward();
    EXPECT_LT(test::max_abs_diff(x.grad(), fx.outputs["grad_x"]), 1e-5) << name;
    EXPECT_LT(test::max_abs_diff(conv->bias.grad(), fx.outputs["grad:bias"]), 1e-5) << name;
    // fairseq's gradient is with respect to the convolution weight w = g v / ||v||; our module's
    // parameters are v and g, so their expected gradients are fairseq's carried back through the
    // weight normalisation by autograd.
    auto v = conv->weight_v.detach().clone().requires_grad_(true);
    auto gain = conv->weight_g.detach().clone().requires_grad_(true);
    torch::_weight_norm(v, gain, 2).backward(fx.outputs["grad:weight"]);
    ASSERT_TRUE(conv->weight_v.grad().defined()) << name;
    EXPECT_LT(test::max_abs_diff(conv->weight_v.grad(), v.grad()), 1e-5) << name;
    EXPECT_LT(test::max_abs_diff(conv->weight_g.grad(), gain.grad()), 1e-5) << name;
  }
}

TEST(FConvLayers, LinearizedConvolutionReproducesFairseqFullAndSteps) {
  for (const char* name : {"linearized_conv_K3", "linearized_conv_weightnorm_K3"}) {
    test::Fixture fx;
    if (!test::load_fixture(name, fx)) LEANSEQ_MISSING_SHARED("fixtures/fairseq/" << name);
    nn::ConvTBC conv{nullptr};
    if (fx.params.count("weight")) {
      conv = conv_with_weight(fx.params["weight"], fx.params["bias"]);
    } else {
      conv = nn::ConvTBC(4, 6, 3);
      models::load_named_tensors(*conv, fx.params, true, name);
    }
    conv->eval();
    torch::NoGradGuard g;
    auto x = fx.inputs["x"];  // [T, B, C]
    EXPECT_LT(test::max_abs_diff(conv->forward(x, 2, 0), fx.outputs["y_full"]), 1e-5) << name;
    nn::ConvWindowCache cache;
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < x.size(0); ++t) steps.push_back(conv->step(x[t].unsqueeze(1), cache));
    EXPECT_LT(test::max_abs_diff(torch::cat(steps, 1), fx.outputs["y_steps"]), 1e-5) << name;
    // Chunks of several steps give the same outputs, and the flattened weight follows updates.
    nn::ConvWindowCache chunked;
    auto xb = x.transpose(0, 1);
    auto a = conv->step(xb.narrow(1, 0, 2), chunked), b = conv->step(xb.narrow(1, 2, 3), chunked);
    EXPECT_LT(test::max_abs_diff(torch::cat({a, b}, 1), fx.outputs["y_steps"]), 1e-5) << name;
    conv->weight_g.mul_(2.0);
    nn::ConvWindowCache again;
    auto doubled = conv->step(xb.narrow(1, 0, 1), again);
    EXPECT_LT(test::max_abs_diff(doubled - conv->bias, 2.0 * (steps[0] - conv->bias)), 1e-5) << name;
  }
}

TEST(FConvLayers, WeightNormGradientsMatchFiniteDifferences) {
  torch::manual_seed(3);
  nn::WeightNormLinear lin(5, 4, 0.1);
  lin->to(torch::kDouble);
  auto x = torch::randn({3, 5}, torch::kDouble), r = torch::randn({3, 4}, torch::kDouble);
  auto loss = [&] { return (lin(x) * r).sum(); };
  loss().backward();
  // The module's weight is g v / ||v|| per output row.
  auto expected = lin->weight_g * lin->weight_v / lin->weight_v.norm(2, 1, true);
  EXPECT_LT(test::max_abs_diff(lin->weight(), expected), 1e-12);
  torch::NoGradGuard g;
  for (auto* p : {&lin->weight_g, &lin->weight_v}) {
    auto flat = p->view(-1);
    for (int64_t i = 0; i < flat.numel(); i += 3) {
      EXPECT_NEAR(p->grad().view(-1)[i].item<double>(),
                  test::central_difference(flat, i, [&] { return loss().item<double>(); }), 1e-6);
    }
  }
}

TEST(FConvLayers, GradMultiplyScalesOnlyTheGradient) {
  auto x = torch::randn({4}, torch::requires_grad());
  auto y = nn::grad_multiply(x, 0.25);
  EXPECT_TRUE(y.equal(x.detach()));
  y.sum().backward();
  EXPECT_TRUE(x.grad().allclose(torch::full({4}, 0.25)));
}

TEST(FConvModel, ReproducesFairseq) {
  LEANSEQ_REQUIRE_FIXTURE("model_fconv", fx);
  auto model = test::fairseq_model(fx, "model_fconv");
  {
    torch::NoGradGuard g;
    auto src = fx.inputs["src_tokens"], prev = fx.inputs["prev_output_tokens"];
    auto enc = model->encode(src, fx.inputs["src_lengths"]);
    EXPECT_LT(test::max_abs_diff(enc.out, fx.outputs["encoder_out_0"]), 1e-5);
    EXPECT_LT(test::max_abs_diff(enc.values, fx.outputs["encoder_out_1"]), 1e-5);
    EXPECT_TRUE(enc.padding_mask.to(torch::kLong).equal(fx.outputs["encoder_padding_mask"]));
    auto out = model->decode(prev, enc, true);
    EXPECT_LT(test::max_abs_diff(out.logits, fx.outputs["decoder_logits"]), 1e-5);
    EXPECT_LT(test::max_abs_diff(torch::log_softmax(out.logits, -1), fx.outputs["decoder_lprobs"]), 1e-5);
    EXPECT_LT(test::max_abs_diff(out.attn, fx.outputs["decoder_attn"]), 1e-5);
  }
  test::check_fairseq_incremental_and_greedy(*model, fx, true);
}

TEST(FConvModel, ParameterNamesFollowFairseq) {
  auto cfg = registry().preset_config("fconv_tiny");
  auto model = build_model(*cfg, {30, 30, true});
  auto names = model->named_parameters().keys();
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  // fconv_tiny: encoder layer 2 widens 32 -> 48 (a projection); decoder layer 1 widens to 48 and
  // layer 2 takes its residual from two layers back (32 wide, no projection).
  EXPECT_TRUE(has("encoder.projections.2.weight_v"));
  EXPECT_FALSE(has("encoder.projections.0.weight_v"));
  EXPECT_TRUE(has("decoder.projections.1.weight_g"));
  EXPECT_FALSE(has("decoder.projections.2.weight_g"));
  EXPECT_TRUE(has("decoder.attention.2.out_projection.weight_v"));
  EXPECT_TRUE(has("decoder.convolutions.1.weight_g"));
  EXPECT_TRUE(has("decoder.fc3.weight_v"));
  EXPECT_EQ(model->named_parameters()["decoder.convolutions.1.weight_v"].sizes(), torch::IntArrayRef({2, 32, 96}));
}

TEST(FConvModel, IncrementalEqualsFullForwardAfterReorderAndInChunks) {
  for (bool tied : {false, true}) {
    for (const char* attention : {"True", "[False, True, True]"}) {
      auto cfg = registry().preset_config("fconv_tiny");
      auto& c = static_cast<FConvConfig&>(*cfg);
      c.share_input_output_embed = tied;
      c.decoder_attention = attention;
      auto model = build_model(*cfg, {30, 30, true});
      for (int64_t chunk : {1, 3}) test::check_incremental(*model, 30, chunk);
    }
  }
}

TEST(FConvModel, EncoderGradientIsScaledByTwiceTheAttentionLayers) {
  auto cfg = registry().preset_config("fconv_tiny");
  auto model = std::static_pointer_cast<FConvModel>(build_model(*cfg, {20, 20, true}));
  model->to(torch::kDouble);
  model->eval();
  auto src = torch::tensor({{5, 6, 7, 2}, {1, 8, 9, 2}}, torch::kLong);
  auto prev = torch::tensor({{2, 4, 5}, {2, 6, 7}}, torch::kLong);
  auto loss = [&] { return model->forward(src, torch::tensor({4, 3}), prev).logits.pow(2).sum(); };
  loss().backward();
  auto& bias = model->encoder->fc2->bias;  // only reaches the loss through the scaled encoder output
  const double scale = 1.0 / (2.0 * 3);    // three attention layers
  torch::NoGradGuard g;
  for (int64_t i = 0; i < 4; ++i) {
    const double numeric = test::central_difference(bias, i, [&] { return loss().item<double>(); });
    EXPECT_NEAR(bias.grad()[i].item<double>(), numeric * scale, 1e-6 * std::max(1.0, std::abs(numeric)));
  }
}

TEST(FConvSpecs, ParsesFairseqNotation) {
  auto s = parse_fconv_layers("[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2", "k");
  ASSERT_EQ(s.size(), 15u);
  EXPECT_EQ(s[0], (FConvLayerSpec{512, 3, 1}));
  EXPECT_EQ(s[9], (FConvLayerSpec{1024, 3, 1}));
  EXPECT_EQ(s[14], (FConvLayerSpec{2048, 1, 1}));
  auto t = parse_fconv_layers("[(256,3), (256, 5, 2),] + 2 * [(128, 3, 0)]", "k");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[1], (FConvLayerSpec{256, 5, 2}));
  EXPECT_EQ(t[3], (FConvLayerSpec{128, 3, 0}));
  EXPECT_EQ(parse_fconv_attention("True", 3, "k"), std::vector<bool>({true, true, true}));
  EXPECT_EQ(parse_fconv_attention("[False, True] + [True]", 3, "k"), std::vector<bool>({false, true, true}));
}

TEST(FConvSpecs, MalformedSpecsNameTheKeyAndThePlace) {
  auto message = [](const std::string& text) {
    try {
      parse_fconv_layers(text, "model.encoder.layers");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("[(512, 3] * 2").find("model.encoder.layers: expected ')' at character 9"), std::string::npos)
      << message("[(512, 3] * 2");
  EXPECT_NE(message("[(512, 3)] * x").find("expected a number"), std::string::npos);
  EXPECT_NE(message("[(512, 3)] - 2").find("unexpected text"), std::string::npos);
  EXPECT_NE(message("[(0, 3)]").find("must be positive"), std::string::npos);
  EXPECT_NE(message("[]").find("no layers"), std::string::npos);
  EXPECT_NE(message("[(8, 3, 3)]").find("residual from 3 layers back"), std::string::npos);
  EXPECT_THROW(parse_fconv_attention("[True]", 2, "model.decoder.attention"), ConfigError);
  EXPECT_THROW(parse_fconv_attention("Maybe", 2, "model.decoder.attention"), ConfigError);
  // Whole configs are validated when the model is built.
  auto cfg = registry().preset_config("fconv_tiny");
  static_cast<FConvConfig&>(*cfg).decoder_attention = "False";
  EXPECT_THROW(build_model(*cfg, {30, 30, true}), ConfigError);
  auto cfg2 = registry().preset_config("fconv_tiny");
  static_cast<FConvConfig&>(*cfg2).decoder_out_embed_dim = 16;
  static_cast<FConvConfig&>(*cfg2).share_input_output_embed = true;
  EXPECT_THROW(build_model(*cfg2, {30, 30, true}), ConfigError);
}
