#include "leanseq/kernels/one_query_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/exp_avx512.h"
#include "leanseq/kernels/parallel.h"
#include "leanseq/kernels/softmax.h"

namespace leanseq::kernels {

namespace {

// Compiled for AVX-512 (with FMA) and AVX2 besides the baseline (chosen when the program starts).
#define LEANSEQ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// Rows [s, s + n) of `rows` (d floats each) fetched towards the cache ahead of their use: a
// reordered self-attention cache's keys and values sit at scattered addresses that the hardware
// cannot predict, and each row would otherwise wait for memory when its turn comes. The loops below
// fetch (their `fetch`) only where the rows come through such a table: a (row, head)'s own keys
// follow each other in memory, which the hardware fetches ahead by itself, and a sentence's beams
// read the same keys one after the other, already in cache (the instructions of the fetches cost
// an encoder-decoder attention of 16 keys more than they saved, BM_OneQueryAttention).
template <class T> inline void prefetch_rows(const T* const* rows, int64_t s, int64_t n, int64_t S, int64_t d) {
  for (int64_t i = s; i < std::min(s + n, S); ++i) {
    const char* row = reinterpret_cast<const char*>(rows[i]);
    for (int64_t byte = 0; byte < d * static_cast<int64_t>(sizeof(T)); byte += 64) __builtin_prefetch(row + byte);
  }
}

// Keys and values in bfloat16 (a kBFloat16 tensor's 16 bits each, a float32's high half): the
// loops widen each number as they load it and then do what they do for float32, so the results
// are the bits the float32 loops give for the widened numbers.
using Bf16 = uint16_t;

// How many keys ahead of the group being computed their rows are fetched.
constexpr int64_t kPrefetchAhead = 8;

#if defined(__x86_64__)
// Heads of 64 numbers (most models' width per head) on AVX-512: the same sums in the same order as
// the loops below compile to for AVX-512, in registers throughout. A score's 16 lanes are summed
// for 16 keys together (one shuffle tree for all, not one per key), and a context's 64 numbers
// stay in four registers across the keys rather than in memory between groups.
std::atomic<bool> heads_of_64_wanted{true};

bool use_heads_of_64(int64_t d) {
  return d == 64 && heads_of_64_wanted.load(std::memory_order_relaxed) && heads_of_64_loops_available();
}

#define LEANSEQ_AVX512 __attribute__((target("avx512f")))
// GCC 12 takes the shuffles' _mm512_undefined_ps() for an uninitialised variable.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 16 keys' or values' numbers from p, as float32.
LEANSEQ_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
LEANSEQ_AVX512 inline __m512 load16(const Bf16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The 16 lanes of each a[i] summed as the loops' reduction sums one: lanes l and l + 8, then
// l + 4, l + 2, l + 1; the 16 sums in key order.
LEANSEQ_AVX512 inline __m512 lane_sums(__m512 a[16]) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 8], 0x44), _mm512_shuffle_f32x4(a[i], a[i + 8], 0xEE));
  }
  for (int i = 0; i < 4; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[i], b[i + 4], 0x88), _mm512_shuffle_f32x4(b[i], b[i + 4], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {
    const __m512d x = _mm512_castps_pd(c[i]), y = _mm512_castps_pd(c[i + 2]);
    d[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
  // e holds keys 0 2 1 3 8 10 9 11 4 6 5 7 12 14 13 15; the same table puts them back in order.
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15), e);
}

// The scores of keys [0, n) for the returned n: blocks of 16 while at least kFewestSummedTogether keys
// are left (below that, fewer groups of 4 take fewer instructions than a block of 16).
constexpr int64_t kFewestSummedTogether = 9;

template <class T>
LEANSEQ_AVX512 int64_t dots_64(const float* __restrict q, const T* const* __restrict k, int64_t S,
                               float* __restrict out, bool fetch) {
  if (S < kFewestSummedTogether) return 0;
  const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16), q2 = _mm512_loadu_ps(q + 32),
               q3 = _mm512_loadu_ps(q + 48);
  if (fetch) prefetch_rows(k, 0, kPrefetchAhead, S, 64);
  int64_t s = 0;
  for (; S - s >= kFewestSummedTogether; s += 16) {
    __m512 a[16];
    for (int64_t i = 0; i < 16; ++i) {
      if (fetch && i % 4 == 0) prefetch_rows(k, s + i + kPrefetchAhead, 4, S, 64);
      const T* r = k[std::min(s + i, S - 1)];
      __m512 t = _mm512_fmadd_ps(q0, load16(r), _mm512_setzero_ps());
      t = _mm512_fmadd_ps(q1, load16(r + 16), t);
      t = _mm512_fmadd_ps(q2, load16(r + 32), t);
      a[i] = _mm512_fmadd_ps(q3, load16(r + 48), t);
    }
    const __mmask16 keep = S - s >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (S - s)) - 1);
    _mm512_mask_storeu_ps(out + s, keep, lane_sums(a));
  }
  return std::min(s, S);
}

template <class T>
LEANSEQ_AVX512 void weighted_sum_64(const float* __restrict p, int64_t p_stride, const T* const* __restrict v,
                                    int64_t S, float* __restrict out, bool fetch) {
  __m512 o[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t s = 0; s < S; s += 4) {
    if (fetch) prefetch_rows(v, s + kPrefetchAhead, 4, S, 64);
    __m512 w[4];
    const T* r[4];
    for (int64_t i = 0; i < 4; ++i) {
      w[i] = _mm512_set1_ps(s + i < S ? p[(s + i) * p_stride] : 0.f);
      r[i] = v[std::min(s + i, S - 1)];
    }
    for (int c = 0; c < 4; ++c) {  // (w0 v0 + w1 v1) + (w2 v2 + w3 v3), added to the sum so far
      const __m512 v0 = load16(r[0] + 16 * c), v1 = load16(r[1] + 16 * c), v2 = load16(r[2] + 16 * c),
                   v3 = load16(r[3] + 16 * c);
      const __m512 x = _mm512_fmadd_ps(w[0], v0, _mm512_mul_ps(w[1], v1));
      const __m512 y = _mm512_fmadd_ps(w[2], v2, _mm512_mul_ps(w[3], v3));
      o[c] = _mm512_add_ps(_mm512_add_ps(x, y), o[c]);
    }
  }
  for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out + 16 * c, o[c]);
}

// Rows that share their keys and values (a sentence's beams over its source) at most this many
// together: each key and value is loaded once for all of them. Five queries of four registers
// each, a key's four and a sum leave the 32 registers room.
constexpr int64_t kRowsTogether = 5;

// dots_64 for G queries over the same keys: each query's scores are dots_64's, the same operations
// in the same order; a key's four registers are loaded once for the G queries.
template <int G, class T>
LEANSEQ_AVX512 int64_t dots_64_rows(const float* const* q, const T* const* __restrict k, int64_t S,
                                    float* const* out) {
  if (S < kFewestSummedTogether) return 0;
  __m512 qv[G][4];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < 4; ++c) qv[g][c] = _mm512_loadu_ps(q[g] + 16 * c);
  }
  int64_t s = 0;
  for (; S - s >= kFewestSummedTogether; s += 16) {
    __m512 a[G][16];
    for (int64_t i = 0; i < 16; ++i) {
      const T* r = k[std::min(s + i, S - 1)];
      const __m512 k0 = load16(r), k1 = load16(r + 16), k2 = load16(r + 32), k3 = load16(r + 48);
      for (int g = 0; g < G; ++g) {
        __m512 t = _mm512_fmadd_ps(qv[g][0], k0, _mm512_setzero_ps());
        t = _mm512_fmadd_ps(qv[g][1], k1, t);
        t = _mm512_fmadd_ps(qv[g][2], k2, t);
        a[g][i] = _mm512_fmadd_ps(qv[g][3], k3, t);
      }
    }
    const __mmask16 keep = S - s >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (S - s)) - 1);
    for (int g = 0; g < G; ++g) _mm512_mask_storeu_ps(out[g] + s, keep, lane_sums(a[g]));
  }
  return std::min(s, S);
}

// weighted_sum_64 for G rows of weights (each contiguous) over the same values: each context is
// weighted_sum_64's, the same operations in the same order for each of its four registers; a
// value's 16 numbers are loaded once for the G rows.
template <int G, class T>
LEANSEQ_AVX512 void weighted_sum_64_rows(const float* const* p, const T* const* __restrict v, int64_t S,
                                         float* const* out) {
  for (int c = 0; c < 4; ++c) {
    __m512 o[G];
    for (int g = 0; g < G; ++g) o[g] = _mm512_setzero_ps();
    for (int64_t s = 0; s < S; s += 4) {
      const __m512 v0 = load16(v[s] + 16 * c), v1 = load16(v[std::min(s + 1, S - 1)] + 16 * c),
                   v2 = load16(v[std::min(s + 2, S - 1)] + 16 * c), v3 = load16(v[std::min(s + 3, S - 1)] + 16 * c);
      for (int g = 0; g < G; ++g) {
        const float* w = p[g] + s;
        const __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(s + 1 < S ? w[1] : 0.f),
                     w2 = _mm512_set1_ps(s + 2 < S ? w[2] : 0.f), w3 = _mm512_set1_ps(s + 3 < S ? w[3] : 0.f);
        const __m512 x = _mm512_fmadd_ps(w0, v0, _mm512_mul_ps(w1, v1));
        const __m512 y = _mm512_fmadd_ps(w2, v2, _mm512_mul_ps(w3, v3));
        o[g] = _mm512_add_ps(_mm512_add_ps(x, y), o[g]);
      }
    }
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(out[g] + 16 * c, o[g]);
  }
}

#pragma GCC diagnostic pop
#undef LEANSEQ_AVX512

// f(std::integral_constant<int, G>) for G in 1 to kRowsTogether: the G-row forms' templates.
template <class F>
decltype(auto) with_rows(int64_t G, F&& f) {
  switch (G) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 5>{});
  }
}
template <class T>
int64_t dots_64_rows(int64_t G, const float* const* q, const T* const* k, int64_t S, float* const* out) {
  return with_rows(G, [&](auto rows) { return dots_64_rows<decltype(rows)::value>(q, k, S, out); });
}
template <class T>
void weighted_sum_64_rows(int64_t G, const float* const* p, const T* const* v, int64_t S, float* const* out) {
  with_rows(G, [&](auto rows) { weighted_sum_64_rows<decltype(rows)::value>(p, v, S, out); });
}
static_assert(kRowsTogether == 5, "with_rows dispatches up to 5 rows");
#else
constexpr int64_t kRowsTogether = 1;
std::atomic<bool> heads_of_64_wanted{true};
bool use_heads_of_64(int64_t) { return false; }
template <class T> int64_t dots_64(const float*, const T* const*, int64_t, float*, bool) { return 0; }
template <class T> void weighted_sum_64(const float*, int64_t, const T* const*, int64_t, float*, bool) {}
template <class T> int64_t dots_64_rows(int64_t, const float* const*, const T* const*, int64_t, float* const*) {
  return 0;
}
template <class T> void weighted_sum_64_rows(int64_t, const float* const*, const T* const*, int64_t, float* const*) {}
#endif

// out[s] = q . k[s], the keys at their own addresses. Four keys at a time: one dot product is a
// chain of dependent additions, four independent ones keep the vector units busy (a decoding step's
// keys are 64 numbers per head). The last 1-3 keys go through the same loop (the last key again in
// the free places), so that a key's score is the same bits whatever the number of keys after it.
LEANSEQ_CLONES void dots_in_fours(const float* __restrict q, const float* const* __restrict k, int64_t S, int64_t d,
                                  float* __restrict out, bool fetch) {
  if (fetch) prefetch_rows(k, 0, kPrefetchAhead, S, d);
  for (int64_t s = 0; s < S; s += 4) {
    if (fetch) prefetch_rows(k, s + kPrefetchAhead, 4, S, d);
    const float *k0 = k[s], *k1 = k[std::min(s + 1, S - 1)], *k2 = k[std::min(s + 2, S - 1)],
                *k3 = k[std::min(s + 3, S - 1)];
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
    for (int64_t j = 0; j < d; ++j) {
      a0 += q[j] * k0[j];
      a1 += q[j] * k1[j];
      a2 += q[j] * k2[j];
      a3 += q[j] * k3[j];
    }
    const float a[4] = {a0, a1, a2, a3};
    for (int64_t i = 0; i < 4 && s + i < S; ++i) out[s + i] = a[i];
  }
}

// The addresses of n rows of d numbers as float32: float32 rows themselves, bfloat16 rows widened
// into this thread's buffer (valid until its next call) for the general loops.
template <class T> const float* const* widened(const T* const* rows, int64_t n, int64_t d) {
  if constexpr (std::is_same_v<T, float>) {
    return rows;
  } else {
    thread_local std::vector<float> numbers;
    thread_local std::vector<const float*> at;
    numbers.resize(n * d);
    at.resize(n);
    widen_bf16_rows(rows, n, d, numbers.data(), d);
    for (int64_t i = 0; i < n; ++i) at[i] = numbers.data() + i * d;
    return at.data();
  }
}

// The keys' scores: heads of 64 in blocks of 16 where they apply, the rest in groups of 4 (each
// key's score is the same bits either way).
template <class T> void dots(const float* q, const T* const* k, int64_t S, int64_t d, float* out, bool fetch) {
  const int64_t done = use_heads_of_64(d) ? dots_64(q, k, S, out, fetch) : 0;
  if (done < S) {
    dots_in_fours(q, widened(k + done, S - done, d), S - done, d, out + done, fetch && std::is_same_v<T, float>);
  }
}

// out += (w0 v0 + w1 v1) + (w2 v2 + w3 v3): one group of 4 keys, the one code every group runs
// (not inlined: the last group is built with zero weights, and must round as the others do).
__attribute__((noinline)) LEANSEQ_CLONES void add_group(const float* __restrict w, const float* const* __restrict v,
                                                         int64_t d, float* __restrict out) {
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
  const float *v0 = v[0], *v1 = v[1], *v2 = v[2], *v3 = v[3];
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) out[j] += (w0 * v0[j] + w1 * v1[j]) + (w2 * v2[j] + w3 * v3[j]);
}

// out = sum over s of p[s] v[s], in groups of 4 keys; the last 1-3 keys make a group with weights
// 0 (over an existing row's values), as padded keys (weights exactly 0) do, so a sentence's
// context is the same bits alone and in a batch padded to more keys.
template <class T>
void weighted_sum(const float* __restrict p, int64_t p_stride, const T* const* __restrict values, int64_t S, int64_t d,
                  float* __restrict out, bool fetch) {
  if (use_heads_of_64(d)) return weighted_sum_64(p, p_stride, values, S, out, fetch);
  const float* const* v = widened(values, S, d);
  fetch = fetch && std::is_same_v<T, float>;
  for (int64_t j = 0; j < d; ++j) out[j] = 0.f;
  for (int64_t s = 0; s < S; s += 4) {
    if (fetch) prefetch_rows(v, s + kPrefetchAhead, 4, S, d);
    float w[4];
    const float* rows[4];
    for (int64_t i = 0; i < 4; ++i) {
      w[i] = s + i < S ? p[(s + i) * p_stride] : 0.f;
      rows[i] = v[std::min(s + i, S - 1)];
    }
    add_group(w, rows, d, out);
  }
}

// The addresses of the S rows of one (row, head) of a [., H, S, d] tensor t: t[row(s), h, s] where
// row(s) is `origin[s]` (stored rows per position) or `row` when origin is null.
template <class T>
void row_addresses(const torch::Tensor& t, const T* base, int64_t row, const int64_t* origin, int64_t h, int64_t S,
                   const T** out) {
  const int64_t s0 = t.stride(0), s1 = t.stride(1), s2 = t.stride(2);
  for (int64_t s = 0; s < S; ++s) out[s] = base + (origin ? origin[s] : row) * s0 + h * s1 + s * s2;
}

// a [B, H, ., .] view of a 3- or 4-dimensional tensor (H = 1 for three).
torch::Tensor as_4d(const torch::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(1) : t; }

// Whether b's first dimension groups a's rows: equal, or a divisor (consecutive rows of a share a
// row of b).
bool grouped(const torch::Tensor& a, const torch::Tensor& b) {
  return a.size(0) == b.size(0) || (b.size(0) > 0 && a.size(0) % b.size(0) == 0);
}

// b with one row per row of a.
torch::Tensor per_row(const torch::Tensor& a, const torch::Tensor& b) {
  return a.dim() == b.dim() && a.size(0) != b.size(0) && grouped(a, b) ? b.repeat_interleave(a.size(0) / b.size(0), 0)
                                                                      : b;
}

// Whether the loops take a [..., 1, .] by b: float32 CPU tensors (b also bfloat16 where
// `bf16_ok`), b's rows shared by groups of a's (unless `any_rows`: the rows are found otherwise,
// through a table), the other leading dimensions equal, b's last dimension contiguous.
bool loop_applies(const torch::Tensor& a, const torch::Tensor& b, bool any_rows = false, bool bf16_ok = false) {
  const bool b_type = b.scalar_type() == torch::kFloat || (bf16_ok && b.scalar_type() == torch::kBFloat16);
  if (!a.is_cpu() || !b.is_cpu() || a.scalar_type() != torch::kFloat || !b_type) return false;
  if (a.dim() != b.dim() || (a.dim() != 3 && a.dim() != 4) || a.size(-2) != 1) return false;
  if (!any_rows && !grouped(a, b)) return false;
  for (int64_t i = 1; i + 2 < a.dim(); ++i) {
    if (a.size(i) != b.size(i)) return false;  // broadcast leading dimensions: the reference
  }
  if (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) return false;
  return b.stride(-1) == 1 || b.size(-1) == 1;
}

// Whether q's rows are queries of k's width with a contiguous last dimension.
bool query_fits(const torch::Tensor& q, const torch::Tensor& k) {
  return q.size(-1) == k.size(-1) && (q.stride(-1) == 1 || q.size(-1) == 1);
}

// Whether `origin` is a table of stored rows for `rows` rows and S positions (one_query_attention.h)
// over b [P, H, S, d] for a [rows, H, 1, .], and the loop applies to them whatever their rows.
bool table_fits(const torch::Tensor& origin, const torch::Tensor& a, const torch::Tensor& b, bool bf16_ok = false) {
  if (!origin.is_cpu() || origin.scalar_type() != torch::kLong || !origin.is_contiguous() || origin.dim() != 2 ||
      a.dim() != 4 || b.dim() != 4 || b.size(0) == 0 || a.size(1) != b.size(1) || origin.size(0) != a.size(0) ||
      origin.size(1) != b.size(2)) {
    return false;
  }
  return loop_applies(a, b, true, bf16_ok);
}

// Calls fn(b, h, row) for every (batch, head) row, split over the compute threads when the work is
// large enough. Rows that share keys (a group) follow each other, so the keys are read from memory
// once per group.
template <class F>
void for_rows(int64_t B, int64_t H, int64_t work_per_row, F&& fn) {
  const int64_t rows = B * H;
  parallel_chunks(rows, workers_for(rows * work_per_row, 1 << 16), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r / H, r % H, r);
  });
}

}  // namespace

bool heads_of_64_loops_available() {
#if defined(__x86_64__)
  return avx512_available();
#else
  return false;
#endif
}

void use_heads_of_64_loops(bool on) { heads_of_64_wanted.store(on); }

torch::Tensor one_query_scores_reference(const torch::Tensor& q, const torch::Tensor& k) {
  return (q * per_row(q, k)).sum(-1).unsqueeze(-2);
}

torch::Tensor one_query_context_reference(const torch::Tensor& p, const torch::Tensor& v) {
  return (p.transpose(-1, -2) * per_row(p, v)).sum(-2, true);
}

namespace {

// out[..., 1, width] for one query per row: fn(a's row, the addresses of b's rows of the same
// (batch, head), out's row) for every (batch, head), b's rows shared by groups of a's, or, with an
// origin table ([B, S] stored rows), where the table says.
template <class Row>
torch::Tensor for_each_head_row(const torch::Tensor& a, const torch::Tensor& b, int64_t width, Row&& fn,
                                const int64_t* origin = nullptr) {
  const auto a4 = as_4d(a), b4 = as_4d(b);
  const int64_t B = a4.size(0), H = b4.size(1), group = origin ? 1 : B / b4.size(0);
  auto sizes = a.sizes().vec();
  sizes.back() = width;
  auto out = torch::empty(sizes, a.options());
  const float* ap = a4.data_ptr<float>();
  const float* bp = b4.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t S = b4.size(2);
  for_rows(B, H, S * b4.size(3), [&](int64_t i, int64_t h, int64_t r) {
    thread_local std::vector<const float*> rows;
    rows.resize(S);
    row_addresses(b4, bp, i / group, origin ? origin + i * S : nullptr, h, S, rows.data());
    fn(ap + i * a4.stride(0) + h * a4.stride(1), rows.data(), o + r * width);
  });
  return out;
}

}  // namespace

torch::Tensor one_query_scores(const torch::Tensor& q, const torch::Tensor& k) {
  if (!loop_applies(q, k) || !query_fits(q, k)) return one_query_scores_reference(q, k);
  const int64_t S = k.size(-2), d = k.size(-1);
  return for_each_head_row(q, k, S, [&](const float* qr, const float* const* keys, float* o) {
    dots(qr, keys, S, d, o, false);
  });
}

torch::Tensor one_query_context(const torch::Tensor& p, const torch::Tensor& v) {
  if (!loop_applies(p, v) || p.size(-1) != v.size(-2)) return one_query_context_reference(p, v);
  const int64_t S = v.size(-2), d = v.size(-1), p_stride = p.stride(-1);
  return for_each_head_row(p, v, d, [&](const float* pr, const float* const* values, float* o) {
    weighted_sum(pr, p_stride, values, S, d, o, false);
  });
}

torch::Tensor one_query_context(const torch::Tensor& p, const torch::Tensor& v, const torch::Tensor& v_origin) {
  if (!table_fits(v_origin, p, v) || p.size(-1) != v.size(-2)) return {};
  const int64_t S = v.size(-2), d = v.size(-1), p_stride = p.stride(-1);
  return for_each_head_row(
      p, v, d,
      [&](const float* pr, const float* const* values, float* o) { weighted_sum(pr, p_stride, values, S, d, o, true); },
      v_origin.data_ptr<int64_t>());
}

bool one_query_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& mask, const torch::Tensor& k_origin,
                                 const torch::Tensor& v_origin) {
  if (q.dim() != 4 || k.sizes() != v.sizes() || k.scalar_type() != v.scalar_type() || !query_fits(q, k)) return false;
  if (k_origin.defined() != v_origin.defined()) return false;
  if (k_origin.defined()) {
    // The rows of k and v are where the tables say: any number of them, the other sizes q's.
    if (!table_fits(k_origin, q, k, true) || !table_fits(v_origin, q, v, true)) return false;
  } else if (!loop_applies(q, k, false, true) || !loop_applies(q, v, false, true)) {
    return false;
  }
  if (!mask.defined()) return true;
  return mask.is_cpu() && mask.scalar_type() == torch::kFloat && mask.dim() == 4 && mask.size(1) == 1 &&
         mask.size(2) == 1 && mask.size(3) == k.size(2) && mask.size(0) > 0 && q.size(0) % mask.size(0) == 0 &&
         !(torch::GradMode::is_enabled() && mask.requires_grad());
}

namespace {

// one_query_attention's loops over keys and values of type T (float, or Bf16: a kBFloat16
// tensor's numbers) at kp and vp.
template <class T>
std::tuple<torch::Tensor, torch::Tensor> attend_one_query(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& mask,
                                                          double q_scale, const torch::Tensor& k_origin,
                                                          const torch::Tensor& v_origin, const T* kp, const T* vp) {
  const int64_t B = q.size(0), H = q.size(1), d = q.size(3), S = k.size(2);
  const int64_t group = k_origin.defined() ? 1 : B / k.size(0), mask_group = mask.defined() ? B / mask.size(0) : 1;
  auto context = torch::empty({B, 1, H * d}, q.options());
  auto probs = torch::empty({B, H, 1, S}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* mp = mask.defined() ? mask.data_ptr<float>() : nullptr;
  const int64_t* kop = k_origin.defined() ? k_origin.data_ptr<int64_t>() : nullptr;
  const int64_t* vop = v_origin.defined() ? v_origin.data_ptr<int64_t>() : nullptr;
  float* cp = context.data_ptr<float>();
  float* pp = probs.data_ptr<float>();
  const float scale = static_cast<float>(q_scale);  // as ATen multiplies a float tensor by a scalar
  const int64_t rows = B * H;
  const int64_t q_row = q.stride(0), q_head = q.stride(1), q_step = q.stride(3);
  const int64_t mask_row = mask.defined() ? mask.stride(0) : 0, mask_step = mask.defined() ? mask.stride(3) : 0;
  // A row's heads together: each head's scores, then their softmaxes side by side (a few keys'
  // softmax is a chain of dependent steps, which the core overlaps across heads), then each
  // head's context. Through a table of stored rows, a head's keys are fetched while the head
  // before it is scored, its values while the head before it is summed.
  const bool fetch = kop != nullptr;
  const int64_t workers = workers_for(rows * 2 * S * d, 1 << 16);
  // Row b's query for head h times the scale, into `out` (d floats).
  auto scale_query = [&](int64_t b, int64_t h, float* out) {
    const float* qr = qp + b * q_row + h * q_head;
    for (int64_t j = 0; j < d; ++j) out[j] = qr[j * q_step] * scale;
  };
  // Row b's scores of every head plus its mask, then each head's softmax.
  auto to_probabilities = [&](int64_t b) {
    float* p = pp + b * H * S;
    if (mp) {
      const float* m = mp + b / mask_group * mask_row;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t s = 0; s < S; ++s) p[h * S + s] += m[s * mask_step];
      }
    }
    softmax_rows(p, S, H);
  };
  if (group > 1 && use_heads_of_64(d)) {
    // Rows that share keys and values (a sentence's beams), up to kRowsTogether at a time: each
    // key and value is read once for them all, each row's numbers the same as alone.
    parallel_chunks(B / group, workers, [&](int, int64_t begin, int64_t end) {
      std::vector<float> scaled(kRowsTogether * d);
      std::vector<const T*> keys(S), values(S);
      const float* queries[kRowsTogether];
      float* outs[kRowsTogether];
      const float* weights[kRowsTogether];
      for (int64_t b0 = begin * group, G = 0; b0 < end * group; b0 += G) {
        G = std::min(kRowsTogether, group - b0 % group);
        const int64_t source = b0 / group;
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t g = 0; g < G; ++g) {
            scale_query(b0 + g, h, scaled.data() + g * d);
            queries[g] = scaled.data() + g * d;
            outs[g] = pp + (b0 + g) * H * S + h * S;
          }
          row_addresses(k, kp, source, nullptr, h, S, keys.data());
          const int64_t done = dots_64_rows(G, queries, keys.data(), S, outs);
          const float* const* rest = done < S ? widened(keys.data() + done, S - done, d) : nullptr;
          for (int64_t g = 0; done < S && g < G; ++g) {
            dots_in_fours(queries[g], rest, S - done, d, outs[g] + done, false);
          }
        }
        for (int64_t g = 0; g < G; ++g) to_probabilities(b0 + g);
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t g = 0; g < G; ++g) {
            weights[g] = pp + (b0 + g) * H * S + h * S;
            outs[g] = cp + ((b0 + g) * H + h) * d;
          }
          row_addresses(v, vp, source, nullptr, h, S, values.data());
          weighted_sum_64_rows(G, weights, values.data(), S, outs);
        }
      }
    });
    return {context, probs};
  }
  parallel_chunks(B, workers, [&](int, int64_t begin, int64_t end) {
    std::vector<float> scaled(d);
    std::vector<const T*> rows_now(S), rows_next(S);
    auto find = [&](const torch::Tensor& t, const T* base, const int64_t* origin, int64_t b, int64_t h,
                    std::vector<const T*>& out) {
      row_addresses(t, base, b / group, origin ? origin + b * S : nullptr, h, S, out.data());
      if (fetch) prefetch_rows(out.data(), 0, kPrefetchAhead, S, d);
    };
    for (int64_t b = begin; b < end; ++b) {
      float* p = pp + b * H * S;
      find(k, kp, kop, b, 0, rows_now);
      for (int64_t h = 0; h < H; ++h) {
        scale_query(b, h, scaled.data());
        if (h + 1 < H) find(k, kp, kop, b, h + 1, rows_next);
        dots(scaled.data(), rows_now.data(), S, d, p + h * S, fetch);
        rows_now.swap(rows_next);
      }
      find(v, vp, vop, b, 0, rows_now);
      to_probabilities(b);
      for (int64_t h = 0; h < H; ++h) {
        if (h + 1 < H) find(v, vp, vop, b, h + 1, rows_next);
        weighted_sum(p + h * S, 1, rows_now.data(), S, d, cp + (b * H + h) * d, fetch);
        rows_now.swap(rows_next);
      }
    }
  });
  return {context, probs};
}

}  // namespace

std::tuple<torch::Tensor, torch::Tensor> one_query_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                             const torch::Tensor& v, const torch::Tensor& mask,
                                                             double q_scale, const torch::Tensor& k_origin,
                                                             const torch::Tensor& v_origin) {
  if (!one_query_attention_applies(q, k, v, mask, k_origin, v_origin)) return {};
  if (k.scalar_type() == torch::kBFloat16) {
    return attend_one_query(q, k, v, mask, q_scale, k_origin, v_origin,
                            reinterpret_cast<const Bf16*>(k.data_ptr<c10::BFloat16>()),
                            reinterpret_cast<const Bf16*>(v.data_ptr<c10::BFloat16>()));
  }
  return attend_one_query(q, k, v, mask, q_scale, k_origin, v_origin, k.data_ptr<float>(), v.data_ptr<float>());
}

}  // namespace leanseq::kernels

#undef LEANSEQ_CLONES
