#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "leanseq/kernels/aan_gate.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
// Logits across the whole range, saturated ends included; a non-contiguous x.
struct GateInputs {
  torch::Tensor z, x, g;
};
GateInputs gate_inputs(torch::ScalarType dtype, const torch::Device& device) {
  torch::manual_seed(3);
  auto z = torch::randn({4, 3, 2 * 37}, dtype) * 8;
  z.index_put_({0, 0, torch::indexing::Slice(0, 4)}, torch::tensor({-1e4, 1e4, -60.0, 60.0}, dtype));
  auto x = torch::randn({3, 4, 37}, dtype).transpose(0, 1);
  return {z.to(device), x.to(device), torch::randn({4, 3, 37}, dtype).to(device)};
}
}  // namespace

TEST(AanGate, FusedPassEqualsTheComposite) {
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto in = gate_inputs(dtype, torch::kCPU);
    auto y = kernels::aan_gate(in.z, in.x, in.g);
    auto ref = kernels::aan_gate_reference(in.z, in.x, in.g);
    ASSERT_EQ(y.sizes(), ref.sizes());
    EXPECT_LT(test::max_abs_diff(y, ref), dtype == torch::kFloat ? 1e-6 : 1e-12) << dtype;
    // The input gate scales x, the forget gate g: with x = 0 only sigmoid(z_forget) * g is left.
    auto only_g = kernels::aan_gate(in.z, torch::zeros_like(in.x), in.g);
    EXPECT_LT(test::max_abs_diff(only_g, torch::sigmoid(in.z.narrow(-1, 37, 37)) * in.g), 1e-6);
  }
}

TEST(AanGate, GradientsMatchFiniteDifferences) {
  // Under autograd the op takes the ATen composite; its gradients are checked against central
  // differences of the op itself in double precision, element by element (saturated logits too).
  auto in = gate_inputs(torch::kDouble, torch::kCPU);
  auto z = in.z.clone().requires_grad_(true), x = in.x.clone().requires_grad_(true);
  auto g = in.g.clone().requires_grad_(true);
  auto probe = torch::randn(in.x.sizes(), torch::kDouble);
  (kernels::aan_gate(z, x, g) * probe).sum().backward();
  torch::NoGradGuard no_grad;
  auto zd = in.z.clone(), xd = in.x.contiguous().clone(), gd = in.g.clone();
  auto loss = [&] { return (kernels::aan_gate(zd, xd, gd) * probe).sum().item<double>(); };
  for (auto [value, grad] : {std::pair{zd, z.grad()}, std::pair{xd, x.grad()}, std::pair{gd, g.grad()}}) {
    auto flat = value.view({-1});
    auto expected = grad.contiguous().view({-1});
    for (int64_t i = 0; i < flat.numel(); i += 7) {
      const double numeric = test::central_difference(flat, i, loss);
      EXPECT_NEAR(expected[i].item<double>(), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "element " << i;
    }
  }
}

TEST(AanGate, RejectsMismatchedShapes) {
  EXPECT_THROW(kernels::aan_gate(torch::zeros({2, 6}), torch::zeros({2, 4}), torch::zeros({2, 4})), c10::Error);
  EXPECT_THROW(kernels::aan_gate(torch::zeros({2, 8}), torch::zeros({2, 4}), torch::zeros({2, 3})), c10::Error);
}

TEST(AanGate, CudaKernelEqualsTheComposite) {
  if (!kernels::aan_gate_cuda_available() || !torch::cuda::is_available()) {
    GTEST_SKIP() << "built without -DLEANSEQ_CUDA=ON or no GPU";
  }
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto in = gate_inputs(dtype, torch::kCUDA);
    auto y = kernels::aan_gate(in.z, in.x, in.g).cpu();
    auto ref = kernels::aan_gate_reference(in.z.cpu(), in.x.cpu(), in.g.cpu());
    EXPECT_LT(test::max_abs_diff(y, ref), dtype == torch::kFloat ? 1e-6 : 1e-12) << dtype;
  }
}
