// Every implementation of the lightweight and dynamic convolutions (unfold and band references, the
// dedicated CPU kernel) reproduces fairseq's LightweightConv1dTBC and DynamicConv1dTBC (band-matrix
// semantics), forward and backward; they agree with each other on a grid of shapes; the kernel's
// gradients match finite differences in double precision.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "leanseq/kernels/lightconv.h"
#include "leanseq/kernels/lightconv_ref.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
std::vector<std::string> fixture_names(const std::string& prefix) {
  std::vector<std::string> out;
  std::string dir = test::shared_path("fixtures/fairseq");
  if (dir.empty()) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string n = e.path().stem().string();
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

using kernels::LightconvImpl;
const LightconvImpl kImpls[] = {LightconvImpl::kUnfold, LightconvImpl::kBand, LightconvImpl::kKernel};

// Runs one fixture through implementation `impl` and compares outputs and gradients.
void check_fixture(const std::string& name, LightconvImpl impl) {
  test::Fixture fx;
  ASSERT_TRUE(test::load_fixture(name, fx));
  auto j = nlohmann::json::parse(fx.json_text);
  const auto& c = j["config"];
  const bool dynamic = c["module"] == "DynamicConv1dTBC";
  // The unfold files of dynamic conv follow fairseq's unfold path, which differs from the band
  // semantics exactly where the file says so; those are compared with the band file instead.
  if (dynamic && c.value("paths_differ_here", false) && c["path"] == "unfold") return;
  const int64_t H = c["num_heads"], P = c["padding_l"];
  auto x = fx.inputs["x"].transpose(0, 1).contiguous().requires_grad_(true);  // [B, T, C]
  std::map<std::string, torch::Tensor> params;
  for (auto& [k, v] : fx.params) params[k] = v.clone().requires_grad_(true);
  torch::Tensor query, w, bias;
  if (dynamic) {
    query = fx.inputs.count("query") ? fx.inputs["query"].transpose(0, 1).contiguous().requires_grad_(true) : x;
    auto lin_b = params.count("weight_linear.bias") ? params["weight_linear.bias"] : torch::Tensor();
    auto logits = torch::nn::functional::linear(query, params["weight_linear.weight"], lin_b);
    w = kernels::dynamic_weights(logits, H);
    if (params.count("conv_bias")) bias = params["conv_bias"];
  } else {
    w = torch::softmax(params["weight"].squeeze(1), -1);  // [H, K], shared over batch and time
    if (params.count("bias")) bias = params["bias"];
  }
  auto y = kernels::lightconv(x, w, P, impl);
  const std::string where = name + " (" + kernels::lightconv_impl_name(impl) + ")";
  if (bias.defined()) y = y + bias.view({1, 1, -1});
  EXPECT_LT(test::max_abs_diff(y.transpose(0, 1), fx.outputs["y"]), 1e-5) << where;
  (y * fx.inputs["g"].transpose(0, 1)).sum().backward();
  EXPECT_LT(test::max_abs_diff(x.grad().transpose(0, 1), fx.outputs["grad_x"]), 1e-5) << where;
  if (fx.outputs.count("grad_query")) {
    EXPECT_LT(test::max_abs_diff(query.grad().transpose(0, 1), fx.outputs["grad_query"]), 1e-5) << where;
  }
  for (auto& [k, v] : params) {
    auto it = fx.outputs.find("grad:" + k);
    if (it == fx.outputs.end()) continue;
    ASSERT_TRUE(v.grad().defined()) << where << " " << k;
    EXPECT_LT(test::max_abs_diff(v.grad().view(it->second.sizes()), it->second), 1e-5) << where << " grad " << k;
  }
}
}  // namespace

TEST(Lightconv, LightweightReproducesFairseq) {
  auto names = fixture_names("lightweight_conv_");
  if (names.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq");
  EXPECT_EQ(names.size(), 56u);
  for (const auto& n : names) {
    for (auto impl : kImpls) check_fixture(n, impl);
  }
}

TEST(Lightconv, DynamicReproducesFairseqBandSemantics) {
  auto names = fixture_names("dynamic_conv_");
  if (names.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq");
  EXPECT_EQ(names.size(), 60u);
  for (const auto& n : names) {
    for (auto impl : kImpls) check_fixture(n, impl);
  }
}

namespace {
struct ConvResult {
  torch::Tensor y, grad_x, grad_w;
};
ConvResult run(LightconvImpl impl, const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& g, int64_t P) {
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  auto y = kernels::lightconv(x, w, P, impl);
  (y * g).sum().backward();
  return {y.detach(), x.grad(), w.grad()};
}
}  // namespace

TEST(Lightconv, ImplementationsAgreeForwardAndBackward) {
  // K in {3, 7, 15, 31} x T in {1, 5, 30, 600} x both paddings x lightweight/dynamic weights,
  // including kernels longer than the sequence (softmax over all K taps, then trimmed).
  torch::manual_seed(5);
  const int64_t B = 2, C = 16, H = 4;
  for (int64_t K : {3, 7, 15, 31}) {
    for (int64_t T : {1, 5, 30, 600}) {
      for (int64_t P : {(K - 1) / 2, K - 1}) {
        for (bool dynamic : {false, true}) {
          auto x = torch::randn({B, T, C});
          auto w = dynamic ? kernels::dynamic_weights(torch::randn({B, T, H * K}), H).contiguous()
                           : torch::softmax(torch::randn({H, K}), -1);
          auto g = torch::randn({B, T, C});
          auto ref = run(LightconvImpl::kUnfold, x, w, g, P);
          for (auto impl : {LightconvImpl::kBand, LightconvImpl::kKernel}) {
            auto r = run(impl, x, w, g, P);
            const std::string where = std::string(kernels::lightconv_impl_name(impl)) + " K=" + std::to_string(K) +
                                      " T=" + std::to_string(T) + " P=" + std::to_string(P) +
                                      (dynamic ? " dynamic" : " lightweight");
            EXPECT_LT(test::max_abs_diff(r.y, ref.y), 1e-5) << where;
            EXPECT_LT(test::max_abs_diff(r.grad_x, ref.grad_x), 1e-5) << where;
            // The lightweight weight gradient sums B * T terms: compare relative to its size.
            const double scale = std::max(1.0, ref.grad_w.abs().max().item<double>());
            EXPECT_LT(test::max_abs_diff(r.grad_w, ref.grad_w) / scale, 1e-5) << where;
          }
        }
      }
    }
  }
}

TEST(Lightconv, CpuKernelGradientsMatchFiniteDifferences) {
  // A gradcheck in double precision: d(sum(y * g))/d(input) by central differences.
  torch::manual_seed(11);
  const int64_t B = 2, T = 6, C = 6, H = 3, K = 5;
  for (int64_t P : {2, 4}) {
    for (bool dynamic : {false, true}) {
      auto opts = torch::TensorOptions().dtype(torch::kDouble);
      auto x = torch::randn({B, T, C}, opts);
      auto w = dynamic ? torch::randn({B, H, T, K}, opts) : torch::randn({H, K}, opts);
      auto g = torch::randn({B, T, C}, opts);
      auto analytic = run(LightconvImpl::kKernel, x, w, g, P);
      auto loss = [&](const torch::Tensor& xx, const torch::Tensor& ww) {
        return (kernels::lightconv_cpu(xx, ww, P) * g).sum().item<double>();
      };
      for (auto* which : {&x, &w}) {
        auto flat = which->view(-1);
        auto expect = (which == &x ? analytic.grad_x : analytic.grad_w).reshape(-1);
        for (int64_t i = 0; i < flat.numel(); ++i) {
          EXPECT_NEAR(test::central_difference(flat, i, [&] { return loss(x, w); }), expect[i].item<double>(), 1e-7)
              << (which == &x ? "x" : "w") << "[" << i << "] P=" << P << (dynamic ? " dynamic" : " lightweight");
        }
      }
    }
  }
}

TEST(Lightconv, CudaKernelAgreesWithTheReference) {
  if (!kernels::lightconv_cuda_available() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "built without -DLEANSEQ_CUDA=ON or no GPU";
  }
  torch::manual_seed(6);
  const int64_t B = 2, C = 16, H = 4;
  for (int64_t K : {3, 7, 15, 31}) {
    for (int64_t T : {1, 5, 30, 600}) {
      for (int64_t P : {(K - 1) / 2, K - 1}) {
        for (bool dynamic : {false, true}) {
          for (auto dtype : {torch::kFloat, torch::kDouble}) {
            auto x = torch::randn({B, T, C}, dtype);
            auto w = dynamic ? kernels::dynamic_weights(torch::randn({B, T, H * K}, dtype), H).contiguous()
                             : torch::softmax(torch::randn({H, K}, dtype), -1);
            auto g = torch::randn({B, T, C}, dtype);
            auto ref = run(LightconvImpl::kUnfold, x, w, g, P);
            auto cx = x.cuda().requires_grad_(true), cw = w.cuda().requires_grad_(true);
            auto y = kernels::lightconv(cx, cw, P, LightconvImpl::kKernel);
            (y * g.cuda()).sum().backward();
            const std::string where = "K=" + std::to_string(K) + " T=" + std::to_string(T) + " P=" + std::to_string(P) +
                                      (dynamic ? " dynamic" : " lightweight");
            const double scale = std::max(1.0, ref.grad_w.abs().max().item<double>());
            EXPECT_LT(test::max_abs_diff(y.detach().cpu(), ref.y), 1e-5) << where;
            EXPECT_LT(test::max_abs_diff(cx.grad().cpu(), ref.grad_x), 1e-5) << where;
            EXPECT_LT(test::max_abs_diff(cw.grad().cpu(), ref.grad_w) / scale, 1e-5) << where;
          }
        }
      }
    }
  }
}

TEST(Lightconv, AutoPicksTheDedicatedKernelOnCpu) {
  auto x = torch::randn({1, 4, 4}).requires_grad_(true);
  auto w = torch::softmax(torch::randn({2, 3}), -1);
  auto y = kernels::lightconv(x, w, 1);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_NE(y.grad_fn()->name().find("LightconvCpu"), std::string::npos) << y.grad_fn()->name();
  EXPECT_FALSE(kernels::lightconv_cuda_available() && !torch::cuda::is_available());
}

// Training under `--bf16`: bfloat16 operands take the float32 kernel widened, and the result and
// both gradients are the float32 kernel's, rounded once to bfloat16, bit for bit (no band of
// bfloat16 products, one per sentence and head).
TEST(Lightconv, AutoTrainsBfloat16OperandsThroughTheFloat32Kernel) {
  torch::manual_seed(8);
  const int64_t B = 3, T = 9, C = 8, H = 2, K = 5;
  auto x0 = torch::randn({B, T, C}).to(torch::kBFloat16);
  auto w0 = torch::softmax(torch::randn({B, H, T, K}), -1).to(torch::kBFloat16);
  auto g = torch::randn({B, T, C}).to(torch::kBFloat16);
  auto x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
  torch::Tensor y;
  EXPECT_EQ(test::calls_of("aten::bmm", [&] {
              y = kernels::lightconv(x, w, K - 1);
              y.backward(g);
            }),
            0);
  auto xf = x0.to(torch::kFloat).requires_grad_(), wf = w0.to(torch::kFloat).requires_grad_();
  auto yf = kernels::lightconv_cpu(xf, wf, K - 1);
  yf.backward(g.to(torch::kFloat));
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, yf.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(x.grad(), xf.grad().to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(w.grad(), wf.grad().to(torch::kBFloat16)));
  // Outside training the band of bfloat16 products, as before.
  torch::NoGradGuard no_grad;
  EXPECT_GT(test::calls_of("aten::bmm", [&] { (void)kernels::lightconv(x0, w0, K - 1); }), 0);
}

TEST(Lightconv, HeadToChannelMappingIsContiguousBlocks) {
  // With H = 2 heads over C = 4 channels, channels 0-1 use head 0 and channels 2-3 head 1.
  auto x = torch::ones({1, 3, 4});
  auto weight = torch::tensor({{0.0f, 100.0f, 0.0f}, {100.0f, 0.0f, 0.0f}});  // head 0: centre tap, head 1: left tap
  for (auto impl : kImpls) {
    auto y = kernels::lightconv(x, torch::softmax(weight, -1), 1, impl);
    // At t = 0 the left tap reads padding: head 1's channels give ~0, head 0's give ~1.
    EXPECT_NEAR(y[0][0][0].item<float>(), 1.0f, 1e-4);
    EXPECT_NEAR(y[0][0][1].item<float>(), 1.0f, 1e-4);
    EXPECT_NEAR(y[0][0][2].item<float>(), 0.0f, 1e-4);
    EXPECT_NEAR(y[0][0][3].item<float>(), 0.0f, 1e-4);
  }
}

TEST(Lightconv, CausalStepsReproduceFairseqIncrementalDecoding) {
  auto names = fixture_names("incremental_");
  if (names.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq");
  EXPECT_EQ(names.size(), 12u);
  for (const auto& name : names) {
    test::Fixture fx;
    ASSERT_TRUE(test::load_fixture(name, fx));
    auto j = nlohmann::json::parse(fx.json_text);
    const int64_t H = j["config"]["num_heads"], K = j["config"]["kernel_size"];
    auto x = fx.inputs["x"].transpose(0, 1).contiguous();  // [B, T, C]
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto weights_for = [&](const torch::Tensor& xs) {
      if (fx.params.count("weight")) return kernels::lightweight_weights(fx.params["weight"], B, xs.size(1));
      auto b = fx.params.count("weight_linear.bias") ? fx.params["weight_linear.bias"] : torch::Tensor();
      return kernels::dynamic_weights(torch::nn::functional::linear(xs, fx.params["weight_linear.weight"], b), H);
    };
    auto expect = fx.outputs["y_steps"].transpose(0, 1);
    for (int64_t chunk : {1, 2, 3}) {
      auto window = torch::zeros({B, K - 1, C});
      std::vector<torch::Tensor> ys;
      for (int64_t t = 0; t < T; t += chunk) {
        auto xs = x.narrow(1, t, std::min(chunk, T - t));
        auto [y, next] = kernels::lightconv_causal_step(window, xs, weights_for(xs));
        ys.push_back(y);
        window = next;
      }
      EXPECT_LT(test::max_abs_diff(torch::cat(ys, 1), expect), 1e-5) << name << " chunk " << chunk;
    }
    // The full-sequence band path gives the same outputs.
    EXPECT_LT(test::max_abs_diff(kernels::lightconv_band(x, weights_for(x), K - 1), expect), 1e-5) << name;
  }
}
