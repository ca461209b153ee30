// Linear layers in 8-bit integers: weights quantized once per output row (symmetric, int8, a
// float scale per row), activations quantized per row as they arrive, the integer product done by
// oneDNN's u8 x s8 -> s32 product (its matmul primitive on AMX tiles where the CPU has them, its
// GEMM with AVX-512 VNNI otherwise) and scaled back to float32 in one pass with the bias. This front end is the only code that sees oneDNN; the reference path
// computes the same quantized product exactly with ATen (in float64), for tests.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>

#include "leanseq/core/blas.h"

namespace leanseq::kernels {

// Whether this build has oneDNN (int8_linear throws otherwise).
bool int8_gemm_available();

// The weight in the layout of oneDNN's AMX matmul, packed at its first use there (int8_gemm.cpp).
struct Int8Packed;

// A [N, K] float weight as int8: w[n, k] ~ q[n, k] * scale[n], scale[n] = max_k |w[n, k]| / 127.
struct Int8Weight {
  torch::Tensor q;             // [N, K] int8, contiguous
  torch::Tensor scale;         // [N] float32
  torch::Tensor compensation;  // [N] int32: -128 * sum_k q[n, k], for activations shifted to u8
  std::shared_ptr<Int8Packed> packed;  // shared by copies; filled when the AMX matmul first runs
  int64_t out_features() const { return q.size(0); }
  int64_t in_features() const { return q.size(1); }
};

// Quantizes each output row of a 2-D float weight (an all-zero row gets scale 1).
Int8Weight quantize_weight(const torch::Tensor& weight);
// The same from stored int8 values and scales (a quantized checkpoint).
Int8Weight int8_weight_from(torch::Tensor q, torch::Tensor scale);
// q * scale, as float32 [N, K].
torch::Tensor dequantize(const Int8Weight& w);

// How the activations of int8_linear are quantized: per row, symmetric to [-127, 127], then
// - u8_shifted: shifted by 128 to u8 for oneDNN's u8 x s8 product (the shift is undone with the
//   weight's compensation: VNNI multiplies u8 by s8 natively);
// - s8: passed as s8 to its s8 x s8 product;
// - u8_split: for CPUs without VNNI. There oneDNN multiplies bytes with vpmaddubsw, which adds two
//   u8 x s8 products in 16 bits and saturates (2 x 255 x 127 > 32767), and u8_shifted and s8 (which
//   oneDNN shifts to u8 itself) lose precision. Each activation q is split as q = 2h + l with
//   h = q >> 1 in [-64, 63] (shifted by 64 to [0, 127]) and l = q & 1, and two u8 x s8 products
//   whose pair sums stay under 2^15 give 2 (h w) + (l w) = q w exactly, at twice the work. At a
//   decoding step's few rows (2M up to 64) the high halves and the low bits, stacked, go through
//   one GEMM of 2M rows, which reads the weight once; past that, two GEMMs of M rows.
// Every form gives the same integers as int8_linear_reference.
enum class Int8Activations { u8_shifted, s8, u8_split };

// The form int8_linear uses by default on a CPU: u8_shifted with VNNI (AVX512_VNNI or AVX-VNNI),
// u8_split without.
Int8Activations default_int8_activations(const CpuVectorSupport& cpu);
// What this CPU runs as oneDNN runs on it: a feature above ONEDNN_MAX_CPU_ISA's cap counts as
// absent (its products would fail, or saturate as without VNNI).
CpuVectorSupport onednn_cpu_support();
// The form for this CPU as oneDNN runs on it (detected once).
Int8Activations default_int8_activations();

// int8_linear's u8_shifted products (CPUs with VNNI or AMX) go through oneDNN's int8 matmul
// primitive on the weight packed once in the layout the primitive asks for, rather than its GEMM
// API, which packs the weight again at every call: on AMX tiles (Sapphire Rapids and later) 3-5x
// the GEMM API on one core, which has no AMX kernel in oneDNN 2.6; with AVX-512 VNNI 2-3x at a
// decoding step's few rows and as fast at many (docs/benchmarks/decoding.md). The primitive is
// made per row count, rounded up to 16 rows past 64 so that a decoding run needs few of them, and
// cached. The integers, and so the floats, are the GEMM API's.
// Whether oneDNN runs that primitive on AMX tiles on this CPU (probed once).
bool int8_amx_available();
// Whether int8_linear's u8_shifted products use the packed weights now (not turned off);
// use_packed_int8(false) keeps the GEMM API, for tests and benchmarks that compare the two in one
// process.
bool packed_int8_in_use();
void use_packed_int8(bool on);
// The threads an int8 product of `rows` rows runs on: one below 16 rows, the calling thread's
// OpenMP team size (omp_get_max_threads()) from there on.
int int8_product_threads(int64_t rows);
// One line for logs: the oneDNN product int8_linear runs.
std::string int8_products_summary();

// x [..., K] float32 times the weight's transpose, plus `bias` ([N] or undefined): [..., N] float32.
torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias,
                          Int8Activations act = default_int8_activations());
// relu(int8_linear(x, w, bias)), the relu applied while scaling back (a feed-forward layer's first
// product).
torch::Tensor int8_linear_relu(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias);
// log_softmax(int8_linear(x, w, bias), -1), each row's log-probabilities taken as soon as it is
// scaled back (kernels::log_softmax_row, in cache), not in a second pass over the whole product:
// the same floats. A decoding step's output layer at a batch's rows is megabytes.
torch::Tensor int8_linear_log_softmax(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias);
// The same quantization and the integer product in float64 with ATen: the reference.
torch::Tensor int8_linear_reference(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias);

}  // namespace leanseq::kernels
