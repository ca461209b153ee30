#include "leanseq/kernels/bf16_products.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <memory>
#include <mutex>
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

// n float32 numbers rounded to bfloat16 (to the nearest even, as ATen converts), split over the threads.
void round_to_bf16_split(const float* in, uint16_t* out, int64_t n) {
  parallel_chunks(n, workers_for(n, 1 << 15),
                  [&](int, int64_t b, int64_t e) { round_to_bf16_row(in + b, out + b, e - b); });
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
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, bf16_layout(1, c.dims()[1], false, dnnl_type::f32), c),
                                      attr, engine);
}

// The implementation oneDNN takes for a bfloat16 product of 64 x 64 x 64 here ("" where none), asked once.
const std::string& brgemm_impl() {
  static const std::string impl = [] {
    try {
      return std::string(bf16_matmul_desc(bf16_layout(64, 64, false, dnnl_type::bf16),
                                          bf16_layout(64, 64, false, dnnl_type::bf16),
                                          bf16_layout(64, 64, false, dnnl_type::f32), false)
                             .impl_info_str());
    } catch (const dnnl::error&) {
      return std::string();
    }
  }();
  return impl;
}

bool brgemm_on_amx() { return brgemm_impl().find("amx") != std::string::npos; }

// One matmul for every size of a layout (op(a), op(b), a bias or not), summing into float32, its
// sizes and strides given at each call: oneDNN's JIT gemm, made once; null where oneDNN would
// take another implementation, and on CPUs with AMX, whose brgemm kernels it was not measured
// against. On two threads or more it runs a training step's products faster than the brgemm
// kernels for AVX512_BF16 made for each shape (1.06-1.36x with a float32 result on the Zen 5
// EPYC; its second thread gains 1.7-2.0x where the brgemm kernels' gains 1.5-1.6x), and a batch
// of a new size makes nothing: brgemm kernels cost 0.3-2 ms to make per shape, and batches of
// varying tokens bring new shapes all through training (docs/benchmarks/training-bf16.md). On
// one thread the brgemm kernels stay (0.89-1.13x).
const dnnl::matmul* any_size_matmul(bool ta, bool tb, bool bias) {
  static std::mutex mutex;
  static std::unordered_map<int, std::unique_ptr<dnnl::matmul>> made;
  const int key = (ta ? 1 : 0) | (tb ? 2 : 0) | (bias ? 4 : 0);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find(key);
  if (it != made.end()) return it->second.get();
  std::unique_ptr<dnnl::matmul> matmul;
  if (!brgemm_on_amx()) {
    constexpr auto any = DNNL_RUNTIME_DIM_VAL;
    const auto a = bf16_layout(any, any, ta, dnnl_type::bf16), b = bf16_layout(any, any, tb, dnnl_type::bf16),
               c = bf16_layout(any, any, false, dnnl_type::f32);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // it needs none: the gemm keeps its own buffers
    const auto& engine = onednn_cpu_engine();
    try {
      const auto pd = bias ? dnnl::matmul::primitive_desc(
                                 dnnl::matmul::desc(a, b, bf16_layout(1, any, false, dnnl_type::f32), c),
                                 attr, engine)
                           : dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
      if (std::string(pd.impl_info_str()).rfind("gemm:jit", 0) == 0 && pd.scratchpad_desc().get_size() == 0) {
        matmul = std::make_unique<dnnl::matmul>(pd);
      }
    } catch (const dnnl::error&) {
      // none here: the kernels made for each shape
    }
  }
  return made.emplace(key, std::move(matmul)).first->second.get();
}
#endif

}  // namespace

bool bf16_products_native() {
#ifdef LEANSEQ_WITH_DNNL
  const std::string& impl = brgemm_impl();
  return impl.rfind("brg", 0) == 0 && (impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos);
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
  const auto& engine = onednn_cpu_engine();
  dnnl::stream stream(engine);
  ProductShape shape{ta, tb, m, n, k};
  shape.bf16 = true;
  const dnnl::matmul* any_size =
      at::get_num_threads() > 1 ? any_size_matmul(ta == 'T', tb == 'T', bias.defined()) : nullptr;
  if (any_size) {
    // A bfloat16 c is summed in float32 here and rounded after, as the brgemm kernels round their sums.
    const bool to_bf16 = c_type == dnnl_type::bf16;
    const size_t sums_bytes = to_bf16 ? static_cast<size_t>(m * n) * sizeof(float) : 0;
    thread_local Scratch kept_sums;
    Scratch own_sums;
    Scratch& room = sums_bytes <= Scratch::kept_at_most ? kept_sums : own_sums;
    float* sums = to_bf16 ? static_cast<float*>(room.at(sums_bytes)) : c.data_ptr<float>();
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(ad, engine, a.data_ptr())},
        {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine, b.data_ptr())},
        {DNNL_ARG_DST, dnnl::memory(bf16_layout(m, n, false, dnnl_type::f32), engine, sums)}};
    if (bias.defined()) {
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(bf16_layout(1, n, false, dnnl_type::f32), engine, bias.data_ptr()));
    }
    any_size->execute(stream, args);
    stream.wait();
    if (to_bf16) {
      round_to_bf16_split(sums, reinterpret_cast<uint16_t*>(c.data_ptr()), m * n);
    }
    count_product(shape);
    return true;
  }
  dnnl::matmul::primitive_desc pd;
  try {
    pd = bf16_matmul_desc(ad, bd, cd, bias.defined());
  } catch (const dnnl::error&) {
    return false;  // oneDNN has no implementation for these operands
  }
  thread_local Scratch scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(ad, engine, a.data_ptr())},
      {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine, b.data_ptr())},
      {DNNL_ARG_DST, dnnl::memory(cd, engine, c.data_ptr())},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), engine, scratch.at(pd.scratchpad_desc().get_size()))}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), engine, bias.data_ptr()));
  dnnl::matmul(pd).execute(stream, args);
  stream.wait();
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
  round_to_bf16_split(src.data_ptr<float>(), reinterpret_cast<uint16_t*>(out.data_ptr()), src.numel());
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
