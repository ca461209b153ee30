#include "leanseq/nn/incremental_state.h"

#include <algorithm>
#include <cstring>

#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/parallel.h"

namespace leanseq::nn {

namespace {

bool table_on_cpu(const torch::Tensor& buffer, const torch::Tensor& order) {
  return buffer.is_cpu() && buffer.is_contiguous() && order.is_cpu() && order.scalar_type() == torch::kLong;
}

// x [rows, H, n, d] into positions [T, T + n) of the first rows of buffer [P, H, cap, d]
// (contiguous): one copy of d floats per (row, head, position), the rows split over the compute
// threads when there are many, where narrowing the buffer twice and ATen's copy_ cost a decoding
// step more than the copy (a few rows of a few positions each). A bfloat16 buffer takes x's numbers
// rounded as ATen's cast rounds. False, copying nothing, where the tensors are not CPU tensors of
// float32 (the buffer also bfloat16) with x's last dimension contiguous.
bool copy_positions(const torch::Tensor& x, torch::Tensor& buffer, int64_t T) {
  const bool rounded = buffer.scalar_type() == torch::kBFloat16;
  if (!x.is_cpu() || !buffer.is_cpu() || x.scalar_type() != torch::kFloat ||
      (buffer.scalar_type() != torch::kFloat && !rounded) ||
      !buffer.is_contiguous() || x.dim() != 4 || buffer.dim() != 4 || x.size(1) != buffer.size(1) ||
      x.size(3) != buffer.size(3) || (x.stride(3) != 1 && x.size(3) > 1)) {
    return false;
  }
  const int64_t rows = x.size(0), H = x.size(1), n = x.size(2), d = x.size(3), cap = buffer.size(2);
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
  const float* from = x.data_ptr<float>();
  const int64_t workers = kernels::workers_for(rows * H * n * d, 1 << 16);
  if (rounded) {  // a row's heads in one call per position
    auto* to = reinterpret_cast<uint16_t*>(buffer.data_ptr<c10::BFloat16>());
    kernels::parallel_chunks(rows, workers, [&](int, int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        for (int64_t t = 0; t < n; ++t) {
          kernels::round_to_bf16_rows(from + b * s0 + t * s2, s1, to + (b * H * cap + T + t) * d, cap * d, H, d);
        }
      }
    });
    return true;
  }
  float* to = buffer.data_ptr<float>();
  kernels::parallel_chunks(rows * H, workers, [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < n; ++t) {
        std::memcpy(to + (r * cap + T + t) * d, from + b * s0 + h * s1 + t * s2,
                    static_cast<size_t>(d) * sizeof(float));
      }
    }
  });
  return true;
}

}  // namespace

const torch::Tensor& AppendBuffer::tensor() {
  if (origin_.defined()) gather(buffer_.size(2));
  return view_;
}

void AppendBuffer::append(const torch::Tensor& x, torch::ScalarType type) {
  const int64_t T = length(), n = x.size(2), rows = x.size(0);
  if (origin_.defined() && origin_.size(0) != rows) gather(buffer_.size(2));
  TORCH_CHECK(!defined() || rows == (origin_.defined() ? origin_.size(0) : buffer_.size(0)),
              "AppendBuffer::append: ", rows, " rows after ", view_.size(0));
  if (!defined() || buffer_.size(2) < T + n) {  // room for as many positions again
    const int64_t room = std::max<int64_t>(2 * (T + n), 8);
    if (origin_.defined()) {
      // Only the rows in use move to the larger buffer: after sentences of a batch have finished,
      // the stored rows are many more than the live ones, and a long sentence's growth would
      // allocate and copy room for all of them.
      gather(room);
    } else {
      auto sizes = x.sizes().vec();
      if (defined()) sizes[0] = buffer_.size(0);
      sizes[2] = room;
      auto grown = torch::empty(sizes, x.options().dtype(defined() ? buffer_.scalar_type() : type));
      if (T > 0) grown.narrow(2, 0, T).copy_(view_);
      buffer_ = grown;
    }
  }
  // Row b's new positions in stored row b.
  if (!copy_positions(x, buffer_, T)) buffer_.narrow(0, 0, rows).narrow(2, T, n).copy_(x);
  view_ = buffer_.narrow(2, 0, T + n);
  if (origin_.defined()) {
    auto table = torch::empty({rows, T + n}, origin_.options());
    const int64_t* from = origin_.data_ptr<int64_t>();
    int64_t* to = table.data_ptr<int64_t>();
    for (int64_t b = 0; b < rows; ++b) {
      std::memcpy(to + b * (T + n), from + b * T, T * sizeof(int64_t));
      std::fill(to + b * (T + n) + T, to + (b + 1) * (T + n), b);
    }
    origin_ = table;
  }
}

void AppendBuffer::reorder(const torch::Tensor& order) {
  if (!defined()) return;
  if (!table_on_cpu(buffer_, order)) {
    if (origin_.defined()) gather(buffer_.size(2));
    auto sizes = buffer_.sizes().vec();
    sizes[0] = order.size(0);
    auto gathered = torch::empty(sizes, buffer_.options());  // with the same room
    auto view = gathered.narrow(2, 0, length());
    torch::index_select_out(view, view_, 0, order);
    buffer_ = gathered;
    view_ = view;
    return;
  }
  // The new table: row i's positions are where those of row order[i] were.
  const int64_t rows = order.size(0), T = length();
  const int64_t old_rows = origin_.defined() ? origin_.size(0) : buffer_.size(0);
  const auto indices = order.contiguous();
  const int64_t* idx = indices.data_ptr<int64_t>();
  auto table = torch::empty({rows, T}, order.options());
  int64_t* to = table.data_ptr<int64_t>();
  const int64_t* from = origin_.defined() ? origin_.data_ptr<int64_t>() : nullptr;
  for (int64_t i = 0; i < rows; ++i) {
    TORCH_CHECK(idx[i] >= 0 && idx[i] < old_rows, "AppendBuffer::reorder: row ", idx[i], " of ", old_rows);
    if (from) {
      std::memcpy(to + i * T, from + idx[i] * T, T * sizeof(int64_t));
    } else {
      std::fill(to + i * T, to + (i + 1) * T, idx[i]);
    }
  }
  origin_ = table;
  // More rows than are stored (the first step's rows repeated for the beams): their next positions
  // need rows of their own.
  if (rows > buffer_.size(0)) gather(buffer_.size(2));
}

void AppendBuffer::gather(int64_t room) {
  const int64_t rows = origin_.size(0), T = length();
  auto sizes = buffer_.sizes().vec();
  sizes[0] = rows;
  sizes[2] = room;
  auto gathered = torch::empty(sizes, buffer_.options());
  // Each (row, head) holds its positions contiguously: runs of positions from one stored row are
  // one copy, split over the compute threads when there are megabytes to move.
  const int64_t heads = buffer_.size(1), elem = buffer_.element_size();
  const int64_t position_bytes = buffer_.size(3) * elem, head_bytes = buffer_.stride(1) * elem,
                to_head_bytes = gathered.stride(1) * elem;
  const auto* from = static_cast<const char*>(buffer_.data_ptr());
  auto* to = static_cast<char*>(gathered.data_ptr());
  const int64_t* origin = origin_.data_ptr<int64_t>();
  auto copy_rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t* o = origin + i * T;
      for (int64_t t = 0; t < T;) {
        int64_t run = 1;
        while (t + run < T && o[t + run] == o[t]) ++run;
        for (int64_t h = 0; h < heads; ++h) {
          std::memcpy(to + (i * heads + h) * to_head_bytes + t * position_bytes,
                      from + (o[t] * heads + h) * head_bytes + t * position_bytes, run * position_bytes);
        }
        t += run;
      }
    }
  };
  const int64_t row_bytes = std::max<int64_t>(1, heads * T * position_bytes);
  kernels::parallel_chunks(rows, kernels::workers_for(rows, std::max<int64_t>(1, (int64_t{1} << 19) / row_bytes)),
                           copy_rows);
  buffer_ = gathered;
  view_ = gathered.narrow(2, 0, T);
  origin_ = torch::Tensor();
}

void StaticAttentionCache::reorder(const torch::Tensor& order, bool within_sentence, int64_t rows_after) {
  if (within_sentence || !k.defined()) return;
  // the source row of each new group, when the new rows are grouped
  auto sources = grouped_sources(order, rows, rows_after);
  if (sources.defined()) {
    rows = rows_after;
  } else if (rows > 1) {  // one copy per row from here on
    for (auto* t : {&k, &v, &mask}) {
      if (t->defined()) *t = t->repeat_interleave(rows, 0);
    }
    rows = 1;
  }
  const auto select = sources.defined() ? sources.to(k.device()) : order;
  for (auto* t : {&k, &v, &mask}) {
    if (t->defined() && !keep_rows_in_place(*t, select)) *t = t->index_select(0, select);
  }
}

torch::Tensor grouped_sources(const torch::Tensor& order, int64_t rows_before, int64_t rows_after) {
  if (rows_after <= 1 || rows_before < 1 || order.dim() != 1 || order.size(0) % rows_after != 0) return {};
  const auto o = order.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* p = o.data_ptr<int64_t>();
  const int64_t groups = o.size(0) / rows_after;
  auto sources = torch::empty({groups}, o.options());
  int64_t* to = sources.data_ptr<int64_t>();
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = p[g * rows_after] / rows_before;
    for (int64_t r = 1; r < rows_after; ++r) {
      if (p[g * rows_after + r] / rows_before != first) return {};
    }
    to[g] = first;
  }
  return sources;
}

bool keep_rows_in_place(torch::Tensor& t, const torch::Tensor& rows, int64_t group) {
  if (!t.defined() || !t.is_cpu() || t.dim() == 0 || group < 1 || t.size(0) == 0 || t.size(0) % group != 0 ||
      !rows.is_cpu() || rows.scalar_type() != torch::kLong || rows.dim() != 1 || rows.size(0) * group > t.size(0) ||
      t.requires_grad()) {
    return false;
  }
  // The tensor alone on its storage, each row one dense block of stride(0) elements.
  if (t.use_count() != 1 || t.storage().use_count() != 1 || t.numel() / t.size(0) != t.stride(0) ||
      !t.select(0, 0).is_non_overlapping_and_dense()) {
    return false;
  }
  const auto idx = rows.contiguous();
  const int64_t* r = idx.data_ptr<int64_t>();
  const int64_t n = idx.size(0), blocks = t.size(0) / group;
  for (int64_t i = 0; i < n; ++i) {
    if (r[i] < i || r[i] >= blocks || (i > 0 && r[i] <= r[i - 1])) return false;
  }
  // Blocks move only toward the front, in order: each is read before anything is written over it.
  const int64_t bytes = group * t.stride(0) * static_cast<int64_t>(t.element_size());
  auto* base = static_cast<char*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    if (r[i] != i) std::memmove(base + i * bytes, base + r[i] * bytes, static_cast<size_t>(bytes));
  }
  t = t.narrow(0, 0, n * group);
  return true;
}

}  // namespace leanseq::nn
