#include "leanseq/kernels/batched_matmul.h"

#ifdef LEANSEQ_WITH_DNNL
#include "leanseq/kernels/bf16_products.h"
#include "leanseq/kernels/onednn_engine.h"
#include "leanseq/kernels/product_flops.h"
#endif

namespace leanseq::kernels {

namespace {

// Whether a and b can go to oneDNN: CPU tensors of one batch shape, none empty, both float32 or
// (under `train --bf16`) both bfloat16 where the CPU multiplies bfloat16 natively.
bool onednn_operands(const torch::Tensor& a, const torch::Tensor& b) {
#ifdef LEANSEQ_WITH_DNNL
  if (a.dim() < 3 || a.dim() > 12 || a.dim() != b.dim()) return false;
  if (!a.device().is_cpu() || !b.device().is_cpu()) return false;
  const auto type = a.scalar_type();
  if (b.scalar_type() != type) return false;
  if (type != torch::kFloat && !(type == torch::kBFloat16 && bf16_products_native())) return false;
  if (a.numel() == 0 || b.numel() == 0 || a.size(-1) != b.size(-2)) return false;
  for (int64_t d = 0; d + 2 < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) return false;
  }
  return true;
#else
  (void)a, (void)b;
  return false;
#endif
}

#ifdef LEANSEQ_WITH_DNNL
// A tensor as oneDNN sees it: sizes, type and strides, any strides (zero ones of expanded tensors
// too).
dnnl::memory::desc describe(const torch::Tensor& t) {
  const auto type = t.scalar_type() == torch::kBFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  return dnnl::memory::desc(dnnl::memory::dims(t.sizes().begin(), t.sizes().end()), type,
                            dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

// c = a b through one oneDNN matmul (its primitive cache keeps the compiled kernel of each shape),
// in the operands' type (bfloat16 products summed in float32, rounded once); ATen's product where
// oneDNN has no implementation for the layouts.
torch::Tensor onednn_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  const dnnl::engine& engine = onednn_cpu_engine();
  auto sizes = a.sizes().vec();
  sizes.back() = b.size(-1);
  auto c = torch::empty(sizes, a.options());
  const auto ad = describe(a), bd = describe(b), cd = describe(c);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), engine);
  } catch (const dnnl::error&) {
    return torch::matmul(a, b);
  }
  dnnl::matmul product(pd);
  dnnl::stream stream(engine);
  product.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(ad, engine, a.data_ptr())},
                           {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine, b.data_ptr())},
                           {DNNL_ARG_DST, dnnl::memory(cd, engine, c.data_ptr())}});
  stream.wait();
  count_product_flops(a.size(-2), b.size(-1), a.size(-1), a.numel() / (a.size(-2) * a.size(-1)));
  return c;
}
#endif

torch::Tensor product(const torch::Tensor& a, const torch::Tensor& b) {
#ifdef LEANSEQ_WITH_DNNL
  if (onednn_operands(a, b)) return onednn_matmul(a, b);
#endif
  return torch::matmul(a, b);
}

class BatchedMatmul : public torch::autograd::Function<BatchedMatmul> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return product(a, b);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& g = grad_out[0];
    torch::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) ga = product(g, saved[1].transpose(-1, -2));
    if (ctx->needs_input_grad(1)) gb = product(saved[0].transpose(-1, -2), g);
    return {ga, gb};
  }
};

}  // namespace

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  const bool recording = torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
  if (!recording || !onednn_operands(a, b)) return torch::matmul(a, b);
  return BatchedMatmul::apply(a, b);
}

}  // namespace leanseq::kernels
