#include "leanseq/kernels/dense.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "leanseq/core/error.h"
#include "leanseq/kernels/bf16_products.h"
#include "leanseq/kernels/packed_products.h"
#include "leanseq/kernels/parallel.h"
#include "leanseq/kernels/product_flops.h"

#ifdef LEANSEQ_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace leanseq::kernels {

namespace {

// Every product at inference by default: measured end to end, a decoding step whose products all
// run on oneDNN's sgemm (on the OpenMP threads of ATen's own operators) is faster than one that
// hands its products of more rows to OpenBLAS's thread pool (docs/performance.md, "Products of a
// decoding step").
constexpr int64_t kDefaultOnednnRows = std::numeric_limits<int64_t>::max();

std::atomic<int64_t>& rows_setting() {
#ifdef LEANSEQ_WITH_DNNL
  static std::atomic<int64_t> rows{parse_onednn_rows(std::getenv("LEANSEQ_ONEDNN_ROWS"))};
#else
  static std::atomic<int64_t> rows{0};
#endif
  return rows;
}

bool records(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return torch::GradMode::is_enabled() &&
         (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
}

bool float_cpu(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; }

std::atomic<TrainingProducts>& training_setting() {
  // Read (and a bad value refused) in any build; a build without oneDNN has only ATen's.
  static std::atomic<TrainingProducts> products{parse_training_products(std::getenv("LEANSEQ_TRAINING_PRODUCTS"))};
#ifndef LEANSEQ_WITH_DNNL
  products.store(TrainingProducts::aten);
#endif
  return products;
}

}  // namespace

TrainingProducts parse_training_products(const char* text) {
  if (!text || std::string(text) == "onednn") return TrainingProducts::onednn;
  if (std::string(text) == "aten") return TrainingProducts::aten;
  throw ConfigError(std::string("LEANSEQ_TRAINING_PRODUCTS=") + text + ": expected onednn or aten");
}

TrainingProducts training_products() { return training_setting().load(); }

void set_training_products(TrainingProducts products) {
#ifdef LEANSEQ_WITH_DNNL
  training_setting().store(products);
#else
  (void)products;
#endif
}

int64_t parse_onednn_rows(const char* text) {
  if (!text) return kDefaultOnednnRows;
  char* end = nullptr;
  errno = 0;
  const long long rows = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || rows < 0 || errno == ERANGE) {
    throw ConfigError(std::string("LEANSEQ_ONEDNN_ROWS=") + text +
                      ": expected a number of rows (0 sends no product to oneDNN)");
  }
  return rows;
}

int64_t onednn_rows() { return rows_setting().load(); }

void set_onednn_rows(int64_t rows) {
#ifdef LEANSEQ_WITH_DNNL
  rows_setting().store(std::max<int64_t>(rows, 0));
#else
  (void)rows;
#endif
}

#ifdef LEANSEQ_WITH_DNNL
namespace {

// c [m, n] = op(a) op(b) + beta c through oneDNN's sgemm, row-major float32 operands with leading
// dimensions lda, ldb and n; op transposes where its flag is 'T'. False when oneDNN refuses.
bool sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c) {
  // oneDNN runs on this thread's OpenMP team; at::get_num_threads() first gives a thread that has
  // not run ATen's parallel code yet (a server's worker) ATen's thread count rather than OpenMP's
  // default of every core.
  (void)at::get_num_threads();
  if (dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, n) != dnnl_success) return false;
  count_product({ta, tb, m, n, k});
  return true;
}

// The same on contiguous 2-D tensors, c [m, n].
bool sgemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, float beta, torch::Tensor& c) {
  return sgemm(ta, tb, c.size(0), c.size(1), ta == 'N' ? a.size(1) : a.size(0), a.data_ptr<float>(), a.size(1),
               b.data_ptr<float>(), b.size(1), beta, c.data_ptr<float>());
}

// Whether oneDNN can take x [..., K] times weight [N, K]^T plus bias: float32 CPU tensors of
// matching, non-empty shapes.
bool onednn_operands(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!float_cpu(x) || !float_cpu(weight) || weight.dim() != 2 || x.dim() < 1) return false;
  if (x.size(-1) != weight.size(1) || weight.numel() == 0 || x.numel() == 0) return false;
  return !bias.defined() || (float_cpu(bias) && bias.dim() == 1 && bias.size(0) == weight.size(0));
}

// The bias [n] (contiguous) in each of the m rows of n floats at `out`: one copy per row, the rows
// in chunks on the OpenMP team, where ATen's copy_ of bias.expand_as(out) would add three operators
// (and their allocations of views) to each product.
void fill_rows(float* out, int64_t m, int64_t n, const float* bias) {
  parallel_chunks(m, workers_for(m * n, 1 << 16), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) std::memcpy(out + r * n, bias, static_cast<size_t>(n) * sizeof(float));
  });
}

// x [..., k] (contiguous) times w [n, k] (contiguous) transposed, plus bias: [..., n]; undefined
// when oneDNN refuses. The bias is the product's starting value (beta 1), so that no second pass
// adds it. One operator (the new tensor) besides the product: a decoding step makes some twenty
// of these products, so that views and reshapes around each cost a step more than they seem.
torch::Tensor product_rows(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  const int64_t k = x.size(-1), n = w.size(0), m = x.numel() / k;
  auto sizes = x.sizes().vec();
  sizes.back() = n;
  auto out = torch::empty(sizes, x.options());
  const auto b = bias.defined() ? bias.contiguous() : bias;
  if (b.defined()) fill_rows(out.data_ptr<float>(), m, n, b.data_ptr<float>());
  const bool done = sgemm('N', 'T', m, n, k, x.data_ptr<float>(), k, w.data_ptr<float>(), k, b.defined() ? 1.0f : 0.0f,
                          out.data_ptr<float>());
  return done ? out : torch::Tensor();
}

// product_rows for autograd, which cannot fall back once recording.
torch::Tensor recorded_product(const torch::Tensor& rows, const torch::Tensor& w, const torch::Tensor& bias) {
  auto out = product_rows(rows, w, bias);
  TORCH_CHECK(out.defined(), "oneDNN's sgemm refused a linear layer");
  return out;
}

// A linear layer for autograd with its three products through oneDNN: y = x w^T (+ b) forward,
// dx = dy w and dw = dy^T x backward (db = the sum of dy's rows). Forward takes x as [m, k] rows
// (contiguous) and the weight contiguous; the bias, when there is one, is a separate Function's
// input (an undefined tensor cannot be one).

torch::autograd::variable_list gradients(torch::autograd::AutogradContext* ctx, const torch::Tensor& grad,
                                         bool bias) {
  const auto saved = ctx->get_saved_variables();
  const auto &rows = saved[0], &w = saved[1];
  const auto g = grad.contiguous();
  torch::Tensor gx, gw, gb;
  if (ctx->needs_input_grad(0)) {
    gx = torch::empty({g.size(0), w.size(1)}, g.options());
    TORCH_CHECK(sgemm('N', 'N', g, w, 0.0f, gx), "oneDNN's sgemm refused a linear layer's input gradient");
  }
  if (ctx->needs_input_grad(1)) {
    gw = torch::empty_like(w);
    TORCH_CHECK(sgemm('T', 'N', g, rows, 0.0f, gw), "oneDNN's sgemm refused a linear layer's weight gradient");
  }
  if (bias && ctx->needs_input_grad(2)) gb = g.sum(0);
  torch::autograd::variable_list out{gx, gw};
  if (bias) out.push_back(gb);
  return out;
}

class TrainedLinear : public torch::autograd::Function<TrainedLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& w) {
    ctx->save_for_backward({rows, w});
    return recorded_product(rows, w, {});
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return gradients(ctx, grad[0], false);
  }
};

class TrainedLinearWithBias : public torch::autograd::Function<TrainedLinearWithBias> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& w, const torch::Tensor& bias) {
    ctx->save_for_backward({rows, w});
    return recorded_product(rows, w, bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return gradients(ctx, grad[0], true);
  }
};

}  // namespace
#endif

torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
#ifdef LEANSEQ_WITH_DNNL
  if (records(x, weight, bias) || !onednn_operands(x, weight, bias)) return {};
  // One operator for profilers and operator counts (bench/), as ATen's products are.
  RECORD_FUNCTION("leanseq::onednn_linear", std::vector<c10::IValue>());
  const auto xc = x.contiguous(), w = weight.contiguous(), b = bias.defined() ? bias.contiguous() : bias;
  if (auto out = packed_product(xc.view({-1, xc.size(-1)}), w, b); out.defined()) {
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return out.view(sizes);
  }
  return product_rows(xc, w, b);
#else
  (void)x, (void)weight, (void)bias;
  return {};
#endif
}

bool onednn_sgemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
#ifdef LEANSEQ_WITH_DNNL
  if ((ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T')) return false;
  for (const torch::Tensor* t : {&a, &b, static_cast<const torch::Tensor*>(&c)}) {
    if (!float_cpu(*t) || t->dim() != 2 || !t->is_contiguous() || t->numel() == 0) return false;
  }
  const int64_t k = ta == 'N' ? a.size(1) : a.size(0);
  if ((ta == 'N' ? a.size(0) : a.size(1)) != c.size(0) || (tb == 'N' ? b.size(0) : b.size(1)) != k ||
      (tb == 'N' ? b.size(1) : b.size(0)) != c.size(1)) {
    return false;
  }
  return sgemm(ta, tb, a, b, 0.0f, c);
#else
  (void)ta, (void)tb, (void)a, (void)b, (void)c;
  return false;
#endif
}

namespace {
// The product through oneDNN when it has at most onednn_rows() rows and oneDNN takes it; an
// undefined tensor otherwise.
torch::Tensor inference_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t limit = onednn_rows();
  if (limit <= 0 || x.dim() < 1 || x.size(-1) == 0 || x.numel() / x.size(-1) > limit) return {};
  return onednn_linear(x, weight, bias);
}

// A recorded product through oneDNN when training_products() says so: under CPU autocast in
// bfloat16 (train --bf16) on bfloat16 operands (kernels/bf16_products.h), outside it (TrainedLinear)
// when the operands are float32 CPU tensors of matching shapes; an undefined tensor otherwise
// (ATen's linear, which autocast casts).
torch::Tensor training_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
#ifdef LEANSEQ_WITH_DNNL
  if (training_products() != TrainingProducts::onednn) return {};
  if (at::autocast::is_cpu_enabled()) {
    return at::autocast::get_autocast_cpu_dtype() == at::kBFloat16 ? bf16_trained_linear(x, weight, bias)
                                                                    : torch::Tensor();
  }
  if (!onednn_operands(x, weight, bias)) return {};
  RECORD_FUNCTION("leanseq::onednn_linear", std::vector<c10::IValue>());
  const auto rows = x.reshape({-1, x.size(-1)}).contiguous();
  const auto w = weight.contiguous();
  auto out = bias.defined() ? TrainedLinearWithBias::apply(rows, w, bias) : TrainedLinear::apply(rows, w);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return out.view(sizes);
#else
  (void)x, (void)weight, (void)bias;
  return {};
#endif
}
}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto out = records(x, weight, bias) ? training_product(x, weight, bias) : inference_product(x, weight, bias);
  return out.defined() ? out : torch::linear(x, weight, bias);
}

torch::Tensor linear_relu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (records(x, weight, bias) || !bias.defined() || x.dim() < 1) return torch::relu(linear(x, weight, bias));
  auto out = inference_product(x, weight, bias);
  if (out.defined()) return out.relu_();
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return at::_addmm_activation(bias, x.reshape({-1, x.size(-1)}), weight.t()).view(sizes);
}

std::string dense_products_summary() {
  const int64_t limit = onednn_rows();
  if (limit == 0) return "float32 products: ATen's for every size";
  const std::string onednn =
      packed_weights() ? std::string("oneDNN's ") + packed_primitive() + " on packed weights" : "oneDNN's sgemm";
  if (limit == std::numeric_limits<int64_t>::max()) return "float32 products at inference: " + onednn;
  return "float32 products of up to " + std::to_string(limit) + " rows at inference: " + onednn + "; larger ones: ATen's";
}

std::string training_products_summary() {
  return training_products() == TrainingProducts::onednn
             ? "linear layers' products and gradients in training: oneDNN's sgemm (its bfloat16 matmul under --bf16)"
             : "linear layers' products and gradients in training: ATen's";
}

}  // namespace leanseq::kernels
