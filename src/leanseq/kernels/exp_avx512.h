// exp over the 16 floats of an AVX-512 register, inline, a row's maximum before it, and whether
// the CPU runs them: the exponentials of a softmax row without a call into the vector maths
// library per 16 numbers. exp(x) = 2^n e^r with n = round(x log2 e) and r = x - n ln 2 (ln 2 in
// two parts, the first exact in float), e^r by a polynomial of degree 7 about 0 (relative error
// about 1e-7, a unit or two of float32 rounding, as libm's). exp(0) is 1 and exp(-inf) is 0
// exactly (x is first raised to -110, whose 2^n is far below the smallest float), so masked
// entries add nothing.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace leanseq::kernels {

// Whether this CPU runs AVX-512 code (AVX512F, as the compiler and the operating system see it),
// asked once: what the kernels' AVX-512 loops are chosen by.
inline bool avx512_available() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

__attribute__((target("avx512f"), always_inline)) inline __m512 exp_avx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-110.f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

// The largest of n floats (n >= 1), the row's last n % 16 read under a mask (-inf elsewhere).
__attribute__((target("avx512f"), always_inline)) inline float row_max_avx512(const float* x, int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t whole = n - n % 16;
  __m512 m = lowest;
  for (int64_t j = 0; j < whole; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  if (whole < n) {
    const auto tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(lowest, tail, x + whole));
  }
  return _mm512_reduce_max_ps(m);
}

}  // namespace leanseq::kernels
#endif
