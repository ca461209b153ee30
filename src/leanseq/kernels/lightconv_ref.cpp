#include "leanseq/kernels/lightconv_ref.h"

namespace leanseq::kernels {

namespace {
void check(const torch::Tensor& x, const torch::Tensor& w, int64_t padding_l) {
  TORCH_CHECK(x.dim() == 3, "lightconv: x must be [B, T, C], got ", x.sizes());
  TORCH_CHECK(w.dim() == 4 && w.size(0) == x.size(0) && w.size(2) == x.size(1),
              "lightconv: weights must be [B, H, T, K] matching x ", x.sizes(), ", got ", w.sizes());
  TORCH_CHECK(x.size(2) % w.size(1) == 0, "lightconv: channels ", x.size(2), " not divisible by heads ", w.size(1));
  TORCH_CHECK(padding_l >= 0 && padding_l < w.size(3), "lightconv: padding_l ", padding_l, " outside [0, K)");
}
}  // namespace

torch::Tensor lightconv_unfold(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l) {
  check(x, weights, padding_l);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = weights.size(1), K = weights.size(3);
  const int64_t R = C / H;
  // [B, T + K - 1, C] -> windows [B, T, C, K] (a view: unfold adds the window as the last dim).
  auto padded = torch::constant_pad_nd(x, {0, 0, padding_l, K - 1 - padding_l});
  auto windows = padded.unfold(1, K, 1).reshape({B, T, H, R, K});
  auto w = weights.permute({0, 2, 1, 3}).unsqueeze(3);  // [B, T, H, 1, K]
  return (windows * w).sum(-1).reshape({B, T, C});
}

torch::Tensor lightconv_band(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l) {
  check(x, weights, padding_l);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = weights.size(1), K = weights.size(3);
  const int64_t R = C / H, L = T + K - 1;
  // Row t of the band holds the K taps at columns t .. t+K-1 of a [T, T + K - 1] matrix; the
  // columns padding_l .. padding_l + T - 1 are the positions of x.
  auto band = torch::zeros({B * H, T, L}, x.options());
  band.as_strided({B * H, T, K}, {T * L, L + 1, 1}).copy_(weights.reshape({B * H, T, K}));
  auto w = band.narrow(2, padding_l, T);                        // [B*H, T, T]
  auto xs = x.view({B, T, H, R}).permute({0, 2, 1, 3}).reshape({B * H, T, R});
  auto y = torch::bmm(w, xs);                                   // [B*H, T, R]
  return y.view({B, H, T, R}).permute({0, 2, 1, 3}).reshape({B, T, C});
}

std::pair<torch::Tensor, torch::Tensor> lightconv_causal_step(const torch::Tensor& window, const torch::Tensor& x_new,
                                                              const torch::Tensor& weights) {
  const int64_t K = weights.size(3);
  TORCH_CHECK(window.dim() == 3 && window.size(1) == K - 1 && window.size(2) == x_new.size(2),
              "lightconv step: window must be [B, K-1, C] = [", x_new.size(0), ", ", K - 1, ", ", x_new.size(2),
              "], got ", window.sizes());
  // [window ; x_new] is the input padded on the left; with padding_l = 0 its windows give y.
  auto buffer = torch::cat({window, x_new}, 1);  // [B, K-1+n, C]
  const int64_t B = x_new.size(0), n = x_new.size(1), C = x_new.size(2), H = weights.size(1);
  auto windows = buffer.unfold(1, K, 1).reshape({B, n, H, C / H, K});
  auto y = (windows * weights.permute({0, 2, 1, 3}).unsqueeze(3)).sum(-1).reshape({B, n, C});
  return {y, buffer.narrow(1, n, K - 1)};
}

torch::Tensor lightweight_weights(const torch::Tensor& weight, int64_t B, int64_t T) {
  auto w = weight.dim() == 3 ? weight.squeeze(1) : weight;  // [H, K]
  TORCH_CHECK(w.dim() == 2, "lightweight weight must be [H, K] or [H, 1, K], got ", weight.sizes());
  auto s = torch::softmax(w, -1);
  return s.view({1, w.size(0), 1, w.size(1)}).expand({B, w.size(0), T, w.size(1)});
}

torch::Tensor dynamic_weights(const torch::Tensor& logits, int64_t heads) {
  const int64_t B = logits.size(0), T = logits.size(1), K = logits.size(2) / heads;
  TORCH_CHECK(K * heads == logits.size(2), "dynamic logits width ", logits.size(2), " is not heads * K");
  return torch::softmax(logits.view({B, T, heads, K}), -1).permute({0, 2, 1, 3});
}

}  // namespace leanseq::kernels
