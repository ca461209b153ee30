#include "leanseq/nn/output_rows.h"

#include "leanseq/kernels/log_softmax.h"

namespace leanseq::nn {

torch::Tensor output_logits(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            const PackedWeight& packed, OutputRows* rows, bool log_probs) {
  // The product over `weight` and `bias` (through `packed` when it is packed), with or without
  // its log-probabilities.
  auto product = [&](const torch::Tensor& w, const torch::Tensor& b, const PackedWeight& p) {
    if (!log_probs) return linear(x, w, b, p);
    return p.packed() ? p.forward_log_softmax(x) : kernels::log_softmax(kernels::linear(x, w, b));
  };
  if (!rows) return product(weight, bias, packed);
  if (!rows->gathered) {
    const auto ids = rows->ids.to(weight.device());
    rows->weight = weight.index_select(0, ids).contiguous();
    if (bias.defined()) rows->bias = bias.index_select(0, ids).contiguous();
    if (packed.packed()) rows->packed.pack(rows->weight, rows->bias, packed.type());
    rows->gathered = true;
  }
  return product(rows->weight, rows->bias, rows->packed);
}

}  // namespace leanseq::nn
