#include "leanseq/kernels/label_smoothed_ce.h"

#include <ATen/record_function.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

struct RowOut {
  double loss, nll;
};

// One row: writes grad[v] = softmax(x)_v - eps_i - (1 - eps - eps_i) [v == t] and returns the
// row's losses. Compiled for AVX-512, AVX2 and a baseline; the loops vectorise (expf through
// libmvec).
__attribute__((target_clones("avx512f", "avx2", "default"))) RowOut row_kernel(const float* __restrict x, float* __restrict grad,
                                                                    int64_t V, int64_t t, float eps, float eps_i) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < V; ++v) m = std::max(m, x[v]);
  float sum_e = 0.f, sum_x = 0.f;
#pragma omp simd reduction(+ : sum_e, sum_x)
  for (int64_t v = 0; v < V; ++v) {
    float e = std::exp(x[v] - m);
    grad[v] = e;
    sum_e += e;
    sum_x += x[v];
  }
  const float inv = 1.f / sum_e;
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) grad[v] = grad[v] * inv - eps_i;
  grad[t] -= 1.f - eps - eps_i;
  const double lse = static_cast<double>(m) + std::log(static_cast<double>(sum_e));
  const double nll = lse - static_cast<double>(x[t]);
  const double smooth = static_cast<double>(V) * lse - static_cast<double>(sum_x);
  return {(1.0 - eps - eps_i) * nll + eps_i * smooth, nll};
}

class LabelSmoothedCE : public torch::autograd::Function<LabelSmoothedCE> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                                                const torch::Tensor& target, double eps, int64_t ignore_index) {
    const bool bf16 = logits.scalar_type() == torch::kBFloat16;
    TORCH_CHECK(logits.dim() == 2 && (logits.scalar_type() == torch::kFloat || bf16) && logits.device().is_cpu(),
                "label_smoothed_cross_entropy: expected float32 or bfloat16 CPU logits [N, V]");
    TORCH_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), "label_smoothed_cross_entropy: target must be [N]");
    auto x = logits.contiguous();
    auto t = target.to(torch::kLong).contiguous();
    const int64_t N = x.size(0), V = x.size(1);
    auto grad = torch::empty_like(x);
    const float e = static_cast<float>(eps), ei = static_cast<float>(eps / static_cast<double>(V - 1));
    const int64_t* tp = t.data_ptr<int64_t>();
    // Checked here: the workers below must not throw.
    auto bad = t.ne(ignore_index).logical_and(t.lt(0).logical_or(t.ge(V)));
    TORCH_CHECK(!bad.any().item<bool>(), "label_smoothed_cross_entropy: a target is outside [0, ", V, ")");
    const int workers = workers_for(N, 64);
    std::vector<double> loss(workers, 0.0), nll(workers, 0.0);
    // bfloat16 logits (CPU autocast): each row widened to float32 in this thread's buffer, and its
    // gradient rounded back as a cast of the float32 gradient would, so the output projection's
    // backward takes it in its own type without a pass over [N, V] in float32 each way.
    auto* xp = static_cast<const uint8_t*>(x.data_ptr());
    auto* gp = static_cast<uint8_t*>(grad.data_ptr());
    const int64_t row_bytes = V * static_cast<int64_t>(x.element_size());
    parallel_chunks(N, workers, [&](int w, int64_t begin, int64_t end) {
      std::vector<float> widened(bf16 ? static_cast<size_t>(V) : 0), narrowed(bf16 ? static_cast<size_t>(V) : 0);
      for (int64_t i = begin; i < end; ++i) {
        uint8_t* out = gp + i * row_bytes;
        if (tp[i] == ignore_index) {
          std::memset(out, 0, static_cast<size_t>(row_bytes));  // 0 in float32 and in bfloat16 alike
          continue;
        }
        const float* row = reinterpret_cast<const float*>(xp + i * row_bytes);
        float* g = reinterpret_cast<float*>(out);
        if (bf16) {
          widen_bf16_row(reinterpret_cast<const uint16_t*>(xp + i * row_bytes), widened.data(), V);
          row = widened.data(), g = narrowed.data();
        }
        const RowOut r = row_kernel(row, g, V, tp[i], e, ei);
        if (bf16) round_to_bf16_row(g, reinterpret_cast<uint16_t*>(out), V);
        loss[w] += r.loss;
        nll[w] += r.nll;
      }
    });
    double loss_sum = 0, nll_sum = 0;
    for (int w = 0; w < workers; ++w) loss_sum += loss[w], nll_sum += nll[w];
    ctx->save_for_backward({grad});
    auto nll_t = torch::tensor(static_cast<float>(nll_sum));
    ctx->mark_non_differentiable({nll_t});
    return {torch::tensor(static_cast<float>(loss_sum)), nll_t};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto grad = ctx->get_saved_variables()[0];
    // A loss that was not scaled (the usual case) passes the saved gradient on as it is: one
    // pass over [N, V] less. The graph is freed after this backward, so no one else reads it.
    const auto& scale = grad_out[0];
    const bool one = scale.defined() && scale.numel() == 1 && scale.is_cpu() && scale.item<double>() == 1.0;
    return {one ? grad : grad * scale, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor cross_entropy_input(const torch::Tensor& logits) {
  return logits.is_cpu() && logits.scalar_type() == torch::kBFloat16 ? logits : logits.to(torch::kFloat);
}

CrossEntropyResult label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                                                int64_t ignore_index) {
  if (logits.is_cuda()) {
    // On the GPU, ATen's log-softmax and a gather, with ATen's autograd.
    auto lp = torch::log_softmax(logits, -1);
    auto keep = target.ne(ignore_index).to(lp.scalar_type());
    auto nll = -lp.gather(-1, target.clamp_min(0).unsqueeze(-1)).squeeze(-1) * keep;
    auto smooth = -lp.sum(-1) * keep;
    const double eps_i = eps / static_cast<double>(logits.size(-1) - 1);
    return {(nll * (1.0 - eps - eps_i) + smooth * eps_i).sum(), nll.sum().detach()};
  }
  // One operator for profilers (bench/), as its backward node already is.
  RECORD_FUNCTION("leanseq::label_smoothed_cross_entropy", std::vector<c10::IValue>());
  auto out = LabelSmoothedCE::apply(logits, target, eps, ignore_index);
  return {out[0], out[1]};
}

}  // namespace leanseq::kernels
