#include "leanseq/kernels/dropout_add_layer_norm.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "leanseq/kernels/add_layer_norm.h"
#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/dropout.h"
#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// What a row needs to know of the dropout: the seed and p (p = 0: nothing is dropped).
struct Drop {
  uint64_t seed;
  double p;

  // The row's multipliers (1 / (1 - p) or 0) of elements [first, first + C).
  void fill(int64_t first, int64_t C, float* m) const {
    if (p > 0) {
      dropout_multipliers(seed, p, first, C, m);
    } else {
      std::fill(m, m + C, 1.f);
    }
  }
};

// One row forward: h = r + y m, then xhat = (h - mean) / std and out = xhat w + b; returns 1/std.
__attribute__((target_clones("avx512f", "avx2", "default"))) float forward_row(
    int64_t C, const float* __restrict r, const float* __restrict y, const float* __restrict m,
    const float* __restrict w, const float* __restrict b, float eps, float* __restrict xhat, float* __restrict out) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) {
    xhat[c] = r[c] + y[c] * m[c];
    sum += xhat[c];
  }
  const float mean = sum / static_cast<float>(C);
  float squares = 0.f;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = 0; c < C; ++c) squares += (xhat[c] - mean) * (xhat[c] - mean);
  const float rstd = 1.f / std::sqrt(squares / static_cast<float>(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    xhat[c] = (xhat[c] - mean) * rstd;
    out[c] = xhat[c] * w[c] + b[c];
  }
  return rstd;
}

// One row backward: dh = rstd (g w - mean(g w) - xhat mean(g w xhat)); the residual's gradient is
// dh, y's is dh m; g xhat and g are added to the weight's and the bias's gradients.
__attribute__((target_clones("avx512f", "avx2", "default"))) void backward_row(
    int64_t C, const float* __restrict g, const float* __restrict xhat, const float* __restrict w, float rstd,
    const float* __restrict m, float* __restrict dres, float* __restrict dy, float* __restrict dw,
    float* __restrict db) {
  float a = 0.f, bx = 0.f;
#pragma omp simd reduction(+ : a, bx)
  for (int64_t c = 0; c < C; ++c) {
    const float gw = g[c] * w[c];
    a += gw;
    bx += gw * xhat[c];
  }
  a /= static_cast<float>(C);
  bx /= static_cast<float>(C);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const float dh = rstd * (g[c] * w[c] - a - xhat[c] * bx);
    dres[c] = dh;
    dy[c] = dh * m[c];
    dw[c] += g[c] * xhat[c];
    db[c] += g[c];
  }
}

// Rows per block of the weight's and the bias's gradient sums.
constexpr int64_t kRowsPerBlock = 32;

// Rows are split over the compute threads when there is enough work for each.
int workers_for_rows(int64_t rows, int64_t C) {
  return static_cast<int>(std::min<int64_t>(workers_for(rows * C, int64_t{1} << 15), std::max<int64_t>(rows, 1)));
}

class DropoutAddLayerNorm : public torch::autograd::Function<DropoutAddLayerNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& residual,
                               const torch::Tensor& y, const torch::Tensor& weight, const torch::Tensor& bias,
                               double p, double eps) {
    const Drop d{p > 0 ? dropout_seed() : 0, p};
    const int64_t C = y.size(-1), rows = y.numel() / C;
    const auto r = residual.contiguous(), yc = y.contiguous(), w = weight.contiguous(), b = bias.contiguous();
    auto out = torch::empty_like(r), xhat = torch::empty({rows, C}, r.options());
    auto rstd = torch::empty({rows}, r.options());
    const float *rp = r.data_ptr<float>(), *wp = w.data_ptr<float>(), *bp = b.data_ptr<float>();
    const bool y16 = yc.scalar_type() == torch::kBFloat16;
    const float* yp = y16 ? nullptr : yc.data_ptr<float>();
    const auto* yh = y16 ? reinterpret_cast<const uint16_t*>(yc.data_ptr()) : nullptr;
    float *op = out.data_ptr<float>(), *xp = xhat.data_ptr<float>(), *sp = rstd.data_ptr<float>();
    parallel_chunks(rows, workers_for_rows(rows, C), [&](int, int64_t begin, int64_t end) {
      std::vector<float> m(C), wide(y16 ? C : 0);
      for (int64_t i = begin; i < end; ++i) {
        d.fill(i * C, C, m.data());
        const float* yrow = yp ? yp + i * C : wide.data();
        if (y16) widen_bf16_row(yh + i * C, wide.data(), C);
        sp[i] = forward_row(C, rp + i * C, yrow, m.data(), wp, bp, static_cast<float>(eps), xp + i * C, op + i * C);
      }
    });
    ctx->save_for_backward({xhat, rstd, w});
    ctx->saved_data["y_bf16"] = y16;
    ctx->saved_data["seed"] = static_cast<int64_t>(d.seed);
    ctx->saved_data["p"] = p;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &xhat = saved[0], &rstd = saved[1], &w = saved[2];
    const Drop d{static_cast<uint64_t>(ctx->saved_data["seed"].toInt()), ctx->saved_data["p"].toDouble()};
    const int64_t rows = xhat.size(0), C = xhat.size(1);
    const auto g = grad[0].contiguous();
    const bool y16 = ctx->saved_data["y_bf16"].toBool();
    auto dres = torch::empty_like(g), dy = torch::empty_like(g, g.options().dtype(y16 ? torch::kBFloat16 : torch::kFloat));
    // The weight's and the bias's gradients are summed over blocks of kRowsPerBlock rows, each
    // block's share on its own, then the shares in block order: the blocks do not depend on the
    // number of threads, and so neither do the sums, to the bit.
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    const int workers = static_cast<int>(std::min<int64_t>(workers_for_rows(rows, C), std::max<int64_t>(blocks, 1)));
    auto partial = torch::zeros({std::max<int64_t>(blocks, 1), 2, C}, g.options());
    const float *gp = g.data_ptr<float>(), *xp = xhat.data_ptr<float>(), *sp = rstd.data_ptr<float>(),
                *wp = w.data_ptr<float>();
    float *rp = dres.data_ptr<float>(), *pp = partial.data_ptr<float>();
    float* yp = y16 ? nullptr : dy.data_ptr<float>();
    auto* yh = y16 ? reinterpret_cast<uint16_t*>(dy.data_ptr()) : nullptr;
    parallel_chunks(blocks, workers, [&](int, int64_t first_block, int64_t end_block) {
      std::vector<float> m(C), narrow(y16 ? C : 0);
      for (int64_t block = first_block; block < end_block; ++block) {
        float* dw = pp + block * 2 * C;
        for (int64_t i = block * kRowsPerBlock; i < std::min(rows, (block + 1) * kRowsPerBlock); ++i) {
          d.fill(i * C, C, m.data());
          float* dyrow = yp ? yp + i * C : narrow.data();
          backward_row(C, gp + i * C, xp + i * C, wp, sp[i], m.data(), rp + i * C, dyrow, dw, dw + C);
          if (y16) round_to_bf16_row(narrow.data(), yh + i * C, C);
        }
      }
    });
    auto sums = torch::zeros({2, C}, g.options());
    float* total = sums.data_ptr<float>();
    for (int64_t block = 0; block < blocks; ++block) {
      const float* share = pp + block * 2 * C;
      for (int64_t c = 0; c < 2 * C; ++c) total[c] += share[c];
    }
    return {dres, dy, sums[0], sums[1], torch::Tensor(), torch::Tensor()};
  }
};

bool fused(const torch::Tensor& residual, const torch::Tensor& y, const torch::Tensor& weight,
           const torch::Tensor& bias) {
  if (!torch::GradMode::is_enabled()) return false;
  bool records = false;
  for (const auto* t : {&residual, &y, &weight, &bias}) {
    const bool type_ok = t->scalar_type() == torch::kFloat || (t == &y && t->scalar_type() == torch::kBFloat16);
    if (!t->defined() || !t->device().is_cpu() || !type_ok) return false;
    records = records || t->requires_grad();
  }
  const int64_t C = y.dim() >= 1 ? y.size(-1) : 0;
  return records && C > 0 && y.numel() > 0 && residual.sizes() == y.sizes() && weight.dim() == 1 &&
         weight.size(0) == C && bias.dim() == 1 && bias.size(0) == C;
}

}  // namespace

torch::Tensor dropout_add_layer_norm(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training,
                                     const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  const double drop = training ? p : 0.0;
  if (drop >= 1 || !fused(residual, y, weight, bias)) {
    return add_layer_norm(residual, kernels::dropout(y, p, training), weight, bias, eps);
  }
  RECORD_FUNCTION("leanseq::dropout_add_layer_norm", std::vector<c10::IValue>());
  return DropoutAddLayerNorm::apply(residual, y, weight, bias, drop, eps);
}

}  // namespace leanseq::kernels
