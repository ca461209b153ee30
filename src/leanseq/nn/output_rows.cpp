#include "leanseq/nn/output_rows.h"

namespace leanseq::nn {

torch::Tensor output_logits(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            const PackedWeight& packed, OutputRows* rows) {
  if (!rows) return linear(x, weight, bias, packed);
  if (!rows->gathered) {
    const auto ids = rows->ids.to(weight.device());
    rows->weight = weight.index_select(0, ids).contiguous();
    if (bias.defined()) rows->bias = bias.index_select(0, ids).contiguous();
    if (packed.packed()) rows->packed.pack(rows->weight, rows->bias, packed.type());
    rows->gathered = true;
  }
  return linear(x, rows->weight, rows->bias, rows->packed);
}

}  // namespace leanseq::nn
