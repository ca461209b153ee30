#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/product_flops.h"

#ifdef LEANSEQ_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "leanseq/kernels/onednn_engine.h"
#endif

#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "leanseq/kernels/exp_avx512.h"
#include "leanseq/kernels/log_softmax.h"
#include "leanseq/kernels/parallel.h"
#include "leanseq/kernels/scratch.h"

namespace leanseq::kernels {

namespace {

// The most rows (high halves and low bits together) the split form multiplies in one GEMM. At a
// decoding step's few rows a product is bound by reading the weight, which one GEMM over both
// halves reads once; past them oneDNN's AVX2 kernel was no faster for it, and at some row counts
// slower, so the halves go in two GEMMs of M rows (docs/benchmarks/performance.md, "int8 without
// VNNI: one GEMM for both halves at few rows").
constexpr int64_t kStackedRowsAtMost = 64;

// The row loops below are compiled for AVX-512 and AVX2 besides the baseline (chosen when the program starts):
// the baseline has no vector rounding, and they would call the C library per element.
#define LEANSEQ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// The symmetric int8 scale of a row of K floats: max |r| / 127 (1 for an all-zero row).
inline float row_scale(const float* r, int64_t K) {
  float amax = 0.f;
#pragma omp simd reduction(max : amax)
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(r[k]));
  return amax > 0.f ? amax / 127.f : 1.f;
}

// One row quantized: o[k] = round(r[k] / s) + shift; returns s.
template <class Out>
inline float quantize_row(const float* __restrict r, int64_t K, Out* __restrict o, int shift) {
  const float s = row_scale(r, K), inv = 1.f / s;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) o[k] = static_cast<Out>(static_cast<int>(std::nearbyint(r[k] * inv)) + shift);
  return s;
}
__attribute__((target_clones("avx2", "default"))) float quantize_row_u8(const float* r, int64_t K, uint8_t* o, int shift) {
  return quantize_row(r, K, o, shift);
}
__attribute__((target_clones("avx2", "default"))) float quantize_row_s8(const float* r, int64_t K, int8_t* o, int shift) {
  return quantize_row(r, K, o, shift);
}

#if defined(__x86_64__)
// The same on AVX-512 (the compiler's clone of the loops above kept 8 lanes and narrowed in steps):
// the largest |r| in four registers, then 16 values at a time rounded to the nearest integer, ties
// to even, as nearbyint in the default rounding mode, shifted and narrowed to their low bytes: the
// bytes quantize_row writes, as uint8 (shift 128) or int8 (shift 0).
__attribute__((target("avx512f"))) float quantize_row_avx512(const float* __restrict r, int64_t K,
                                                             uint8_t* __restrict o, int shift) {
  __m512 m0 = _mm512_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    m0 = _mm512_max_ps(m0, _mm512_abs_ps(_mm512_loadu_ps(r + k)));
    m1 = _mm512_max_ps(m1, _mm512_abs_ps(_mm512_loadu_ps(r + k + 16)));
    m2 = _mm512_max_ps(m2, _mm512_abs_ps(_mm512_loadu_ps(r + k + 32)));
    m3 = _mm512_max_ps(m3, _mm512_abs_ps(_mm512_loadu_ps(r + k + 48)));
  }
  for (; k < K; k += 16) {
    const auto in = K - k >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (K - k)) - 1);
    m0 = _mm512_max_ps(m0, _mm512_abs_ps(_mm512_maskz_loadu_ps(in, r + k)));
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  const float s = amax > 0.f ? amax / 127.f : 1.f;
  const __m512 inv = _mm512_set1_ps(1.f / s);
  const __m512i add = _mm512_set1_epi32(shift);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (k = 0; k + 16 <= K; k += 16) {
    const __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(r + k), inv), kNearest);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + k), _mm512_cvtepi32_epi8(_mm512_add_epi32(q, add)));
  }
  if (k < K) {
    const auto in = static_cast<__mmask16>((1u << (K - k)) - 1);
    const __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, r + k), inv), kNearest);
    _mm512_mask_cvtepi32_storeu_epi8(o + k, in, _mm512_add_epi32(q, add));
  }
  return s;
}
#endif

float quantize_row_any(const float* r, int64_t K, uint8_t* o, int shift) {
#if defined(__x86_64__)
  if (avx512_available()) return quantize_row_avx512(r, K, o, shift);
#endif
  return quantize_row_u8(r, K, o, shift);
}
float quantize_row_any(const float* r, int64_t K, int8_t* o, int shift) {
#if defined(__x86_64__)
  if (avx512_available()) return quantize_row_avx512(r, K, reinterpret_cast<uint8_t*>(o), shift);
#endif
  return quantize_row_s8(r, K, o, shift);
}

// Per-row symmetric quantization of a [M, K] float matrix: writes the int8 values (shifted by
// `shift`, 0 or 128, into the same bytes); scale[m] = max|x[m]| / 127.
template <class Out>
void quantize_rows(const float* x, int64_t M, int64_t K, Out* q, float* scale, int shift) {
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) scale[m] = quantize_row_any(x + m * K, K, q + m * K, shift);
  };
  parallel_chunks(M, workers_for(M * K, 1 << 16), rows);
}

// One row of the u8_split form: q = round(r / s) in [-127, 127] as hi = (q >> 1) + 64 in [0, 127]
// and lo = q & 1; returns s.
LEANSEQ_CLONES float quantize_row_split(const float* __restrict r, int64_t K, uint8_t* __restrict h,
                                        uint8_t* __restrict l) {
  const float s = row_scale(r, K), inv = 1.f / s;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) {
    const int q = static_cast<int>(std::nearbyint(r[k] * inv));
    h[k] = static_cast<uint8_t>((q >> 1) + 64);  // arithmetic shift: floor(q / 2)
    l[k] = static_cast<uint8_t>(q & 1);
  }
  return s;
}

// The u8_split form of a [M, K] float matrix, row by row.
void quantize_rows_split(const float* x, int64_t M, int64_t K, uint8_t* hi, uint8_t* lo, float* scale) {
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) scale[m] = quantize_row_split(x + m * K, K, hi + m * K, lo + m * K);
  };
  parallel_chunks(M, workers_for(M * K, 1 << 16), rows);
}

// max(0, o) over a row, in cache after scale_row wrote it (a feed-forward layer's first product).
LEANSEQ_CLONES void relu_row(float* __restrict o, int64_t N) {
#pragma omp simd
  for (int64_t n = 0; n < N; ++n) o[n] = o[n] > 0.f ? o[n] : 0.f;
}

// One output row back in float32 from its accumulators: a = acc[n], or 2 acc[n] + lo[n] in the
// u8_split form (the high halves' product doubled plus the low bits'), plus offset[n]; then
// o[n] = a * s * ws[n] + bias[n]. `lo`, `offset` and `bias` may be absent (nullptr); the integer
// sum is exact (|a| < 2^31), so it gives the same floats as combining the accumulators first.
// o may be acc itself (each number read before its own place is written, nothing else shared).
template <bool Lo, bool Offset, bool Bias>
__attribute__((always_inline)) inline void scale_row_with(const int32_t* acc, const int32_t* __restrict lo,
                                                          const int32_t* __restrict offset, float s,
                                                          const float* __restrict ws, const float* __restrict bias,
                                                          float* o, int64_t N) {
#pragma omp simd
  for (int64_t n = 0; n < N; ++n) {
    int32_t a = Lo ? 2 * acc[n] + lo[n] : acc[n];
    if (Offset) a += offset[n];
    const float v = static_cast<float>(a) * (s * ws[n]);
    o[n] = Bias ? v + bias[n] : v;
  }
}

LEANSEQ_CLONES void scale_row(const int32_t* acc, const int32_t* lo, const int32_t* offset, float s, const float* ws,
                              const float* bias, float* o, int64_t N) {
  if (lo) {  // the split form: its offset is always the weight's compensation
    if (bias) {
      scale_row_with<true, true, true>(acc, lo, offset, s, ws, bias, o, N);
    } else {
      scale_row_with<true, true, false>(acc, lo, offset, s, ws, bias, o, N);
    }
  } else if (offset && bias) {
    scale_row_with<false, true, true>(acc, lo, offset, s, ws, bias, o, N);
  } else if (offset) {
    scale_row_with<false, true, false>(acc, lo, offset, s, ws, bias, o, N);
  } else if (bias) {
    scale_row_with<false, false, true>(acc, lo, offset, s, ws, bias, o, N);
  } else {
    scale_row_with<false, false, false>(acc, lo, offset, s, ws, bias, o, N);
  }
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

#ifdef LEANSEQ_WITH_DNNL
// oneDNN's int8 matmul for [M, K] u8 activations and a [K, N] s8 weight into [M, N] s32, with the
// weight in whatever layout the primitive asks for, and the scratchpad it needs: the caller's, as
// one primitive runs on several threads at once (translate --workers, serve's workers), and
// oneDNN's own scratchpad is one per primitive in Debian's build.
struct Int8Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, dst, scratchpad;
};

dnnl::matmul::primitive_desc int8_matmul_desc(int64_t M, int64_t K, int64_t N) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc src({M, K}, dt::u8, tag::ab), weights({K, N}, dt::s8, tag::any), dst({M, N}, dt::s32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, onednn_cpu_engine());
}

// The primitive for M rows (already rounded), made once per shape; the cache is emptied when it
// holds 512, which a translation run does not reach.
std::shared_ptr<const Int8Matmul> int8_matmul(int64_t M, int64_t K, int64_t N) {
  static PrimitiveCache<std::tuple<int64_t, int64_t, int64_t>, Int8Matmul> cache(512);
  return cache.get(std::make_tuple(M, K, N), [&] {
    const auto pd = int8_matmul_desc(M, K, N);
    return Int8Matmul{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()};
  });
}

// Accumulators of at least this many bytes are scaled back in place (int8_product): above what
// a core's nearest caches keep, where a second buffer of that size would be read from memory.
constexpr int64_t kInPlaceFromBytes = int64_t{1} << 20;

// Rows the primitive is made for: M up to 64, then M rounded up to a multiple of 16.
int64_t packed_rows(int64_t M) { return M <= 64 ? M : (M + 15) / 16 * 16; }

bool probe_amx() {
  try {
    return std::string(int8_matmul_desc(64, 256, 256).impl_info_str()).find("amx") != std::string::npos;
  } catch (const std::exception&) {
    return false;
  }
}
#else
bool probe_amx() { return false; }
#endif

std::atomic<bool> packed_wanted{true};

}  // namespace

// The packed weight: its layout (that of the primitives made for it) and the memory in it.
struct Int8Packed {
#ifdef LEANSEQ_WITH_DNNL
  std::once_flag once;
  dnnl::memory weights;
#endif
};

namespace {

#ifdef LEANSEQ_WITH_DNNL
// The weight reordered into `layout` once; an empty memory when a later primitive wants another
// layout (int8_linear then takes the GEMM API).
const dnnl::memory* packed_weight(const Int8Weight& w, const dnnl::memory::desc& layout) {
  Int8Packed& p = *w.packed;
  std::call_once(p.once, [&] {
    using dt = dnnl::memory::data_type;
    const int64_t N = w.out_features(), K = w.in_features();
    dnnl::memory plain({{K, N}, dt::s8, dnnl::memory::format_tag::ba}, onednn_cpu_engine(), w.q.data_ptr<int8_t>());
    p.weights = dnnl::memory(layout, onednn_cpu_engine());
    dnnl::stream stream(onednn_cpu_engine());
    dnnl::reorder(plain, p.weights).execute(stream, plain, p.weights);
    stream.wait();
  });
  return p.weights.get_desc() == layout ? &p.weights : nullptr;
}

// acc[:M] = xq w^T on the packed weight (M rows of xq, which has rows = packed_rows(M)); false
// when the weight's layout does not fit the primitive.
bool packed_product(uint8_t* xq, int64_t M, int64_t rows, const Int8Weight& w, int32_t* acc) {
  const int64_t K = w.in_features(), N = w.out_features();
  const auto mm = int8_matmul(rows, K, N);
  const dnnl::memory* weights = packed_weight(w, mm->weights);
  if (!weights) return false;
  if (rows > M) std::memset(xq + M * K, 128, (rows - M) * K);  // the padding rows: zeros once shifted
  thread_local Scratch scratch;
  execute_on_this_thread(mm, mm->primitive,
                         {{DNNL_ARG_SRC, nullptr, &mm->src, xq},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_DST, nullptr, &mm->dst, acc},
                          {DNNL_ARG_SCRATCHPAD, nullptr, &mm->scratchpad, scratch.at(mm->scratchpad.get_size())}});
  return true;
}
#endif

}  // namespace

Int8Activations default_int8_activations(const CpuVectorSupport& cpu) {
  return cpu.avx512vnni || cpu.avxvnni ? Int8Activations::u8_shifted : Int8Activations::u8_split;
}

CpuVectorSupport onednn_cpu_support() {
  auto cpu = detect_cpu_vector_support();
#ifdef LEANSEQ_WITH_DNNL
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  auto reaches = [isa](dnnl::cpu_isa level) {
    const auto bits = static_cast<unsigned>(level);
    return (isa & bits) == bits;
  };
  const bool avx512 = reaches(dnnl::cpu_isa::avx512_core);
  cpu.avx512f = cpu.avx512f && avx512;
  cpu.avx512bw = cpu.avx512bw && avx512;
  cpu.avx512vl = cpu.avx512vl && avx512;
  cpu.avx512dq = cpu.avx512dq && avx512;
  cpu.avx512cd = cpu.avx512cd && avx512;
  cpu.avx512vnni = cpu.avx512vnni && reaches(dnnl::cpu_isa::avx512_core_vnni);
  cpu.avxvnni = cpu.avxvnni && reaches(dnnl::cpu_isa::avx2_vnni);
  cpu.avx512bf16 = cpu.avx512bf16 && reaches(dnnl::cpu_isa::avx512_core_bf16);
  cpu.amx_int8 = cpu.amx_int8 && reaches(dnnl::cpu_isa::avx512_core_amx);
#endif
  return cpu;
}

Int8Activations default_int8_activations() {
  static const Int8Activations form = default_int8_activations(onednn_cpu_support());
  return form;
}

bool int8_amx_available() {
  static const bool available = probe_amx();
  return available;
}

bool packed_int8_in_use() { return packed_wanted.load(); }

void use_packed_int8(bool on) { packed_wanted.store(on); }

int int8_product_threads(int64_t rows) {
  // A few rows' product split between two threads took longer than on one (one sentence at a
  // time, beam 5, two threads: the whole translation 0.64x as fast as at one thread; two sentences
  // at a time 0.9x), while from 40 rows on the team gains (docs/benchmarks/decoding.md).
  constexpr int64_t kOneThreadBelowRows = 16;
  return rows < kOneThreadBelowRows ? 1 : omp_get_max_threads();
}

std::string int8_products_summary() {
  if (!int8_gemm_available()) return "no int8 products (a build without oneDNN)";
  if (default_int8_activations() == Int8Activations::u8_split) {
    return "int8 products: oneDNN GEMM, activations split in two (no VNNI on this CPU)";
  }
  if (!packed_int8_in_use()) return "int8 products: oneDNN GEMM (VNNI)";
  return int8_amx_available() ? "int8 products: oneDNN matmul on packed weights, AMX tiles"
                              : "int8 products: oneDNN matmul on packed weights (VNNI)";
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
  w.packed = std::make_shared<Int8Packed>();
  return w;
}

torch::Tensor dequantize(const Int8Weight& w) { return w.q.to(torch::kFloat) * w.scale.unsqueeze(1); }

namespace {

// What the pass that scales a row back does to it next, while the row is in cache.
enum class Epilogue { none, relu, log_softmax };

torch::Tensor int8_product(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias, Int8Activations act,
                           Epilogue then) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "int8_linear takes float32 CPU input");
  const int64_t K = w.in_features(), N = w.out_features();
  TORCH_CHECK(x.size(-1) == K, "int8_linear: input has ", x.size(-1), " features, the weight ", K);
  // The rows of x as they are, and the result in its final shape: no reshape, view or conversion
  // where none is needed, as a decoding step makes some twenty of these products.
  const auto in = x.contiguous();
  TORCH_CHECK(K > 0, "int8_linear: the weight has no input features");
  const int64_t M = in.numel() / K;
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  if (M == 0) return torch::empty(sizes, torch::kFloat);
  count_product({'N', 'T', M, N, K, true});

#ifndef LEANSEQ_WITH_DNNL
  (void)act, (void)then;
  throw std::runtime_error("int8 products need oneDNN, which this build lacks");
#else
  const TeamSize team(int8_product_threads(M));
  const bool packed = act == Int8Activations::u8_shifted && packed_int8_in_use() && w.packed;
  const int64_t acc_rows = packed ? packed_rows(M) : M;  // the matmul primitive's rows, padding included
  // The accumulators of a wide product (the output projection at a batch's rows, megabytes) go
  // where the output goes, each int32 scaled back over itself: one buffer passes through the
  // caches, not two. A narrower one's go to this thread's scratch, reused by the next product and
  // so already in cache, with the row scales and the quantized rows; so do the split form's, which
  // stacks its high halves over its low bits (2M x K) and its accumulators the same way (2M x N).
  const bool split = act == Int8Activations::u8_split;
  const int64_t stacked = split ? 2 : 1;
  static_assert(sizeof(int32_t) == sizeof(float), "accumulators are scaled back over themselves");
  const bool in_place = !split && acc_rows * N * static_cast<int64_t>(sizeof(int32_t)) >= kInPlaceFromBytes;
  const auto held = torch::empty(in_place ? std::vector<int64_t>{acc_rows, N} : sizes, torch::kFloat);
  const auto out = in_place ? held.narrow(0, 0, M).view(sizes) : held;
  const size_t scale_bytes = aligned_size(M * sizeof(float)),
               acc_bytes = in_place ? 0 : aligned_size(stacked * acc_rows * N * sizeof(int32_t)),
               q_bytes = aligned_size(stacked * acc_rows * K), total = scale_bytes + acc_bytes + q_bytes;
  thread_local Scratch kept;
  Scratch own;
  auto* base = static_cast<uint8_t*>((total <= Scratch::kept_at_most ? kept : own).at(total));
  auto* xs = reinterpret_cast<float*>(base);
  auto* acc = reinterpret_cast<int32_t*>(in_place ? static_cast<void*>(held.data_ptr<float>()) : base + scale_bytes);
  auto* xq = base + scale_bytes + acc_bytes;  // u8 or s8 rows; the split form's high halves
  const int8_t* wq = w.q.data_ptr<int8_t>();
  const int32_t* column_offset = nullptr;  // added while scaling back (the packed product's compensation)
  int32_t* acc_lo = nullptr;               // the split form's low-bit accumulators, combined while scaling back
  const float* x_in = in.data_ptr<float>();
  if (act == Int8Activations::u8_shifted) {
    quantize_rows(x_in, M, K, xq, xs, 128);
    // acc = xq * w^T + compensation[n] (per column): (x_s8 + 128) w = x_s8 w + 128 sum_k w.
    if (packed && packed_product(xq, M, acc_rows, w, acc)) {
      column_offset = w.compensation.data_ptr<int32_t>();
    } else {
      check(dnnl_gemm_u8s8s32('N', 'T', 'R', M, N, K, 1.f, xq, K, 0, wq, K, 0, 0.f, acc, N,
                              w.compensation.data_ptr<int32_t>()),
            "u8s8s32 GEMM");
    }
  } else if (split) {
    quantize_rows_split(x_in, M, K, xq, xq + M * K, xs);
    // Rows m of acc = (h + 64) w and rows M + m = l w; scale_row makes 2 acc + acc_lo + compensation
    // = 2 (h w) + l w (the compensation being -128 sum_k w), in the pass that scales the rows back.
    acc_lo = acc + M * N;
    const int32_t zero = 0;
    if (2 * M <= kStackedRowsAtMost) {  // a decoding step's few rows: one GEMM reads the weight once
      check(dnnl_gemm_u8s8s32('N', 'T', 'F', 2 * M, N, K, 1.f, xq, K, 0, wq, K, 0, 0.f, acc, N, &zero),
            "u8s8s32 GEMM (high bits over low bits)");
    } else {
      check(dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.f, xq, K, 0, wq, K, 0, 0.f, acc, N, &zero),
            "u8s8s32 GEMM (high bits)");
      check(dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.f, xq + M * K, K, 0, wq, K, 0, 0.f, acc_lo, N, &zero),
            "u8s8s32 GEMM (low bit)");
    }
    column_offset = w.compensation.data_ptr<int32_t>();
  } else {
    auto* xq_s8 = reinterpret_cast<int8_t*>(xq);
    quantize_rows(x_in, M, K, xq_s8, xs, 0);
    const int32_t zero = 0;
    check(dnnl_gemm_s8s8s32('N', 'T', 'F', M, N, K, 1.f, xq_s8, K, 0, wq, K, 0, 0.f, acc, N, &zero), "s8s8s32 GEMM");
  }

  const float* ws = w.scale.data_ptr<float>();
  torch::Tensor b = bias;
  if (b.defined() && (b.scalar_type() != torch::kFloat || !b.is_contiguous())) {
    b = b.detach().to(torch::kFloat).contiguous();
  }
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* o = out.data_ptr<float>();
  auto rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      scale_row(acc + m * N, acc_lo ? acc_lo + m * N : nullptr, column_offset, xs[m], ws, bp, o + m * N, N);
      if (then == Epilogue::relu) relu_row(o + m * N, N);
      if (then == Epilogue::log_softmax) log_softmax_row(o + m * N, N, o + m * N);
    }
  };
  parallel_chunks(M, workers_for(M * N, 1 << 16), rows);
  return out;
#endif
}

}  // namespace

torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias, Int8Activations act) {
  return int8_product(x, w, bias, act, Epilogue::none);
}

torch::Tensor int8_linear_relu(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias) {
  return int8_product(x, w, bias, default_int8_activations(), Epilogue::relu);
}

torch::Tensor int8_linear_log_softmax(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias) {
  return int8_product(x, w, bias, default_int8_activations(), Epilogue::log_softmax);
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

#undef LEANSEQ_CLONES
