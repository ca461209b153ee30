// Float32 linear layers at inference on oneDNN's sgemm. A decoding step multiplies a few rows
// (beam x sentences) by a layer's weight: there OpenBLAS, behind ATen's products, spends more on
// waking its threads and packing the weight than on the product, and oneDNN's sgemm is 2-7x faster
// on 2 threads (bench/gemm_bench.cpp, docs/performance.md). With more rows (a large batch, the
// encoder) the two libraries multiply about as fast, but oneDNN runs on the OpenMP threads of
// ATen's element-wise operators, so a step does not hand its work back and forth between two
// thread pools: decoding a batch of 64 at beam 5 was 7-12% faster with every product on oneDNN.
// LEANSEQ_ONEDNN_ROWS=N sends only products of at most N rows there (0: none). There, by default,
// oneDNN's matmul reads each weight packed once rather than the sgemm reading it as it is
// (kernels/packed_products.h; LEANSEQ_PACKED_WEIGHTS=0: the sgemm).
// In training (autograd recording), a linear layer's forward product and both of its gradients'
// go to oneDNN's sgemm by default: at a training batch's shapes it is as fast or faster than
// OpenBLAS, and it runs on the OpenMP threads ATen's element-wise operators use, so a step does
// not hand its work back and forth between two thread pools (docs/performance.md).
#pragma once
#include <torch/torch.h>

#include <string>

namespace leanseq::kernels {

// x [..., K] times weight [N, K] transposed, plus bias ([N] or undefined): [..., N]. oneDNN's
// sgemm when x and the weight are float32 CPU tensors and either no gradient is recorded and the
// product has at most onednn_rows() rows, or autograd records and training_products() is oneDNN
// (then once differentiable: its backward's products are not recorded); ATen's linear otherwise
// (and in a build without oneDNN).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// relu(linear(x, weight, bias)). When no gradient is recorded and there is a bias, one operator
// past the rows oneDNN takes (ATen's _addmm_activation: on CUDA one GEMM with the bias and the
// ReLU in its epilogue).
torch::Tensor linear_relu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// The same product through oneDNN whatever its size (float32 CPU tensors, no autograd): its matmul
// on the packed weight when packed_weights() is on and the store takes the weight, its sgemm otherwise;
// an undefined tensor in a build without oneDNN or when oneDNN refuses it. Profilers and operator
// counts see it as the operator `leanseq::onednn_linear`.
torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// c [m, n] = op(a) op(b) through oneDNN's sgemm, op transposing where its flag is 'T' (so that
// the three products of a linear layer's training, y = x w^T, dx = dy w and dw = dy^T x, are
// ('N', 'T'), ('N', 'N') and ('T', 'N')): contiguous non-empty 2-D float32 CPU tensors of matching
// sizes, no autograd. False, writing nothing, for other operands or in a build without oneDNN.
// Benchmarks time a training update's product shapes alone with it (kernels/product_flops.h).
bool onednn_sgemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c);

// The most rows a product may have to go to oneDNN: LEANSEQ_ONEDNN_ROWS from the environment when
// set (0: never), no limit (the largest int64_t) otherwise; 0 in a build without oneDNN. set_onednn_rows() changes it for the
// process (benchmarks compare both backends in one invocation).
int64_t onednn_rows();
void set_onednn_rows(int64_t rows);
// LEANSEQ_ONEDNN_ROWS's value read (nullptr: unset, the default); throws ConfigError naming the
// variable for anything but a non-negative integer. `leanseq` reads it before any command runs.
int64_t parse_onednn_rows(const char* text);

// Which library takes the products of training's linear layers: LEANSEQ_TRAINING_PRODUCTS from
// the environment (onednn or aten), oneDNN by default; ATen in a build without oneDNN.
// set_training_products() changes it for the process (benchmarks compare both in one invocation).
enum class TrainingProducts { aten, onednn };
TrainingProducts training_products();
void set_training_products(TrainingProducts products);
// LEANSEQ_TRAINING_PRODUCTS's value read (nullptr: unset, the default); throws ConfigError naming
// the variable for anything but onednn or aten. `leanseq` reads it before any command runs.
TrainingProducts parse_training_products(const char* text);

// One line for start-up logs: which backend takes which products.
std::string dense_products_summary();
// The same for training: which library takes a linear layer's products and their gradients'.
std::string training_products_summary();

}  // namespace leanseq::kernels
