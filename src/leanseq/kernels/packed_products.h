// Float32 products at inference on a oneDNN primitive, each weight reordered once into the
// blocked layout the primitive reads (and kept while the weight lives and is not modified). Where
// oneDNN's sgemm re-reads a transposed weight row by row on every call, the primitive streams the
// packed copy: at a decoding step's few rows (beam x sentences) a product takes about half the time
// of the sgemm's on 2 AVX-512 cores, and never more at a batch's or the encoder's rows
// (docs/benchmarks/performance.md, "Packed float32 weights"). The primitive is oneDNN's matmul
// where it runs its brgemm kernels (AVX-512 and up), and elsewhere (AVX2) a 1x1 convolution over
// the rows taken as positions: there the matmul is the sgemm itself, whose sums change with the
// number of rows, and the convolution's direct kernel was also the faster of the two from 5 rows
// on, the slower at a single row (docs/benchmarks/performance.md, "Packed weights on AVX2").
//
// A row's result does not depend on how many rows are multiplied with it (products are cut into
// pieces of at most 512 rows, then a multiple of 64, then the rest, each piece the same kernel
// over its own rows), so batching never changes a translation. The packed copies are held in one
// process-wide store, keyed by the weight's storage, address, shape and version: a weight modified
// in place (its version bumped, as ATen's in-place operators and train/'s optimizers do) is packed
// again, and a weight freed frees its copy at the next packing. A weight is packed at its first
// product: a model's copies (as much memory again as its float32 weights that its products read)
// are made by its first translation. A tensor made in inference mode has no version; as a weight
// (a derived one: ConvS2S's normalised weights, a shortlist's rows) it is taken as never modified
// in place. The store holds at most LEANSEQ_PACKED_WEIGHTS_MB (4096 by default) of copies; a
// weight past that is multiplied by the sgemm unpacked.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace leanseq::kernels {

// rows [M, K] (contiguous float32 CPU) times weight [N, K] (contiguous float32 CPU) transposed,
// plus bias ([N] contiguous float32, or undefined): [M, N]. Undefined, having computed nothing,
// when packed weights are off, in a build without oneDNN, when the store is full, or when oneDNN
// refuses; the caller then takes the sgemm. Records no gradient (for inference only).
torch::Tensor packed_product(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias);

// Whether inference's float32 products use packed weights: LEANSEQ_PACKED_WEIGHTS from the
// environment (1 or 0), on by default; off in a build without oneDNN. set_packed_weights()
// changes it for the process (benchmarks compare both in one invocation).
bool packed_weights();
void set_packed_weights(bool on);
// LEANSEQ_PACKED_WEIGHTS's value read (nullptr: unset, the default); throws ConfigError naming the
// variable for anything but 1 or 0. `leanseq` reads it before any command runs.
bool parse_packed_weights(const char* text);
// LEANSEQ_PACKED_WEIGHTS_MB read the same way: a whole number of MiB, at least 1 (nullptr: 4096).
int64_t parse_packed_weights_limit(const char* text);

// The primitive that multiplies by the packed weights on this CPU: "matmul" or "1x1 convolution"
// (for logs); "sgemm" in a build without oneDNN.
const char* packed_primitive();

// The store's content now: packed weights and their bytes (weights freed but not yet swept count
// until the next packing sweeps them).
struct PackedStore {
  int64_t weights = 0, bytes = 0;
};
PackedStore packed_store();
// The most bytes of copies the store holds, for the process (tests): LEANSEQ_PACKED_WEIGHTS_MB
// until set. A smaller limit packs no more weights until copies are freed.
void set_packed_store_limit(int64_t bytes);
// Drops every packed copy (tests; products in flight keep theirs until they end).
void clear_packed_store();

}  // namespace leanseq::kernels
