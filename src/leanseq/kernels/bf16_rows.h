// Rows of float32 and bfloat16 converted on the CPU, one thread each call: widening (a bfloat16's
// bits are a float32's high half) and rounding to the nearest even as c10::BFloat16 rounds (NaN
// to its quiet NaN), so that a kernel's own conversion gives the bits ATen's cast would.
// Vectorised for AVX-512 and AVX2 (chosen when the program starts).
#pragma once
#include <cstdint>

namespace leanseq::kernels {

void widen_bf16_row(const uint16_t* in, float* out, int64_t n);
void round_to_bf16_row(const float* in, uint16_t* out, int64_t n);
// Many short rows in one call (each call of the above dispatches to its CPU's version): `count`
// rows of n numbers, row r from in[r] (widening) or in + r * in_stride (rounding) into out +
// r * out_stride (in numbers).
void widen_bf16_rows(const uint16_t* const* in, int64_t count, int64_t n, float* out, int64_t out_stride);
void round_to_bf16_rows(const float* in, int64_t in_stride, uint16_t* out, int64_t out_stride, int64_t count,
                        int64_t n);
// sums[i] += in[i] widened: a bfloat16 row added into float32 sums.
void add_bf16_row(const uint16_t* in, float* sums, int64_t n);

}  // namespace leanseq::kernels
