#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "leanseq/kernels/add_layer_norm.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
// A non-contiguous residual, rows of another mean and scale than their neighbours, a width that
// is not a multiple of any vector length, and a constant row (variance 0: eps alone).
struct Inputs {
  torch::Tensor residual, y, weight, bias;
};
Inputs inputs(torch::ScalarType dtype, const torch::Device& device, int64_t C = 37) {
  torch::manual_seed(5);
  auto residual = (torch::randn({3, 4, C}, dtype) * 3 + 2).transpose(0, 1);
  auto y = torch::randn({4, 3, C}, dtype) * torch::rand({4, 3, 1}, dtype) * 10;
  residual[1][2].fill_(0.5), y[1][2].fill_(0.25);
  return {residual.to(device), y.to(device), torch::randn({C}, dtype).to(device), torch::randn({C}, dtype).to(device)};
}
}  // namespace

TEST(AddLayerNorm, FusedPassEqualsTheComposite) {
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (int64_t C : {37, 512}) {
      auto in = inputs(dtype, torch::kCPU, C);
      auto out = kernels::add_layer_norm(in.residual, in.y, in.weight, in.bias, 1e-5);
      auto ref = kernels::add_layer_norm_reference(in.residual, in.y, in.weight, in.bias, 1e-5);
      ASSERT_EQ(out.sizes(), ref.sizes());
      EXPECT_LT(test::max_abs_diff(out, ref), dtype == torch::kFloat ? 1e-5 : 1e-12) << dtype << " C=" << C;
      // The constant row normalises to 0: the bias alone.
      EXPECT_LT(test::max_abs_diff(out[1][2], in.bias), 1e-6);
    }
  }
  // Enough rows for several workers.
  auto big = inputs(torch::kFloat, torch::kCPU, 512);
  auto r = big.residual.repeat({200, 1, 1}), y = big.y.repeat({200, 1, 1});
  EXPECT_LT(test::max_abs_diff(kernels::add_layer_norm(r, y, big.weight, big.bias, 1e-5),
                               kernels::add_layer_norm_reference(r, y, big.weight, big.bias, 1e-5)),
            1e-5);
}

TEST(AddLayerNorm, GradientsMatchFiniteDifferences) {
  // Under autograd the op takes the ATen composite; its gradients with respect to every input are
  // checked against central differences of the op itself in double precision.
  auto in = inputs(torch::kDouble, torch::kCPU);
  auto r = in.residual.clone().requires_grad_(true), y = in.y.clone().requires_grad_(true);
  auto w = in.weight.clone().requires_grad_(true), b = in.bias.clone().requires_grad_(true);
  auto probe = torch::randn(in.y.sizes(), torch::kDouble);
  (kernels::add_layer_norm(r, y, w, b, 1e-5) * probe).sum().backward();
  torch::NoGradGuard no_grad;
  auto rd = in.residual.contiguous().clone(), yd = in.y.clone(), wd = in.weight.clone(), bd = in.bias.clone();
  auto loss = [&] { return (kernels::add_layer_norm(rd, yd, wd, bd, 1e-5) * probe).sum().item<double>(); };
  for (auto [value, grad] : {std::pair{rd, r.grad()}, std::pair{yd, y.grad()}, std::pair{wd, w.grad()},
                             std::pair{bd, b.grad()}}) {
    auto flat = value.view({-1});
    auto expected = grad.contiguous().view({-1});
    for (int64_t i = 0; i < flat.numel(); i += 5) {
      const double numeric = test::central_difference(flat, i, loss);
      EXPECT_NEAR(expected[i].item<double>(), numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << "element " << i;
    }
  }
}

TEST(AddLayerNorm, RejectsMismatchedShapes) {
  auto w = torch::ones({4}), b = torch::zeros({4});
  EXPECT_THROW(kernels::add_layer_norm(torch::zeros({2, 4}), torch::zeros({2, 3}), w, b, 1e-5), c10::Error);
  EXPECT_THROW(kernels::add_layer_norm(torch::zeros({2, 4}), torch::zeros({2, 4}), torch::ones({3}), b, 1e-5), c10::Error);
}

TEST(AddLayerNorm, CudaKernelEqualsTheComposite) {
  if (!kernels::add_layer_norm_cuda_available() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "built without -DLEANSEQ_CUDA=ON or no GPU";
  }
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (int64_t C : {37, 512, 1030}) {
      auto in = inputs(dtype, torch::kCUDA, C);
      auto out = kernels::add_layer_norm(in.residual, in.y, in.weight, in.bias, 1e-5).cpu();
      auto ref = kernels::add_layer_norm_reference(in.residual.cpu(), in.y.cpu(), in.weight.cpu(), in.bias.cpu(), 1e-5);
      EXPECT_LT(test::max_abs_diff(out, ref), dtype == torch::kFloat ? 1e-5 : 1e-12) << dtype << " C=" << C;
    }
  }
}
