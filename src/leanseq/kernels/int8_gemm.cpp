#include "leanseq/kernels/int8_gemm.h"

#ifdef LEANSEQ_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <cmath>
#include <stdexcept>
#include <string>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// The symmetric int8 scale of a row of K floats: max |r| / 127 (1 for an all-zero row).
float row_scale(const float* r, int64_t K) {
  float amax = 0.f;
#pragma omp simd reduction(max : amax)
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(r[k]));
  return amax > 0.f ? amax / 127.f : 1.f;
}

// Per-row symmetric quantization of a [M, K] float matrix: writes the int8 values (shifted by
// `shift`, 0 or 128, into the same bytes) and returns nothing; scale[m] = max|x[m]| / 127.
template <class Out>
void quantize_rows(const float* x, int64_t M, int64_t K, Out* q, float* scale, int shift) {
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float* r = x + m * K;
      const float s = row_scale(r, K), inv = 1.f / s;
      Out* o = q + m * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) o[k] = static_cast<Out>(static_cast<int>(std::nearbyint(r[k] * inv)) + shift);
      scale[m] = s;
    }
  };
  parallel_chunks(M, workers_for(M * K, 1 << 16), rows);
}

// The u8_split form of a [M, K] float matrix: per row q = round(x / s) in [-127, 127] (s =
// max|x| / 127), written as hi = (q >> 1) + 64 in [0, 127] and lo = q & 1.
void quantize_rows_split(const float* x, int64_t M, int64_t K, uint8_t* hi, uint8_t* lo, float* scale) {
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float* r = x + m * K;
      const float s = row_scale(r, K), inv = 1.f / s;
      uint8_t* h = hi + m * K;
      uint8_t* l = lo + m * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) {
        const int q = static_cast<int>(std::nearbyint(r[k] * inv));
        h[k] = static_cast<uint8_t>((q >> 1) + 64);  // arithmetic shift: floor(q / 2)
        l[k] = static_cast<uint8_t>(q & 1);
      }
      scale[m] = s;
    }
  };
  parallel_chunks(M, workers_for(M * K, 1 << 16), rows);
}

#ifdef LEANSEQ_WITH_DNNL
void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) throw std::runtime_error(std::string("oneDNN ") + what + " failed (status " + std::to_string(status) + ")");
}
#endif

torch::Tensor check_weight(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2, "int8 weights are 2-D [out, in], got ", weight.sizes());
  return weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
}

}  // namespace

Int8Activations default_int8_activations(const CpuVectorSupport& cpu) {
  return cpu.avx512vnni || cpu.avxvnni ? Int8Activations::u8_shifted : Int8Activations::u8_split;
}

Int8Activations default_int8_activations() {
  static const Int8Activations form = default_int8_activations(detect_cpu_vector_support());
  return form;
}

bool int8_gemm_available() {
#ifdef LEANSEQ_WITH_DNNL
  return true;
#else
  return false;
#endif
}

Int8Weight quantize_weight(const torch::Tensor& weight) {
  auto w = check_weight(weight);
  const int64_t N = w.size(0), K = w.size(1);
  auto q = torch::empty({N, K}, torch::kChar);
  auto scale = torch::empty({N}, torch::kFloat);
  quantize_rows(w.data_ptr<float>(), N, K, q.data_ptr<int8_t>(), scale.data_ptr<float>(), 0);
  return int8_weight_from(q, scale);
}

Int8Weight int8_weight_from(torch::Tensor q, torch::Tensor scale) {
  TORCH_CHECK(q.dim() == 2 && q.scalar_type() == torch::kChar, "int8 weights are 2-D int8, got ", q.sizes(), " ",
              q.scalar_type());
  TORCH_CHECK(scale.dim() == 1 && scale.size(0) == q.size(0), "one scale per output row: ", scale.sizes(), " for ",
              q.sizes());
  Int8Weight w;
  w.q = q.to(torch::kCPU).contiguous();
  w.scale = scale.to(torch::kCPU, torch::kFloat).contiguous();
  w.compensation = (w.q.sum(1, false, torch::kInt) * -128).to(torch::kInt).contiguous();
  return w;
}

torch::Tensor dequantize(const Int8Weight& w) { return w.q.to(torch::kFloat) * w.scale.unsqueeze(1); }

torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias, Int8Activations act) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "int8_linear takes float32 CPU input");
  const int64_t K = w.in_features(), N = w.out_features();
  TORCH_CHECK(x.size(-1) == K, "int8_linear: input has ", x.size(-1), " features, the weight ", K);
  auto in = x.reshape({-1, K}).contiguous();
  const int64_t M = in.size(0);
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  auto out = torch::empty({M, N}, torch::kFloat);
  if (M == 0) return out.view(sizes);

#ifndef LEANSEQ_WITH_DNNL
  (void)act;
  throw std::runtime_error("int8 products need oneDNN, which this build lacks");
#else
  auto xscale = torch::empty({M}, torch::kFloat);
  auto acc = torch::empty({M, N}, torch::kInt);
  const int8_t* wq = w.q.data_ptr<int8_t>();
  if (act == Int8Activations::u8_shifted) {
    auto xq = torch::empty({M, K}, torch::kByte);
    quantize_rows(in.data_ptr<float>(), M, K, xq.data_ptr<uint8_t>(), xscale.data_ptr<float>(), 128);
    // acc = xq * w^T + compensation[n] (per column): (x_s8 + 128) w = x_s8 w + 128 sum_k w.
    check(dnnl_gemm_u8s8s32('N', 'T', 'R', M, N, K, 1.f, xq.data_ptr<uint8_t>(), K, 0, wq, K, 0, 0.f,
                            acc.data_ptr<int32_t>(), N, w.compensation.data_ptr<int32_t>()),
          "u8s8s32 GEMM");
  } else if (act == Int8Activations::u8_split) {
    auto hi = torch::empty({M, K}, torch::kByte), lo = torch::empty({M, K}, torch::kByte);
    quantize_rows_split(in.data_ptr<float>(), M, K, hi.data_ptr<uint8_t>(), lo.data_ptr<uint8_t>(),
                        xscale.data_ptr<float>());
    // (h + 64) w - 64 sum_k w = h w (the weight's compensation is -128 sum_k w), then 2 (h w) + l w.
    auto co = torch::div(w.compensation, 2, "trunc").contiguous();  // exact: the values are even
    auto acc_lo = torch::empty({M, N}, torch::kInt);
    const int32_t zero = 0;
    check(dnnl_gemm_u8s8s32('N', 'T', 'R', M, N, K, 1.f, hi.data_ptr<uint8_t>(), K, 0, wq, K, 0, 0.f,
                            acc.data_ptr<int32_t>(), N, co.data_ptr<int32_t>()),
          "u8s8s32 GEMM (high bits)");
    check(dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.f, lo.data_ptr<uint8_t>(), K, 0, wq, K, 0, 0.f,
                            acc_lo.data_ptr<int32_t>(), N, &zero),
          "u8s8s32 GEMM (low bit)");
    acc.mul_(2).add_(acc_lo);
  } else {
    auto xq = torch::empty({M, K}, torch::kChar);
    quantize_rows(in.data_ptr<float>(), M, K, xq.data_ptr<int8_t>(), xscale.data_ptr<float>(), 0);
    const int32_t zero = 0;
    check(dnnl_gemm_s8s8s32('N', 'T', 'F', M, N, K, 1.f, xq.data_ptr<int8_t>(), K, 0, wq, K, 0, 0.f,
                            acc.data_ptr<int32_t>(), N, &zero),
          "s8s8s32 GEMM");
  }

  const int32_t* a = acc.data_ptr<int32_t>();
  const float* xs = xscale.data_ptr<float>();
  const float* ws = w.scale.data_ptr<float>();
  torch::Tensor b = bias.defined() ? bias.detach().to(torch::kFloat).contiguous() : torch::Tensor();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* o = out.data_ptr<float>();
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float s = xs[m];
      const int32_t* ar = a + m * N;
      float* orow = o + m * N;
      if (bp) {
#pragma omp simd
        for (int64_t n = 0; n < N; ++n) orow[n] = static_cast<float>(ar[n]) * (s * ws[n]) + bp[n];
      } else {
#pragma omp simd
        for (int64_t n = 0; n < N; ++n) orow[n] = static_cast<float>(ar[n]) * (s * ws[n]);
      }
    }
  };
  parallel_chunks(M, workers_for(M * N, 1 << 16), rows);
  return out.view(sizes);
#endif
}

torch::Tensor int8_linear_reference(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias) {
  const int64_t K = w.in_features();
  auto in = x.reshape({-1, K}).to(torch::kFloat);
  auto amax = in.abs().amax(1, true);
  auto xs = torch::where(amax > 0, amax / 127.f, torch::ones_like(amax));
  auto xq = torch::round(in * (1.f / xs)).to(torch::kDouble);
  auto acc = torch::matmul(xq, w.q.to(torch::kDouble).t());  // exact: |acc| < 2^53
  auto out = acc * xs.to(torch::kDouble) * w.scale.to(torch::kDouble).unsqueeze(0);
  if (bias.defined()) out = out + bias.to(torch::kDouble);
  auto sizes = x.sizes().vec();
  sizes.back() = w.out_features();
  return out.to(torch::kFloat).view(sizes);
}

}  // namespace leanseq::kernels
