#include "leanseq/kernels/bf16_products.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/parallel.h"
#include "leanseq/kernels/product_flops.h"
#include "leanseq/kernels/scratch.h"

#ifdef LEANSEQ_WITH_DNNL
#include "leanseq/kernels/onednn_engine.h"
#endif

namespace leanseq::kernels {

namespace {

bool is_cpu_of(const torch::Tensor& t, torch::ScalarType type) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == type;
}

bool bf16_operand_ok(const torch::Tensor& t) {
  return is_cpu_of(t, torch::kBFloat16) && t.dim() == 2 && t.is_contiguous() && t.numel() > 0;
}

#ifdef LEANSEQ_WITH_DNNL
using dnnl_type = dnnl::memory::data_type;

// op(t) [rows, cols] of a row-major tensor that is [rows, cols] as it is, or [cols, rows] when
// `transposed`: the same bytes with swapped strides.
dnnl::memory::desc bf16_layout(int64_t rows, int64_t cols, bool transposed, dnnl_type type) {
  return dnnl::memory::desc({rows, cols}, type, transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1});
}

// The matmul for these layouts, its scratchpad the caller's (a thread's Scratch): oneDNN's own
// primitive cache keeps each shape's compiled kernels, so a second call of a shape makes nothing.
dnnl::matmul::primitive_desc bf16_matmul_desc(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                                              const dnnl::memory::desc& c, bool bias) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto& engine = onednn_cpu_engine();
  if (!bias) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
  const dnnl::memory::desc b_desc({1, c.dims()[1]}, dnnl_type::f32, dnnl::memory::dims{c.dims()[1], 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, b_desc, c), attr, engine);
}
#endif

}  // namespace

bool bf16_products_native() {
#ifdef LEANSEQ_WITH_DNNL
  static const bool native = [] {
    try {
      const auto pd =
          bf16_matmul_desc(bf16_layout(64, 64, false, dnnl_type::bf16), bf16_layout(64, 64, false, dnnl_type::bf16),
                           bf16_layout(64, 64, false, dnnl_type::f32), false);
      const std::string impl = pd.impl_info_str();
      return impl.rfind("brg", 0) == 0 &&
             (impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos);
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
#else
  return false;
#endif
}

bool onednn_bf16_gemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c,
                      const torch::Tensor& bias) {
#ifdef LEANSEQ_WITH_DNNL
  if ((ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T') || !bf16_operand_ok(a) || !bf16_operand_ok(b)) return false;
  if (!(is_cpu_of(c, torch::kFloat) || is_cpu_of(c, torch::kBFloat16)) || c.dim() != 2 || !c.is_contiguous())
    return false;
  const int64_t m = c.size(0), n = c.size(1), k = ta == 'N' ? a.size(1) : a.size(0);
  if ((ta == 'N' ? a.size(0) : a.size(1)) != m || (tb == 'N' ? b.size(0) : b.size(1)) != k ||
      (tb == 'N' ? b.size(1) : b.size(0)) != n) {
    return false;
  }
  if (bias.defined() &&
      (!is_cpu_of(bias, torch::kFloat) || bias.dim() != 1 || bias.size(0) != n || !bias.is_contiguous())) {
    return false;
  }
  if (!bf16_products_native()) return false;
  const auto c_type = c.scalar_type() == torch::kFloat ? dnnl_type::f32 : dnnl_type::bf16;
  const auto ad = bf16_layout(m, k, ta == 'T', dnnl_type::bf16), bd = bf16_layout(k, n, tb == 'T', dnnl_type::bf16),
             cd = bf16_layout(m, n, false, c_type);
  // The matmul runs on this thread's OpenMP team, sized as ATen's (as kernels/dense.cpp's sgemm).
  (void)at::get_num_threads();
  dnnl::matmul::primitive_desc pd;
  try {
    pd = bf16_matmul_desc(ad, bd, cd, bias.defined());
  } catch (const dnnl::error&) {
    return false;  // oneDNN has no implementation for these operands
  }
  const auto& engine = onednn_cpu_engine();
  thread_local Scratch scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(ad, engine, a.data_ptr())},
      {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine, b.data_ptr())},
      {DNNL_ARG_DST, dnnl::memory(cd, engine, c.data_ptr())},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), engine, scratch.at(pd.scratchpad_desc().get_size()))}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), engine, bias.data_ptr()));
  dnnl::stream stream(engine);
  dnnl::matmul(pd).execute(stream, args);
  stream.wait();
  ProductShape shape{ta, tb, m, n, k};
  shape.bf16 = true;
  count_product(shape);
  return true;
#else
  (void)ta, (void)tb, (void)a, (void)b, (void)c, (void)bias;
  return false;
#endif
}

namespace {

// t rounded to bfloat16 (as it is when it is bfloat16), contiguous: float32 elements split over the threads.
torch::Tensor rounded_to_bf16(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kBFloat16) return t.contiguous();
  const auto src = t.contiguous();
  auto out = torch::empty(src.sizes(), src.options().dtype(torch::kBFloat16));
  const float* in = src.data_ptr<float>();
  auto* o = reinterpret_cast<uint16_t*>(out.data_ptr());
  const int64_t n = src.numel();
  parallel_chunks(n, workers_for(n, 1 << 15),
                  [&](int, int64_t b, int64_t e) { round_to_bf16_row(in + b, o + b, e - b); });
  return out;
}

// The sums of a bfloat16 gradient's rows [m, n] in float32 (a bias's gradient), without a float32
// copy of it: blocks of 16 columns split over the threads, each adding its rows in order, so
// that the sums do not depend on the number of threads.
torch::Tensor column_sums(const torch::Tensor& grad) {
  const auto g = grad.contiguous();
  const int64_t m = g.size(0), n = g.size(1), blocks = (n + 15) / 16;
  auto sums = torch::zeros({n}, g.options().dtype(torch::kFloat));
  const auto* in = reinterpret_cast<const uint16_t*>(g.data_ptr());
  float* out = sums.data_ptr<float>();
  const int workers = static_cast<int>(std::min<int64_t>(workers_for(m * n, 1 << 15), blocks));
  parallel_chunks(blocks, workers, [&](int, int64_t begin, int64_t end) {
    const int64_t c0 = begin * 16, width = std::min(end * 16, n) - c0;
    for (int64_t r = 0; r < m; ++r) add_bf16_row(in + r * n + c0, out + c0, width);
  });
  return sums;
}

// The layer's product, in bfloat16 as autocast's linear gives it; x's rows and the weight are kept
// in bfloat16 for the backward pass (x as it came when it was bfloat16 already), and the type x
// came in, which its gradient takes.
torch::Tensor bf16_forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows, const torch::Tensor& w,
                           const torch::Tensor& bias) {
  const auto xb = rounded_to_bf16(rows), wb = rounded_to_bf16(w);
  ctx->save_for_backward({xb, wb});
  ctx->saved_data["x_type"] = static_cast<int64_t>(rows.scalar_type());
  auto out = torch::empty({rows.size(0), w.size(0)}, rows.options().dtype(torch::kBFloat16));
  TORCH_CHECK(onednn_bf16_gemm('N', 'T', xb, wb, out, bias), "oneDNN refused a linear layer's bfloat16 product");
  return out;
}

// The output's gradient comes in bfloat16 (its type); x's gradient is written in x's type and the
// weight's in float32 by the products themselves, the bias's summed in float32 (column_sums).
torch::autograd::variable_list bf16_gradients(torch::autograd::AutogradContext* ctx, const torch::Tensor& grad,
                                              bool bias) {
  const auto saved = ctx->get_saved_variables();
  const auto &xb = saved[0], &wb = saved[1];
  const auto gb = rounded_to_bf16(grad);
  torch::Tensor gx, gw, gbias;
  if (ctx->needs_input_grad(0)) {
    const auto x_type = static_cast<torch::ScalarType>(ctx->saved_data["x_type"].toInt());
    gx = torch::empty({gb.size(0), wb.size(1)}, grad.options().dtype(x_type));
    TORCH_CHECK(onednn_bf16_gemm('N', 'N', gb, wb, gx), "oneDNN refused a linear layer's bfloat16 input gradient");
  }
  if (ctx->needs_input_grad(1)) {
    gw = torch::empty({wb.size(0), wb.size(1)}, grad.options().dtype(torch::kFloat));
    TORCH_CHECK(onednn_bf16_gemm('T', 'N', gb, xb, gw), "oneDNN refused a linear layer's bfloat16 weight gradient");
  }
  if (bias && ctx->needs_input_grad(2)) gbias = column_sums(gb);
  torch::autograd::variable_list out{gx, gw};
  if (bias) out.push_back(gbias);
  return out;
}

class TrainedLinearBf16 : public torch::autograd::Function<TrainedLinearBf16> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& w) {
    return bf16_forward(ctx, rows, w, {});
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return bf16_gradients(ctx, grad[0], false);
  }
};

class TrainedLinearBf16WithBias : public torch::autograd::Function<TrainedLinearBf16WithBias> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows, const torch::Tensor& w,
                               const torch::Tensor& bias) {
    return bf16_forward(ctx, rows, w, bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return bf16_gradients(ctx, grad[0], true);
  }
};

}  // namespace

torch::Tensor bf16_trained_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const bool x_ok = is_cpu_of(x, torch::kFloat) || is_cpu_of(x, torch::kBFloat16);
  if (!x_ok || x.dim() < 1 || x.numel() == 0 || !is_cpu_of(weight, torch::kFloat) || weight.dim() != 2 ||
      weight.numel() == 0 || x.size(-1) != weight.size(1)) {
    return {};
  }
  if (bias.defined() && (!is_cpu_of(bias, torch::kFloat) || bias.dim() != 1 || bias.size(0) != weight.size(0)))
    return {};
  if (!bf16_products_native()) return {};
  RECORD_FUNCTION("leanseq::onednn_linear", std::vector<c10::IValue>());
  const auto rows = x.reshape({-1, x.size(-1)}).contiguous();
  const auto w = weight.contiguous();
  auto out =
      bias.defined() ? TrainedLinearBf16WithBias::apply(rows, w, bias.contiguous()) : TrainedLinearBf16::apply(rows, w);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return out.view(sizes);
}

}  // namespace leanseq::kernels
