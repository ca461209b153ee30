// Incremental decoding state: one owner, a typed cache per layer registered under the layer's name
// (its state_dict path, e.g. "layers.2.self_attn"), one generic reorder.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

namespace leanseq::nn {

struct OutputRows;  // nn/output_rows.h

// A cache that grows along its positions (dimension 2 of [B, H, T, d]) in a buffer with room for
// more: an append copies only the new positions, where torch::cat copied all those so far at every
// step. On the CPU a reorder moves no keys or values: it reorders a table of the stored row that
// holds each row's positions (`origin`), which the one-query attention kernel reads through, and
// a row's next position is stored in the row of its index. tensor() gathers the rows in order for
// the code that wants them so, once per reorder. Elsewhere (CUDA) a reorder gathers the rows at once.
class AppendBuffer {
 public:
  bool defined() const { return view_.defined(); }
  // [B, H, T, d] with the rows in order (gathered here after a CPU reorder).
  const torch::Tensor& tensor();
  int64_t length() const { return defined() ? view_.size(2) : 0; }
  // The rows where they are stored, [P, H, T, d] (P >= B), and origin() [B, T] int64: the stored
  // row that holds row b's position t; undefined when row b is stored row b for every position.
  const torch::Tensor& stored() const { return view_; }
  const torch::Tensor& origin() const { return origin_; }
  // x [B, H, n, d], stored as `type` (its own unless given; the first append's for the buffer's life).
  void append(const torch::Tensor& x) { append(x, x.scalar_type()); }
  void append(const torch::Tensor& x, torch::ScalarType type);
  void reorder(const torch::Tensor& order);  // rows `order` of the batch dimension

 private:
  // Copies the rows into a new buffer with room for `room` positions, in the order of origin_
  // (which it then drops).
  void gather(int64_t room);
  torch::Tensor buffer_, view_, origin_;
};

// Keeps blocks `rows` ([n] int64, strictly increasing) of `group` consecutive rows of t's first
// dimension by moving them to the front of t's own storage, and narrows t to them: what
// index_select gives, without allocating or copying the rows that do not move (sentences that
// finished leave a batch). False, changing nothing, where t is not a CPU tensor alone on its
// storage whose rows are dense blocks, or the rows are not increasing.
bool keep_rows_in_place(torch::Tensor& t, const torch::Tensor& rows, int64_t group = 1);

// Where a reorder `order` ([B'] int64 rows of a batch) takes every group of rows_after
// consecutive new rows from one group of rows_before consecutive old rows: that old group for each
// new group ([B' / rows_after] int64, on the CPU); otherwise undefined.
torch::Tensor grouped_sources(const torch::Tensor& order, int64_t rows_before, int64_t rows_after);

// Keys/values of decoder self-attention so far (a layer that reuses another layer's attention
// distribution keeps only v).
struct SelfAttentionCache {
  AppendBuffer k, v;          // [B, H, T_so_far, d]
  torch::Tensor key_padding;  // [B, T_so_far] bool, only once a pad token was fed
  template <class F> void for_each_tensor(F&& f) { f(k), f(v), f(key_padding); }
};

// Keys/values of encoder-decoder attention, projected once from the encoder output. Where the
// decoder's rows come in groups that decode one source each (a sentence's beams,
// IncrementalState::rows_per_source), one copy per source: a decoding step then reads each
// source's keys and values once for all its beams rather than once per beam.
struct StaticAttentionCache {
  torch::Tensor k, v;  // [B / rows, H, S, d]; k already multiplied by the attention's 1/sqrt(d)
  torch::Tensor mask;  // [B / rows, 1, 1, S] additive key padding of the memory; undefined when it has no pad
  int64_t rows = 1;    // consecutive decoder rows per source row of k, v and mask
  // A reorder within sentences changes nothing; one that drops sentences keeps the sources of the
  // remaining groups, `rows_after` rows each (or, where the new rows are not grouped so, goes to one
  // copy per row). From one row per source to `rows_after` (the beam search's first step, made
  // once per sentence) it keeps one copy.
  void reorder(const torch::Tensor& order, bool within_sentence, int64_t rows_after);
};

// The last inputs of a causal 1D convolution (K-1 of them).
struct ConvWindowCache {
  torch::Tensor window;  // [B, K-1, C]
  template <class F> void for_each_tensor(F&& f) { f(window); }
};

// The running average of an average-attention layer: O(1) per step.
struct AverageCache {
  torch::Tensor mean;   // [B, 1, C] average of the non-pad inputs so far (0 where none counted)
  int64_t steps = 0;    // positions fed so far
  torch::Tensor count;  // [B, 1, 1] how many of them count, only once a pad was fed
  torch::Tensor fc1_mean;  // [B, 1, F] fc1's product of that average (no bias), kept by folded steps
  template <class F> void for_each_tensor(F&& f) { f(mean), f(count), f(fc1_mean); }
};

// The last input rows of a masked 2D convolution over the (target, source) grid (kernel / 2 of
// them), channels last.
struct GridRowsCache {
  torch::Tensor rows;  // [B, kernel / 2, S, C]
  template <class F> void for_each_tensor(F&& f) { f(rows); }
};

// The running sums of a causal A2 gather (nn/double_attention.h).
struct DoubleAttentionCache {
  torch::Tensor max;  // [B, 1, n] running max of the gather logits
  torch::Tensor num;  // [B, m, n] sum over positions of exp(logit - max) * features
  torch::Tensor den;  // [B, 1, n] sum over positions of exp(logit - max)
  template <class F> void for_each_tensor(F&& f) { f(max), f(num), f(den); }
};

// The state name of the i-th module of a list: "layers.2", "convolutions.0" (their state_dict paths).
inline std::string state_name(const std::string& list, size_t i) { return list + "." + std::to_string(i); }

using LayerCache = std::variant<std::monostate, SelfAttentionCache, StaticAttentionCache, ConvWindowCache,
                                AverageCache, GridRowsCache, DoubleAttentionCache>;

class IncrementalState {
 public:
  size_t size() const { return caches_.size(); }
  int64_t steps = 0;  // target tokens consumed so far
  // Consecutive rows that decode the same source (the beams of a sentence, as the beam search
  // lays them out): caches computed from the source alone keep one copy per group. A reorder
  // regroups them by the value it has then.
  int64_t rows_per_source = 1;
  // A vocabulary shortlist: the output layer's logits are those of its ids only (null: all).
  std::shared_ptr<OutputRows> output_rows;
  // The caller takes log-probabilities: an output layer that can take them while it makes its
  // logits (an int8 layer, row by row in cache) returns them instead (DecoderOut::log_probs).
  bool log_probs = false;

  // The cache of type T named `name`, empty on its first use. A name holds one type for the
  // state's life: asking for it as another is a programming error (std::logic_error).
  template <class T> T& get(const std::string& name) {
    if (name.empty()) throw std::logic_error("IncrementalState: a layer asked for its cache without a name");
    auto& c = caches_[name];
    if (std::holds_alternative<std::monostate>(c)) {
      T fresh{};
      if constexpr (std::is_same_v<T, StaticAttentionCache>) fresh.rows = rows_per_source;
      c = std::move(fresh);
    }
    if (!std::holds_alternative<T>(c)) throw std::logic_error("IncrementalState: cache '" + name + "' holds another type");
    return std::get<T>(c);
  }

  // Selects rows `order` ([B'] int64) of every cached tensor along the batch dimension. With
  // within_sentence (a beam reorder that keeps every row inside its sentence's group of beams),
  // caches that are the same for all beams of a sentence are left as they are.
  void reorder(const torch::Tensor& order, bool within_sentence = false) {
    for (auto& [name, c] : caches_) {
      std::visit(
          [&](auto& cache) {
            using Cache = std::decay_t<decltype(cache)>;
            if constexpr (std::is_same_v<Cache, StaticAttentionCache>) {
              cache.reorder(order, within_sentence, rows_per_source);
            } else if constexpr (!std::is_same_v<Cache, std::monostate>) {
              cache.for_each_tensor([&](auto& t) {
                if constexpr (std::is_same_v<std::decay_t<decltype(t)>, AppendBuffer>) {
                  t.reorder(order);
                } else if (t.defined()) {
                  t = t.index_select(0, order);
                }
              });
            }
          },
          c);
    }
  }

 private:
  std::map<std::string, LayerCache> caches_;
};

}  // namespace leanseq::nn
