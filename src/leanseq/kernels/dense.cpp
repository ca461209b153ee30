#include "leanseq/kernels/dense.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "leanseq/core/error.h"

#ifdef LEANSEQ_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace leanseq::kernels {

namespace {

// Measured crossover on 2 threads (docs/performance.md, "Products of a decoding step").
constexpr int64_t kDefaultOnednnRows = 64;

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

}  // namespace

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

torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
#ifdef LEANSEQ_WITH_DNNL
  if (records(x, weight, bias) || !float_cpu(x) || !float_cpu(weight) || weight.dim() != 2 || x.dim() < 1) return {};
  const int64_t k = weight.size(1), n = weight.size(0);
  if (x.size(-1) != k || k == 0 || n == 0 || x.numel() == 0) return {};
  if (bias.defined() && (!float_cpu(bias) || bias.dim() != 1 || bias.size(0) != n)) return {};
  // One operator for profilers and operator counts (bench/), as ATen's products are.
  RECORD_FUNCTION("leanseq::onednn_linear", std::vector<c10::IValue>());
  const auto rows = x.reshape({-1, k}).contiguous();
  const auto w = weight.contiguous();
  const int64_t m = rows.size(0);
  auto sizes = x.sizes().vec();
  sizes.back() = n;
  // The bias is the product's starting value (beta 1), so that no second pass adds it. (A copy into
  // a new tensor: expand(...).contiguous() of one row would be the bias itself.)
  auto out = torch::empty({m, n}, x.options());
  if (bias.defined()) out.copy_(bias.expand({m, n}));
  // oneDNN runs on this thread's OpenMP team; at::get_num_threads() first gives a thread that has
  // not run ATen's parallel code yet (a server's worker) ATen's thread count rather than OpenMP's
  // default of every core.
  (void)at::get_num_threads();
  const auto status = dnnl_sgemm('N', 'T', m, n, k, 1.0f, rows.data_ptr<float>(), k, w.data_ptr<float>(), k,
                                 bias.defined() ? 1.0f : 0.0f, out.data_ptr<float>(), n);
  if (status != dnnl_success) return {};
  return out.view(sizes);
#else
  (void)x, (void)weight, (void)bias;
  return {};
#endif
}

namespace {
// The product through oneDNN when it has at most onednn_rows() rows and oneDNN takes it; an
// undefined tensor otherwise.
torch::Tensor few_rows_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t limit = onednn_rows();
  if (limit <= 0 || x.dim() < 1 || x.size(-1) == 0 || x.numel() / x.size(-1) > limit) return {};
  return onednn_linear(x, weight, bias);
}
}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto out = few_rows_product(x, weight, bias);
  return out.defined() ? out : torch::linear(x, weight, bias);
}

torch::Tensor linear_relu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (records(x, weight, bias) || !bias.defined() || x.dim() < 1) return torch::relu(linear(x, weight, bias));
  auto out = few_rows_product(x, weight, bias);
  if (out.defined()) return out.relu_();
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return at::_addmm_activation(bias, x.reshape({-1, x.size(-1)}), weight.t()).view(sizes);
}

std::string dense_products_summary() {
  const int64_t limit = onednn_rows();
  if (limit == 0) return "float32 products: ATen's for every size";
  return "float32 products of up to " + std::to_string(limit) + " rows at inference: oneDNN's sgemm; larger ones: ATen's";
}

}  // namespace leanseq::kernels
