#include "leanseq/kernels/beam_topk.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// NaN told from its bits: the kernels are compiled with -ffast-math, under which std::isnan and
// x != x may be folded to false.
inline bool is_nan(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

// ATen's order: NaN above every number; otherwise greater first.
inline bool ranks_above(float x, float y) { return is_nan(x) ? !is_nan(y) : (!is_nan(y) && x > y); }

// The k best seen so far, best first; an element equal to one already kept goes after it, so that
// scanning in index order keeps the lower index first among equals.
struct Best {
  float* value;
  int64_t* index;
  int64_t k, count = 0;
  void offer(float x, int64_t i) {
    if (count == k && !ranks_above(x, value[k - 1])) return;
    int64_t p = count < k ? count : k - 1;  // the slot it takes, moved up past every element it ranks above
    for (; p > 0 && ranks_above(x, value[p - 1]); --p) {
      value[p] = value[p - 1];
      index[p] = index[p - 1];
    }
    value[p] = x;
    index[p] = i;
    if (count < k) ++count;
  }
};

constexpr int64_t kBlock = 64;

// One row's candidates x + s offered in index order (indices from `first`), blocks of kBlock
// entries skipped where none of them could enter: once the list is full, a block goes on only if
// one of its sums ranks above the last kept (a NaN always goes on; offer() decides). The test is
// a vector pass in the clone chosen for the CPU, and the whole row runs in that one call.
__attribute__((target_clones("avx512f", "avx2", "default"))) void select_row(const float* __restrict row, int64_t V,
                                                                           float s, int64_t first, Best& best) {
  for (int64_t v0 = 0; v0 < V; v0 += kBlock) {
    const int64_t n = std::min(kBlock, V - v0);
    if (best.count == best.k) {
      const float last = best.value[best.k - 1];
      int above = 0;
#pragma omp simd reduction(| : above)
      for (int64_t j = 0; j < n; ++j) {
        const float x = row[v0 + j] + s;
        above |= static_cast<int>(x > last) | static_cast<int>(is_nan(x));
      }
      if (!above) continue;
    }
    for (int64_t j = 0; j < n; ++j) best.offer(row[v0 + j] + s, first + v0 + j);
  }
}

// One sentence's rows: beam rows of V log-probabilities, row b at lp + b * row_stride.
void select_group(const float* lp, int64_t row_stride, const float* scores, int64_t beam, int64_t V, Best& best) {
  for (int64_t b = 0; b < beam; ++b) select_row(lp + b * row_stride, V, scores ? scores[b] : 0.f, b * V, best);
}

}  // namespace

std::tuple<torch::Tensor, torch::Tensor> beam_topk_reference(const torch::Tensor& lprobs, const torch::Tensor& scores,
                                                             int64_t k) {
  auto sum = scores.defined() ? lprobs + scores.unsqueeze(-1) : lprobs;
  auto top = sum.reshape({lprobs.size(0), -1}).topk(k, 1);
  return {std::get<0>(top), std::get<1>(top)};
}

std::tuple<torch::Tensor, torch::Tensor> beam_topk(const torch::Tensor& lprobs, const torch::Tensor& scores,
                                                   int64_t k) {
  TORCH_CHECK(lprobs.dim() == 3, "beam_topk: lprobs must be [sentences, beam, vocabulary], got ", lprobs.sizes());
  const int64_t G = lprobs.size(0), beam = lprobs.size(1), V = lprobs.size(2);
  TORCH_CHECK(k >= 0 && k <= beam * V, "beam_topk: k = ", k, " of ", beam * V, " candidates");
  auto s = scores.defined() ? scores.to(lprobs.device()) : scores;
  const bool loop = lprobs.is_cpu() && lprobs.scalar_type() == torch::kFloat && (lprobs.stride(2) == 1 || V == 1) &&
                    (!s.defined() || (s.scalar_type() == torch::kFloat && s.sizes() == lprobs.sizes().slice(0, 2)));
  if (!loop) return beam_topk_reference(lprobs, s, k);
  auto values = torch::empty({G, k}, torch::kFloat);
  auto indices = torch::empty({G, k}, torch::kLong);
  if (k == 0) return {values, indices};
  const auto sc = s.defined() ? s.contiguous() : s;
  const float* lp = lprobs.data_ptr<float>();
  const float* sp = sc.defined() ? sc.data_ptr<float>() : nullptr;
  float* vo = values.data_ptr<float>();
  int64_t* io = indices.data_ptr<int64_t>();
  const int64_t gs = lprobs.stride(0), bs = lprobs.stride(1);
  parallel_chunks(G, workers_for(G * beam * V, 1 << 16), [&](int, int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      Best best{vo + g * k, io + g * k, k};
      select_group(lp + g * gs, bs, sp ? sp + g * beam : nullptr, beam, V, best);
    }
  });
  return {values, indices};
}

}  // namespace leanseq::kernels
