#include <gtest/gtest.h>
#include <torch/torch.h>
#include <ATen/record_function.h>

#include <string>
#include <thread>
#include <vector>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/log_softmax.h"

namespace leanseq::kernels {
namespace {

// The relative error of `got` against `want` in the Frobenius norm.
double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

TEST(Int8Gemm, WeightRoundTripIsWithinHalfAStepPerRow) {
  torch::manual_seed(1);
  auto w = torch::randn({64, 96});
  w[3] *= 100;  // one row of large weights: its scale is its own
  w[5].zero_();
  auto q = quantize_weight(w);
  EXPECT_EQ(q.q.scalar_type(), torch::kChar);
  EXPECT_EQ(q.q.abs().amax(1).max().item<int>(), 127);
  auto back = dequantize(q);
  auto step = q.scale.unsqueeze(1);
  EXPECT_LE(((back - w).abs() / step).max().item<float>(), 0.5f + 1e-4f);
  EXPECT_EQ(back[5].abs().sum().item<float>(), 0.f);
  // Quantizing the dequantized weight gives the same integers (a quantized checkpoint reloads exactly).
  EXPECT_TRUE(torch::equal(quantize_weight(back).q, q.q));
}

// Rows are quantized by one loop whichever vector unit runs it (AVX-512's own above 16 lanes): scale
// max|r| / 127, values r * (1 / scale) rounded to the nearest integer, ties to even, at every row
// length (whole registers, a tail, neither), as ATen rounds the same products.
TEST(Int8Gemm, RowsRoundToTheNearestEvenIntegerAtEveryLength) {
  torch::manual_seed(4);
  for (int64_t K : {1, 7, 16, 33, 64, 100, 255, 256, 1024, 1029}) {
    auto w = torch::randn({9, K}) * 3;
    // A row whose scale is 1: ties at every half, both signs, where truncation or rounding away
    // from zero would differ.
    w[0] = (torch::arange(K, torch::kFloat) % 16 - 8) * 0.5;
    w[0][0] = 127;
    w[1].zero_();
    auto q = quantize_weight(w);
    const auto scale = std::get<0>(w.abs().max(1)) / 127;
    // (The kernels divide by 127 as a product with its reciprocal: an ulp apart at most.)
    EXPECT_TRUE(torch::allclose(q.scale, torch::where(scale > 0, scale, torch::ones_like(scale)), 2e-7, 0)) << K;
    auto want = (w * (1 / q.scale).unsqueeze(1)).round().to(torch::kChar);
    EXPECT_TRUE(torch::equal(q.q, want)) << K << ": " << (q.q.to(torch::kInt) - want.to(torch::kInt)).abs().max().item<int>();
  }
}

TEST(Int8Gemm, MatchesTheExactIntegerReference) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(2);
  // Row counts on both sides of where the split form stops multiplying its halves in one GEMM.
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8}, {7, 33, 65}, {32, 40, 24}, {33, 40, 24},
                         {320, 512, 2048}, {5, 1100, 3}}) {
    auto x = torch::randn({M, K});
    auto w = quantize_weight(torch::randn({N, K}) * 0.1);
    auto bias = torch::randn({N});
    // The one-product forms are exact where the CPU multiplies bytes with VNNI (elsewhere they
    // saturate, and the split form is the default); the split form is exact everywhere.
    std::vector<Int8Activations> forms{Int8Activations::u8_split};
    if (default_int8_activations() == Int8Activations::u8_shifted) {
      forms.push_back(Int8Activations::u8_shifted);
      forms.push_back(Int8Activations::s8);
    }
    for (auto act : forms) {
      for (const auto& b : {bias, torch::Tensor()}) {
        auto got = int8_linear(x, w, b, act);
        auto want = int8_linear_reference(x, w, b);
        ASSERT_EQ(got.sizes(), want.sizes());
        // The integers are the same; float rounding of the scales differs by a few ulps at most.
        EXPECT_LT(relative_error(got, want), 1e-5) << M << "x" << K << "x" << N << (b.defined() ? "" : ", no bias");
      }
    }
  }
}

// Batching never changes a translation: a row's int8 product is the same floats, bit for bit,
// alone, among a few rows and among many (either side of where the split form stacks its halves),
// in every form exact on this CPU.
TEST(Int8Gemm, ARowsProductDoesNotDependOnTheOtherRows) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(4);
  const int64_t K = 256, N = 1024;
  auto w = quantize_weight(torch::randn({N, K}) * 0.1);
  auto bias = torch::randn({N});
  auto x = torch::randn({640, K}) * 3;
  std::vector<Int8Activations> forms{Int8Activations::u8_split};
  if (default_int8_activations() == Int8Activations::u8_shifted) forms.push_back(Int8Activations::u8_shifted);
  for (auto act : forms) {
    for (int64_t M : {640, 320, 64, 33, 32, 5}) {
      auto many = int8_linear(x.narrow(0, 0, M), w, bias, act);
      for (int64_t r : {int64_t{0}, M / 2, M - 1}) {
        auto alone = int8_linear(x.narrow(0, r, 1), w, bias, act);
        EXPECT_TRUE(torch::equal(alone[0], many[r])) << "row " << r << " of " << M << ", form " << static_cast<int>(act)
                                                     << ": max difference " << (alone[0] - many[r]).abs().max().item<float>();
      }
    }
  }
}

// A product's floats do not depend on the thread count (oneDNN's threads share the integer sums,
// the rows are scaled back in chunks per thread): bit for bit at 1, 2 and 3 threads, in every form
// exact on this CPU, at a decoding step's row counts and odd column counts, with and without the ReLU.
TEST(Int8Gemm, ThreadsSharingAProductGiveOneThreadsFloats) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(8);
  std::vector<Int8Activations> forms{Int8Activations::u8_split};
  if (default_int8_activations() == Int8Activations::u8_shifted) {
    forms.push_back(Int8Activations::u8_shifted);
    forms.push_back(Int8Activations::s8);
  }
  const int before = torch::get_num_threads();
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{320, 256, 1000}, {20, 512, 4099}, {5, 256, 10000}}) {
    auto x = torch::randn({M, K}) * 2;
    auto w = quantize_weight(torch::randn({N, K}) * 0.1);
    auto bias = torch::randn({N});
    set_compute_threads(1);
    const auto one_relu = int8_linear_relu(x, w, bias);  // the CPU's own form
    for (int threads : {2, 3}) {
      set_compute_threads(threads);
      EXPECT_TRUE(torch::equal(one_relu, int8_linear_relu(x, w, bias))) << M << "x" << K << "x" << N << ", ReLU";
    }
    for (auto act : forms) {
      set_compute_threads(1);
      auto one = int8_linear(x, w, bias, act);
      for (int threads : {2, 3}) {
        set_compute_threads(threads);
        auto many = int8_linear(x, w, bias, act);
        EXPECT_TRUE(torch::equal(one, many)) << M << "x" << K << "x" << N << ", form " << static_cast<int>(act) << ", "
                                             << threads << " threads: max difference "
                                             << (one - many).abs().max().item<float>();
      }
    }
  }
  set_compute_threads(before);
}

// A product of a few rows (a decoding step of one or two sentences) runs on one thread, one of a
// batch's rows on the whole team; one thread is one thread at every size.
TEST(Int8Gemm, FewRowsMultiplyOnOneThread) {
  const int before = torch::get_num_threads();
  set_compute_threads(2);
  for (int64_t rows : {1, 5, 10, 15}) EXPECT_EQ(int8_product_threads(rows), 1) << rows << " rows";
  for (int64_t rows : {16, 40, 320}) EXPECT_EQ(int8_product_threads(rows), 2) << rows << " rows";
  set_compute_threads(1);
  for (int64_t rows : {5, 320}) EXPECT_EQ(int8_product_threads(rows), 1) << rows << " rows";
  set_compute_threads(before);
}

// Where bytes multiply exactly (VNNI or AMX), the matmul on the packed weight gives the GEMM API's
// integers, hence the same floats, at every row count (those padded to 16 rows included), with and
// without a bias, and again from its caches and through a copy of the weight.
TEST(Int8Gemm, TheMatmulOnPackedWeightsGivesTheGemmsProducts) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  if (default_int8_activations() != Int8Activations::u8_shifted) {
    GTEST_SKIP() << "no VNNI or AMX as oneDNN runs on this CPU: the split form, on the GEMM API";
  }
  torch::manual_seed(4);
  const auto w = quantize_weight(torch::randn({200, 96}) * 0.1);
  const Int8Weight copy = w;
  const auto bias = torch::randn({200});
  for (int64_t M : {1, 5, 17, 64, 65, 100, 320, 65}) {
    auto x = torch::randn({M, 96});
    for (const auto& b : {bias, torch::Tensor()}) {
      use_packed_int8(false);
      auto gemm = int8_linear(x, w, b, Int8Activations::u8_shifted);
      use_packed_int8(true);
      ASSERT_TRUE(packed_int8_in_use());
      auto packed = int8_linear(x, M == 65 ? copy : w, b, Int8Activations::u8_shifted);
      ASSERT_EQ(packed.sizes(), gemm.sizes());
      EXPECT_TRUE(torch::equal(packed, gemm)) << M << " rows, largest difference "
                                              << (packed - gemm).abs().max().item<float>();
    }
  }
  const auto summary = int8_products_summary();
  EXPECT_NE(summary.find("packed weights"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("AMX") != std::string::npos, int8_amx_available()) << summary;
}

// Two decoders over one copy of a model (translate --workers, serve's workers) multiply by the same
// weights at once: each thread's products are the ones it makes alone, in every exact form, at a
// decoding step's row counts and at many.
TEST(Int8Gemm, ThreadsMultiplyingByOneWeightAtOnceGetTheirOwnProducts) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  std::vector<Int8Activations> forms{Int8Activations::u8_split};
  if (default_int8_activations() == Int8Activations::u8_shifted) forms.push_back(Int8Activations::u8_shifted);
  torch::manual_seed(12);
  const auto w = quantize_weight(torch::randn({1000, 256}) * 0.1);
  const auto bias = torch::randn({1000});
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  for (auto act : forms) {
    std::vector<torch::Tensor> inputs, alone;
    for (int64_t M : {5, 320, 17, 5, 64, 640}) {
      inputs.push_back(torch::randn({M, 256}));
      alone.push_back(int8_linear(inputs.back(), w, bias, act));
    }
    std::vector<int> mismatches(2, 0);
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t) {
      workers.emplace_back([&, t] {
        for (int round = 0; round < 30; ++round) {
          for (size_t i = 0; i < inputs.size(); ++i) {
            const size_t k = t == 0 ? i : inputs.size() - 1 - i;  // the threads in another order
            if (!torch::equal(int8_linear(inputs[k], w, bias, act), alone[k])) ++mismatches[t];
          }
        }
      });
    }
    for (auto& worker : workers) worker.join();
    EXPECT_EQ(mismatches[0] + mismatches[1], 0) << "form " << static_cast<int>(act);
  }
  set_compute_threads(before);
}

// A decoding step makes some twenty products: after the first, each allocates its result and
// nothing else (the row scales, accumulators and quantized rows are the thread's scratch), and a
// smaller product after a larger one, on the same scratch, still gives the exact integers. So in
// the split form (which any CPU runs exactly) and, with VNNI, in the one-product form.
TEST(Int8Gemm, AfterTheFirstAProductAllocatesOnlyItsResult) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  std::vector<Int8Activations> forms{Int8Activations::u8_split};
  if (default_int8_activations() == Int8Activations::u8_shifted) forms.push_back(Int8Activations::u8_shifted);
  torch::manual_seed(9);
  auto w = quantize_weight(torch::randn({700, 96}) * 0.1);
  auto bias = torch::randn({700});
  // wide: accumulators of over 1 MiB, scaled back where the result is (int8_gemm.cpp).
  auto big = torch::randn({80, 96}), small = torch::randn({3, 96}), wide = torch::randn({2, 201, 96});
  // Tensors allocated on this thread while `allocations` counts (a captureless callback).
  static thread_local int64_t allocations = 0;
  auto product = [&](const torch::Tensor& x, Int8Activations form) {
    auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          const std::string name = fn.name();
          if (name == "aten::empty" || name == "aten::empty_strided") ++allocations;
          return nullptr;
        }));
    allocations = 0;
    auto y = int8_linear(x, w, bias, form);
    at::removeCallback(handle);
    return y;
  };
  for (const auto form : forms) {
    product(big, form);
    for (const auto& x : {small, big, wide, small}) {
      auto got = product(x, form);
      const auto what = std::to_string(x.numel() / 96) + " rows, form " + std::to_string(static_cast<int>(form));
      auto sizes = x.sizes().vec();
      sizes.back() = 700;
      ASSERT_EQ(got.sizes().vec(), sizes) << what;
      EXPECT_EQ(allocations, 1) << what;
      EXPECT_LT(relative_error(got, int8_linear_reference(x, w, bias)), 1e-5) << what;
    }
  }
}

// A feed-forward layer's first product with its relu applied while scaling back: bit-equal to the
// relu of the product, with and without a bias, over rows that go to both threads.
TEST(Int8Gemm, TheReluFormIsTheReluOfTheProduct) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(6);
  auto w = quantize_weight(torch::randn({1024, 256}));
  auto x = torch::randn({2, 160, 256});
  for (const auto& bias : {torch::randn({1024}), torch::Tensor()}) {
    auto got = int8_linear_relu(x, w, bias);
    EXPECT_TRUE(torch::equal(got, torch::relu(int8_linear(x, w, bias))));
    EXPECT_GT((got == 0).sum().item<int64_t>(), 0);
  }
}

// An output layer's product with its log-probabilities taken row by row as it is scaled back:
// bit-equal to kernels::log_softmax of the product, at a step's few rows and at a batch's many
// (accumulators scaled back over themselves), with and without a bias, at 1 and 2 threads.
TEST(Int8Gemm, TheLogSoftmaxFormIsTheLogSoftmaxOfTheProduct) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(12);
  const int before = torch::get_num_threads();
  auto w = quantize_weight(torch::randn({8003, 128}) * 0.2);
  for (int64_t M : {int64_t{5}, int64_t{320}}) {
    auto x = torch::randn({M, 1, 128});
    for (const auto& bias : {torch::randn({8003}), torch::Tensor()}) {
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        auto got = int8_linear_log_softmax(x, w, bias);
        ASSERT_EQ(got.sizes(), (std::vector<int64_t>{M, 1, 8003}));
        EXPECT_TRUE(torch::equal(got, log_softmax(int8_linear(x, w, bias)))) << M << " rows, " << threads << " threads";
      }
    }
  }
  set_compute_threads(before);
}

// The form is chosen by the CPU: one product with VNNI (either kind), the split form without.
TEST(Int8Gemm, CpusWithoutVnniUseTheSplitForm) {
  leanseq::CpuVectorSupport cpu;
  cpu.avx2 = true;
  EXPECT_EQ(default_int8_activations(cpu), Int8Activations::u8_split);
  cpu.avxvnni = true;
  EXPECT_EQ(default_int8_activations(cpu), Int8Activations::u8_shifted);
  cpu.avxvnni = false, cpu.avx512vnni = true;
  EXPECT_EQ(default_int8_activations(cpu), Int8Activations::u8_shifted);
}

TEST(Int8Gemm, IsCloseToTheFloatProductOnRandomAndOutlierInputs) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  torch::manual_seed(3);
  auto x = torch::randn({2, 10, 256});
  auto wf = torch::randn({512, 256}) * 0.05;
  auto bias = torch::randn({512});
  auto w = quantize_weight(wf);
  auto exact = torch::linear(x, wf, bias);
  auto got = int8_linear(x, w, bias);
  EXPECT_EQ(got.sizes(), exact.sizes());
  EXPECT_LT(relative_error(got, exact), 0.02);
  // Outliers: a row with one huge activation loses precision in that row only (per-row scales).
  auto xo = x.clone();
  xo[0][0][0] = 1000.f;
  auto got_o = int8_linear(xo, w, bias);
  auto exact_o = torch::linear(xo, wf, bias);
  EXPECT_LT(relative_error(got_o[1], exact_o[1]), 0.02);
  EXPECT_LT(relative_error(got_o[0].narrow(0, 1, 9), exact_o[0].narrow(0, 1, 9)), 0.02);
  EXPECT_LT(relative_error(got_o[0][0], exact_o[0][0]), 0.05);
  // A weight row of outliers keeps its neighbours precise.
  auto wo = wf.clone();
  wo[7] *= 1000;
  auto got_w = int8_linear(x, quantize_weight(wo), bias);
  auto exact_w = torch::linear(x, wo, bias);
  EXPECT_LT(relative_error(got_w.narrow(-1, 8, 504), exact_w.narrow(-1, 8, 504)), 0.02);
  // Zero rows and an empty batch.
  EXPECT_TRUE(torch::allclose(int8_linear(torch::zeros({3, 256}), w, bias), bias.expand({3, 512})));
  EXPECT_EQ(int8_linear(torch::zeros({0, 256}), w, bias).size(0), 0);
}

TEST(ComputeType, ParsesCTranslate2NamesAndRejectsOthers) {
  EXPECT_EQ(parse_compute_type("int8"), ComputeTypeRequest::int8);
  EXPECT_EQ(parse_compute_type("bf16"), ComputeTypeRequest::bfloat16);
  EXPECT_EQ(parse_compute_type("int8_bfloat16"), ComputeTypeRequest::int8_bfloat16);
  EXPECT_EQ(parse_compute_type("auto"), ComputeTypeRequest::auto_);
  EXPECT_THROW(parse_compute_type("int4"), std::invalid_argument);
}

TEST(ComputeType, FallsBackWhenTheCpuLacksTheInstructions) {
  CpuVectorSupport full;
  full.avx = full.avx2 = full.fma = full.avx512f = full.avx512bw = full.avx512vl = full.avx512dq = true;
  full.avx512vnni = full.avx512bf16 = true;
  // auto: int8 on AMX tiles or with VNNI, else bfloat16 where the CPU multiplies it natively, else
  // float32 (the order measured in docs/fast.md).
  auto amx = full;
  amx.amx_int8 = true;
  auto r = resolve_compute_type(ComputeTypeRequest::auto_, false, amx, true);
  EXPECT_EQ(r.type, ComputeType::int8);
  EXPECT_EQ(r.notice, "");
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, amx, false).type, ComputeType::bfloat16);
  r = resolve_compute_type(ComputeTypeRequest::auto_, false, full, true);
  EXPECT_EQ(r.type, ComputeType::int8);  // VNNI and AVX512_BF16 without AMX: int8 (1.6x bfloat16)
  EXPECT_EQ(r.notice, "");
  auto bf16_only = full;
  bf16_only.avx512vnni = false;
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, bf16_only, true).type, ComputeType::bfloat16);
  auto no_bf16 = full;
  no_bf16.avx512bf16 = false;
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, no_bf16, true).type, ComputeType::int8);
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::bfloat16, false, full, true).type, ComputeType::bfloat16);

  auto no_vnni = no_bf16;
  no_vnni.avx512vnni = false;  // auto only picks int8 where bytes multiply natively
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, no_vnni, true).type, ComputeType::float32);
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::int8, false, no_vnni, true).type, ComputeType::int8);

  CpuVectorSupport sse;  // nothing: int8 and bfloat16 fall back with a notice
  for (auto req : {ComputeTypeRequest::int8, ComputeTypeRequest::int8_bfloat16, ComputeTypeRequest::bfloat16,
                   ComputeTypeRequest::float16}) {
    auto f = resolve_compute_type(req, false, sse, true);
    EXPECT_EQ(f.type, ComputeType::float32);
    EXPECT_NE(f.notice, "");
  }
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, sse, true).type, ComputeType::float32);
  // A build without oneDNN: no int8, even on a CPU that has VNNI.
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::int8, false, full, false).type, ComputeType::float32);
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::auto_, false, no_bf16, false).type, ComputeType::float32);
  // On CUDA: half types run, int8 does not.
  EXPECT_EQ(resolve_compute_type(ComputeTypeRequest::float16, true, sse, true).type, ComputeType::float16);
  auto cuda_int8 = resolve_compute_type(ComputeTypeRequest::int8, true, full, true);
  EXPECT_EQ(cuda_int8.type, ComputeType::float32);
  EXPECT_NE(cuda_int8.notice, "");
}

}  // namespace
}  // namespace leanseq::kernels
