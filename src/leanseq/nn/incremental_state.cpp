#include "leanseq/nn/incremental_state.h"

#include <algorithm>
#include <cstring>

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
  if (buffer_.is_cpu() && order.is_cpu() && order.scalar_type() == torch::kLong && buffer_.is_contiguous()) {
    // Each (row, head) holds its positions contiguously: one copy per block, where ATen's
    // index_select into a strided view iterated element by element.
    const int64_t rows = order.size(0), heads = buffer_.size(1), old_rows = buffer_.size(0);
    const int64_t block = length() * buffer_.size(3) * buffer_.element_size();
    const int64_t head_bytes = buffer_.stride(1) * buffer_.element_size();
    const auto* from = static_cast<const char*>(buffer_.data_ptr());
    auto* to = static_cast<char*>(gathered.data_ptr());
    const auto indices = order.contiguous();
    const int64_t* idx = indices.data_ptr<int64_t>();
    for (int64_t i = 0; i < rows; ++i) {
      TORCH_CHECK(idx[i] >= 0 && idx[i] < old_rows, "AppendBuffer::reorder: row ", idx[i], " of ", old_rows);
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(to + (i * heads + h) * head_bytes, from + (idx[i] * heads + h) * head_bytes, block);
      }
    }
  } else {
    torch::index_select_out(view, view_, 0, order);
  }
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
