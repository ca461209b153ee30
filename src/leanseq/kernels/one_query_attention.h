// Attention's two products for one query per row on the CPU (a decoding step): scores = q k^T and
// context = p v without the [..., S, d] elementwise product that composing ATen operators
// materialises (at beam 5 x 64 sentences that tensor is tens of megabytes per layer and step, and
// writing and re-reading it was a third of a transformer's decoding step).
//
// Each output is a dot product (or a weighted sum over the keys) in a fixed order that does not
// depend on the batch, nor on padded keys after a sentence's own (weights exactly 0), so a
// sentence decodes the same alone or batched.
#pragma once
#include <torch/torch.h>

#include <tuple>

namespace leanseq::kernels {

// q [B, H, 1, d] or [B, 1, d]; k [B, H, S, d] or [B, S, d] with the same leading sizes: [..., 1, S].
// k's first dimension may also be B / r: then r consecutive rows of q share a row of k (the beams
// of a sentence share its source's keys), as if k were repeated r times row by row. The loop runs
// for float32 CPU tensors whose last dimension is contiguous while no gradient is recorded;
// otherwise (and where other leading sizes differ, i.e. broadcast) the reference.
torch::Tensor one_query_scores(const torch::Tensor& q, const torch::Tensor& k);

// p [B, H, 1, S] or [B, 1, S]; v [B, H, S, d] or [B, S, d] (or B / r rows, as above): [..., 1, d].
// The same conditions (v's last dimension contiguous; p's strides are free).
torch::Tensor one_query_context(const torch::Tensor& p, const torch::Tensor& v);

// one_query_context for p [B, H, 1, S] with v's rows where a table says (v [P, H, S, d], any P; row
// b's value at position s in row v_origin[b, s], as in one_query_attention below); an undefined
// tensor where the loop does not apply.
torch::Tensor one_query_context(const torch::Tensor& p, const torch::Tensor& v, const torch::Tensor& v_origin);

// A whole decoding step's attention per (row, head) in one pass: probs = softmax(q_scale * q k^T +
// mask) and context = probs v, without the ATen operators between the two products (mask addition,
// softmax, the heads' transpose), each a pass and, above ATen's grain size, a wake-up of its
// threads; its softmax is kernels/softmax.h's softmax_row. q [B, H, 1, d]; k, v [B / r, H, S, d]
// (groups as above); mask undefined or additive float [B / m, 1, 1, S] (broadcast over the heads,
// groups of m rows). With origin tables ([B, S] int64, contiguous, both or neither), k and v have
// any number of rows and row b's key at position s is in row k_origin[b, s] of k, its value in row
// v_origin[b, s] of v (a self-attention cache reordered without moving its rows,
// nn/incremental_state.h). k and v may also both be bfloat16 (an int8 model's caches): each number
// is widened as it is loaded, the results those of float32 k and v holding the widened numbers.
// Returns the context as [B, 1, H * d] (the heads side by side, as the output projection takes
// them) and probs [B, H, 1, S]; undefined tensors where one_query_attention_applies() is false.
bool one_query_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& mask, const torch::Tensor& k_origin = {},
                                 const torch::Tensor& v_origin = {});
std::tuple<torch::Tensor, torch::Tensor> one_query_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                             const torch::Tensor& v, const torch::Tensor& mask,
                                                             double q_scale, const torch::Tensor& k_origin = {},
                                                             const torch::Tensor& v_origin = {});

// Heads of 64 numbers go through loops written for AVX-512 where the CPU has it: the same sums in
// the same order as the general loops, so the same bits, in fewer instructions. Off (tests and
// benchmarks compare the two), every width takes the general loops.
bool heads_of_64_loops_available();
void use_heads_of_64_loops(bool on);

// The composites of ATen operators (elementwise product and sum): the tests' reference.
torch::Tensor one_query_scores_reference(const torch::Tensor& q, const torch::Tensor& k);
torch::Tensor one_query_context_reference(const torch::Tensor& p, const torch::Tensor& v);

}  // namespace leanseq::kernels
