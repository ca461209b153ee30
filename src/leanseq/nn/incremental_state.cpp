#include "leanseq/nn/incremental_state.h"

#include <algorithm>

namespace leanseq::nn {

void AppendBuffer::append(const torch::Tensor& x) {
  const int64_t T = length(), n = x.size(2);
  if (!defined() || buffer_.size(2) < T + n) {  // room for as many positions again
    auto sizes = x.sizes().vec();
    sizes[2] = std::max<int64_t>(2 * (T + n), 8);
    auto grown = torch::empty(sizes, x.options());
    if (T > 0) grown.narrow(2, 0, T).copy_(view_);
    buffer_ = grown;
  }
  buffer_.narrow(2, T, n).copy_(x);
  view_ = buffer_.narrow(2, 0, T + n);
}

void AppendBuffer::reorder(const torch::Tensor& order) {
  if (!defined()) return;
  auto sizes = buffer_.sizes().vec();
  sizes[0] = order.size(0);
  auto gathered = torch::empty(sizes, buffer_.options());
  auto view = gathered.narrow(2, 0, length());
  torch::index_select_out(view, view_, 0, order);
  buffer_ = gathered;
  view_ = view;
}

void StaticAttentionCache::reorder(const torch::Tensor& order, bool within_sentence) {
  if (within_sentence || !k.defined()) return;
  torch::Tensor sources;  // the source row of each new group, when the new rows are grouped
  if (rows > 1 && order.size(0) % rows == 0) {
    auto groups = torch::div(order, rows, "floor").view({-1, rows});
    auto first = groups.select(1, 0);
    if (groups.eq(first.unsqueeze(1)).all().item<bool>()) sources = first.contiguous();
  }
  if (!sources.defined() && rows > 1) {  // one copy per row from here on
    for (auto* t : {&k, &v, &mask}) {
      if (t->defined()) *t = t->repeat_interleave(rows, 0);
    }
    rows = 1;
  }
  const auto& select = sources.defined() ? sources : order;
  for (auto* t : {&k, &v, &mask}) {
    if (t->defined()) *t = t->index_select(0, select);
  }
}

}  // namespace leanseq::nn
