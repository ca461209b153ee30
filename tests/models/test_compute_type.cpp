// Inference compute types on whole models (nn/packed_weight.h): every family's matrix products
// run in int8 and bfloat16 close to float32, the step-by-step decoder stays exact against the
// full pass in int8, and going back to float32 restores the float32 outputs exactly; self-attention
// takes q, k and v from one product (int8 and float32).
#include <gtest/gtest.h>

#include "leanseq/kernels/compute_type.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/log_softmax.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/output_rows.h"
#include "leanseq/nn/packed_weight.h"

using namespace leanseq;
using kernels::ComputeType;

namespace {

struct Outputs {
  torch::Tensor full, steps;  // logits of the full pass and of the step-by-step decoder
};

Outputs run(models::Seq2SeqModel& model, const torch::Tensor& src, const torch::Tensor& prev) {
  c10::InferenceMode guard;
  auto enc = model.encode(src, torch::full({src.size(0)}, src.size(1), torch::kLong));
  Outputs o;
  o.full = model.decode(prev, enc, false).logits;
  auto state = model.init_state(enc);
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < prev.size(1); ++t) steps.push_back(model.step(prev.narrow(1, t, 1), enc, state, false).logits);
  o.steps = torch::cat(steps, 1);
  return o;
}

double relative(const torch::Tensor& a, const torch::Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); }

}  // namespace

TEST(ComputeTypes, EveryFamilyRunsItsProductsInInt8AndBfloat16) {
  if (!kernels::int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  const bool bf16_runs =
      kernels::resolve_compute_type(kernels::ComputeTypeRequest::bfloat16, false).type == ComputeType::bfloat16;
  for (const char* arch : {"transformer_tiny", "transformer_tiny_san_aan", "lightconv_tiny", "dynamicconv_tiny",
                           "fconv_tiny", "pervasive_tiny"}) {
    SCOPED_TRACE(arch);
    torch::manual_seed(4);
    auto model = models::build_model(*models::registry().preset_config(arch), {40, 40, true});
    model->eval();
    auto src = torch::randint(4, 40, {3, 7}), prev = torch::randint(4, 40, {3, 6});
    src.select(1, 6).fill_(2);
    prev.select(1, 0).fill_(2);
    const auto f32 = run(*model, src, prev);

    EXPECT_GT(nn::set_compute_type(*model, ComputeType::int8), 0);
    const auto i8 = run(*model, src, prev);
    EXPECT_FALSE(torch::equal(i8.full, f32.full));  // the products did change
    EXPECT_LT(relative(i8.full, f32.full), 0.03);
    // Steps quantize the same rows as the full pass, and the integer products are exact: the
    // incremental decoder stays exact in int8 (about 1e-7 here; a rounding flip would cost more).
    EXPECT_LT(relative(i8.steps, i8.full), 1e-4);

    // bfloat16 where it runs: under ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU, ATen still hands its
    // bfloat16 products to oneDNN, which refuses them; a request there resolves to float32.
    if (bf16_runs) {
      nn::set_compute_type(*model, ComputeType::bfloat16);
      const auto bf = run(*model, src, prev);
      EXPECT_FALSE(torch::equal(bf.full, f32.full));
      EXPECT_LT(relative(bf.full, f32.full), 0.05);
    }

    nn::set_compute_type(*model, ComputeType::float32);
    const auto back = run(*model, src, prev);
    EXPECT_TRUE(torch::equal(back.full, f32.full));
    EXPECT_TRUE(torch::equal(back.steps, f32.steps));
  }
}

// A step whose state asks for log-probabilities: the families whose output layer gives them
// (transformer, LightConv: taken row by row as an int8 layer scales its product back) return the
// same floats as kernels::log_softmax of their logits, bit for bit, in int8 and float32, over
// the whole vocabulary and over a shortlist; the others return logits and say so.
TEST(ComputeTypes, StepsAskedForLogProbabilitiesGiveThoseOfTheirLogits) {
  if (!kernels::int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  for (const char* arch : {"transformer_tiny", "lightconv_tiny", "fconv_tiny", "pervasive_tiny"}) {
    const bool fused = std::string(arch).rfind("transformer", 0) == 0 || std::string(arch).rfind("lightconv", 0) == 0;
    torch::manual_seed(5);
    auto model = models::build_model(*models::registry().preset_config(arch), {40, 40, true});
    model->eval();
    auto src = torch::randint(4, 40, {3, 7}), prev = torch::randint(4, 40, {3, 4});
    prev.select(1, 0).fill_(2);
    c10::InferenceMode guard;
    auto enc = model->encode(src, torch::full({3}, 7, torch::kLong));
    for (auto type : {ComputeType::int8, ComputeType::float32}) {
      nn::set_compute_type(*model, type);
      for (bool shortlist : {false, true}) {
        SCOPED_TRACE(std::string(arch) + (type == ComputeType::int8 ? ", int8" : ", float32") +
                     (shortlist ? ", shortlist" : ""));
        auto logits_state = model->init_state(enc), probs_state = model->init_state(enc);
        probs_state.log_probs = true;
        if (shortlist) {
          for (auto* st : {&logits_state, &probs_state}) {
            st->output_rows = std::make_shared<nn::OutputRows>();
            st->output_rows->ids = torch::arange(0, 40, 3);
          }
        }
        for (int64_t t = 0; t < prev.size(1); ++t) {
          auto logits = model->step(prev.narrow(1, t, 1), enc, logits_state, false);
          auto probs = model->step(prev.narrow(1, t, 1), enc, probs_state, false);
          EXPECT_FALSE(logits.log_probs);
          EXPECT_EQ(probs.log_probs, fused);
          EXPECT_EQ(probs.logits.size(-1), shortlist ? 14 : 40);
          EXPECT_TRUE(torch::equal(probs.logits, fused ? kernels::log_softmax(logits.logits) : logits.logits)) << t;
        }
      }
    }
  }
}

TEST(ComputeTypes, ALinearLayerUsesItsPackedWeight) {
  if (!kernels::int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(5);
  auto l = nn::make_linear(64, 32);
  torch::NoGradGuard g;
  l->bias.uniform_(-1, 1);
  auto x = torch::randn({4, 5, 64});
  l->set_compute_type(ComputeType::int8);
  auto want = kernels::int8_linear_reference(x, kernels::quantize_weight(l->weight), l->bias);
  EXPECT_LT((l(x) - want).abs().max().item<float>(), 1e-5);
  EXPECT_LT((l->forward_relu(x) - torch::relu(want)).abs().max().item<float>(), 1e-5);
}

// In int8 a decoder self-attention step takes q, k and v from one product of the three weights
// side by side: the same floats, bit for bit, as the three layers' own int8 products, over steps
// of one and of several positions, a beam reorder and a fed pad.
TEST(ComputeTypes, Int8SelfAttentionStepsTakeQkvFromOneProductBitForBit) {
  if (!kernels::int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(6);
  c10::InferenceMode guard;
  nn::MultiheadAttention fused(32, 4, 0.0), separate(32, 4, 0.0);
  fused->eval(), separate->eval();
  const auto from = fused->named_parameters();
  for (auto& item : separate->named_parameters()) item.value().copy_(from[item.key()]);
  nn::set_compute_type(*fused, ComputeType::int8);  // the module itself and its projections
  for (auto* l : {&separate->q_proj, &separate->k_proj, &separate->v_proj, &separate->out_proj}) {
    (*l)->set_compute_type(ComputeType::int8);  // the projections only: three products per step
  }
  separate->keys_and_values_in_bf16(true);  // as int8 makes the fused module's
  EXPECT_TRUE(fused->keys_and_values_in_bf16());
  nn::SelfAttentionCache a, b;
  const int64_t B = 3;
  for (int64_t n : {1, 2, 1, 1}) {
    auto x = torch::randn({B, n, 32});
    auto pad = n == 2 ? torch::tensor({false, false, false, true, false, false}, torch::kBool).view({B, n})
                      : torch::Tensor();
    auto ra = fused->step_self(x, pad, a, true), rb = separate->step_self(x, pad, b, true);
    EXPECT_TRUE(torch::equal(ra.out, rb.out)) << "step of " << n;
    EXPECT_TRUE(torch::equal(ra.weights, rb.weights)) << "step of " << n;
    if (n == 2) {
      auto order = torch::tensor({2, 2, 0}, torch::kLong);
      for (auto* c : {&a, &b}) {
        c->k.reorder(order), c->v.reorder(order);
        c->key_padding = c->key_padding.index_select(0, order);
      }
    }
  }
  EXPECT_TRUE(torch::equal(a.k.tensor(), b.k.tensor()));
  EXPECT_TRUE(torch::equal(a.v.tensor(), b.v.tensor()));
}

// float32: set_compute_type makes q_proj, k_proj and v_proj views of one weight (no copy), so that
// a self-attention at inference takes q, k and v from one product: the same outputs as three
// products, the parameters' values unchanged and still their own (an in-place update reaches the
// fused product), and where autograd records, the gradients reach the three projections.
TEST(ComputeTypes, Float32SelfAttentionTakesQkvFromOneProductOverTheProjectionsOwnWeights) {
  torch::manual_seed(8);
  nn::MultiheadAttention fused(32, 4, 0.0), separate(32, 4, 0.0);
  fused->eval(), separate->eval();
  {
    torch::NoGradGuard no_grad;
    const auto from = fused->named_parameters();
    for (auto& item : separate->named_parameters()) item.value().copy_(from[item.key()]);
  }
  nn::set_compute_type(*fused, ComputeType::float32);
  const auto C = 32 * 32;
  EXPECT_EQ(fused->k_proj->weight.data_ptr<float>(), fused->q_proj->weight.data_ptr<float>() + C);
  EXPECT_EQ(fused->v_proj->weight.data_ptr<float>(), fused->q_proj->weight.data_ptr<float>() + 2 * C);
  EXPECT_EQ(fused->v_proj->bias.data_ptr<float>(), fused->q_proj->bias.data_ptr<float>() + 2 * 32);
  for (auto& item : separate->named_parameters()) {
    EXPECT_TRUE(torch::equal(fused->named_parameters()[item.key()], item.value())) << item.key();
  }
  nn::set_compute_type(*fused, ComputeType::float32);  // again: the views stay as they are
  EXPECT_EQ(fused->k_proj->weight.data_ptr<float>(), fused->q_proj->weight.data_ptr<float>() + C);

  auto same = [](const torch::Tensor& a, const torch::Tensor& b) { return torch::allclose(a, b, 1e-5, 1e-6); };
  auto x = torch::randn({3, 5, 32});
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(same(fused->forward(x, x, torch::Tensor(), false, false).out, separate->forward(x, x, torch::Tensor(), false, false).out));
    nn::SelfAttentionCache a, b;
    for (int64_t t = 0; t < 3; ++t) {
      auto xt = x.narrow(1, t, 1);
      EXPECT_TRUE(same(fused->step_self(xt, {}, a, false).out, separate->step_self(xt, {}, b, false).out)) << t;
    }
    EXPECT_TRUE(same(a.k.tensor(), b.k.tensor()));
    EXPECT_TRUE(same(a.v.tensor(), b.v.tensor()));
  }
  {  // an update in place, as an optimizer makes it, reaches the fused product
    torch::NoGradGuard no_grad;
    for (auto* m : {&fused, &separate}) (*m)->k_proj->weight.mul_(0.5);
    EXPECT_TRUE(same(fused->forward(x, x, torch::Tensor(), false, false).out, separate->forward(x, x, torch::Tensor(), false, false).out));
  }
  fused->forward(x, x, torch::Tensor(), false, false).out.sum().backward();
  for (auto* l : {&fused->q_proj, &fused->k_proj, &fused->v_proj}) {
    ASSERT_TRUE((*l)->weight.grad().defined());
    EXPECT_GT((*l)->weight.grad().abs().sum().item<double>(), 0.0);
  }
}

// On CUDA: float16 and bfloat16 products (cuBLAS) close to float32; skipped without a GPU.
TEST(ComputeTypes, HalfTypesOnCudaStayCloseToFloat32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* arch : {"transformer_tiny", "lightconv_tiny", "fconv_tiny"}) {
    SCOPED_TRACE(arch);
    torch::manual_seed(7);
    auto model = models::build_model(*models::registry().preset_config(arch), {40, 40, true});
    model->to(torch::kCUDA);
    model->eval();
    auto src = torch::randint(4, 40, {3, 7}).to(torch::kCUDA), prev = torch::randint(4, 40, {3, 6}).to(torch::kCUDA);
    const auto f32 = run(*model, src, prev);
    for (auto type : {ComputeType::float16, ComputeType::bfloat16}) {
      nn::set_compute_type(*model, type);
      const auto low = run(*model, src, prev);
      EXPECT_LT(relative(low.full, f32.full), 0.05);
      EXPECT_LT(relative(low.steps, low.full), 0.01);
    }
  }
}
