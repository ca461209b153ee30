#include "leanseq/nn/attention.h"

#include <cmath>
#include <limits>

#include "leanseq/kernels/one_query_attention.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

namespace {

// t in like's type (a bfloat16 cache for the ATen products, which take one type).
torch::Tensor as_type_of(const torch::Tensor& t, const torch::Tensor& like) {
  return t.scalar_type() == like.scalar_type() ? t : t.to(like.scalar_type());
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t embed_dim, int64_t heads, double dropout, bool scores,
                                               int64_t kv_dim)
    : embed_dim_(embed_dim),
      kv_dim_(kv_dim > 0 ? kv_dim : embed_dim),
      heads_(heads),
      head_dim_(embed_dim / heads),
      dropout_(dropout) {
  TORCH_CHECK(head_dim_ * heads == embed_dim, "embed_dim ", embed_dim, " must be divisible by heads ", heads);
  scaling_ = std::pow(static_cast<double>(head_dim_), -0.5);
  // fairseq: q/k/v xavier-uniform with gain 1/sqrt(2) (gain 1 when the keys' width differs),
  // out_proj xavier-uniform with zero bias.
  const double g = kv_dim_ == embed_dim ? 1.0 / std::sqrt(2.0) : 1.0;
  if (scores) k_proj = register_module("k_proj", Linear(kv_dim_, embed_dim));
  v_proj = register_module("v_proj", Linear(kv_dim_, embed_dim));
  if (scores) q_proj = register_module("q_proj", Linear(embed_dim, embed_dim));
  out_proj = register_module("out_proj", make_linear(embed_dim, embed_dim));
  for (auto* l : {&k_proj, &v_proj, &q_proj}) {
    if (*l) torch::nn::init::xavier_uniform_((*l)->weight, g);
  }
}

torch::Tensor MultiheadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), heads_, head_dim_}).transpose(1, 2);
}

torch::Tensor causal_mask(int64_t T, int64_t S, int64_t offset, const torch::TensorOptions& opts) {
  auto q = torch::arange(T, opts.dtype(torch::kLong)).unsqueeze(1) + offset;
  auto k = torch::arange(S, opts.dtype(torch::kLong)).unsqueeze(0);
  auto m = torch::zeros({T, S}, opts);
  m.masked_fill_(k > q, -std::numeric_limits<float>::infinity());
  return m.view({1, 1, T, S});
}

torch::Tensor padding_to_additive(const torch::Tensor& key_padding_mask, const torch::TensorOptions& opts) {
  auto m = torch::zeros(key_padding_mask.sizes(), opts);
  m.masked_fill_(key_padding_mask, -std::numeric_limits<float>::infinity());
  return m.view({key_padding_mask.size(0), 1, 1, key_padding_mask.size(1)});
}

AttentionResult MultiheadAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, const torch::Tensor& mask,
                                               bool need_weights) {
  auto scores = attention_scores(q, k);  // [B, H, T, S]
  if (mask.defined()) scores = scores + mask;
  auto probs = attention_softmax(scores, torch::kFloat);
  return apply(probs.scalar_type() == q.scalar_type() ? probs : probs.to(q.scalar_type()), v, need_weights);
}

bool MultiheadAttentionImpl::one_pass_applies(const torch::Tensor& rows) const {
  return single_cpu_query(rows) && !(is_training() && dropout_ > 0);
}

bool MultiheadAttentionImpl::attend_in_one_pass(const torch::Tensor& q, double q_scale, const torch::Tensor& k,
                                                const torch::Tensor& v, const torch::Tensor& mask, bool need_weights,
                                                AttentionResult& result, const torch::Tensor& k_origin,
                                                const torch::Tensor& v_origin) {
  if (!one_pass_applies(q)) return false;
  auto [context, probs] = kernels::one_query_attention(q, k, v, mask, q_scale, k_origin, v_origin);
  if (!context.defined()) return false;
  result = {out_proj(context), {}, probs};
  if (need_weights) result.weights = head_mean(probs);
  return true;
}

AttentionResult MultiheadAttentionImpl::apply(const torch::Tensor& probs, const torch::Tensor& v, bool need_weights) {
  auto dropped = maybe_dropout(probs, dropout_, is_training());
  return with_context(probs, attention_context(dropped, v), need_weights);
}

AttentionResult MultiheadAttentionImpl::with_context(const torch::Tensor& probs, const torch::Tensor& ctx,
                                                     bool need_weights) {
  const int64_t B = probs.size(0), T = probs.size(2);
  AttentionResult r{out_proj(ctx.transpose(1, 2).reshape({B, T, embed_dim_})), {}, probs};
  if (need_weights) r.weights = head_mean(probs);
  return r;
}

AttentionResult MultiheadAttentionImpl::forward_with(const torch::Tensor& key_value, const torch::Tensor& probs,
                                                     bool need_weights) {
  return apply(probs, split_heads(v_proj(key_value)), need_weights);
}

void MultiheadAttentionImpl::append_values(const torch::Tensor& query, SelfAttentionCache& cache) {
  auto v = split_heads(v_proj(query));
  cache.v.append(v, kv_stored(v));
}

AttentionResult MultiheadAttentionImpl::step_self_with(const torch::Tensor& query, const torch::Tensor& probs,
                                                       SelfAttentionCache& cache, bool need_weights) {
  append_values(query, cache);
  torch::Tensor ctx;  // [B, H, 1, d] from the values where they are stored, when a reorder left them there
  if (cache.v.origin().defined() && one_pass_applies(probs)) {
    ctx = kernels::one_query_context(probs, cache.v.stored(), cache.v.origin());
  }
  return ctx.defined() ? with_context(probs, ctx, need_weights)
                       : apply(probs, as_type_of(cache.v.tensor(), probs), need_weights);
}

AttentionResult MultiheadAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& key_value,
                                                const torch::Tensor& key_padding_mask, bool causal,
                                                bool need_weights) {
  torch::Tensor q, k, v;
  auto qkv = query.is_same(key_value) ? fused_qkv(query) : torch::Tensor();
  if (qkv.defined()) {
    q = split_heads(qkv.narrow(-1, 0, embed_dim_) * scaling_);
    k = split_heads(qkv.narrow(-1, embed_dim_, embed_dim_));
    v = split_heads(qkv.narrow(-1, 2 * embed_dim_, embed_dim_));
  } else {
    q = split_heads(q_proj(query) * scaling_);
    k = split_heads(k_proj(key_value));
    v = split_heads(v_proj(key_value));
  }
  if (causal || !query.is_same(key_value)) {  // as the steps store them (an encoder's self-attention has none)
    k = kv_rounded(k);
    v = kv_rounded(v);
  }
  torch::Tensor mask;
  auto opts = query.options();
  if (causal) mask = causal_mask(query.size(1), key_value.size(1), 0, opts);
  if (key_padding_mask.defined()) {
    auto pm = padding_to_additive(key_padding_mask, opts);
    mask = mask.defined() ? mask + pm : pm;
  }
  return attend(q, k, v, mask, need_weights);
}

namespace {

// Gives `whole` and its `parts` one version counter, as a view shares its base's: an update in
// place of a part (an optimizer's) is then one of the whole too, which caches keyed on the whole's
// version see (kernels/packed_products.h). Inference tensors keep no version.
torch::Tensor share_version(torch::Tensor whole, const std::vector<torch::Tensor*>& parts) {
  if (whole.is_inference()) return whole;
  const auto counter = parts.front()->unsafeGetTensorImpl()->version_counter();
  for (auto* p : parts) {
    if (p->is_inference()) return whole;
  }
  whole.unsafeGetTensorImpl()->set_version_counter(counter);
  for (auto* p : parts) p->unsafeGetTensorImpl()->set_version_counter(counter);
  return whole;
}

// Makes the parameters `parts` views of one new tensor, their concatenation along dimension 0
// (the same values, the parameters stay the modules' own); returns it, sharing their version
// counter. Where they already are consecutive views of one tensor, returns that tensor as it is.
torch::Tensor join_in_place(const std::vector<torch::Tensor*>& parts) {
  bool joined = parts.front()->storage_offset() == 0;
  int64_t offset = 0, rows = 0;
  for (auto* p : parts) {
    joined = joined && p->is_contiguous() && p->is_alias_of(*parts.front()) && p->storage_offset() == offset;
    offset += p->numel();
    rows += p->size(0);
  }
  std::vector<int64_t> sizes = parts.front()->sizes().vec();
  sizes[0] = rows;
  if (joined && static_cast<int64_t>(parts.front()->storage().nbytes()) == offset * parts.front()->element_size()) {
    return share_version(torch::empty({0}, parts.front()->options()).set_(parts.front()->storage(), 0, sizes), parts);
  }
  std::vector<torch::Tensor> values;
  for (auto* p : parts) values.push_back(*p);
  auto whole = torch::cat(values);
  int64_t begin = 0;
  for (auto* p : parts) {
    const int64_t n = p->size(0);
    p->set_(whole.narrow(0, begin, n));
    begin += n;
  }
  return share_version(whole, parts);
}

}  // namespace

void MultiheadAttentionImpl::set_compute_type(kernels::ComputeType type) {
  // A SAN layer that reuses scores has only v_proj; keys of another width are not fused with q.
  const bool projections = q_proj && k_proj && v_proj && kv_dim_ == embed_dim_;
  const int biases = projections ? q_proj->bias.defined() + k_proj->bias.defined() + v_proj->bias.defined() : 0;
  // Not in a layer that reuses another's scores (values only): its steps take the weighted sum alone.
  kv_bf16_ = type == kernels::ComputeType::int8 && k_proj;
  torch::NoGradGuard no_grad;
  qkv_weight_ = qkv_bias_ = torch::Tensor();
  qkv_.pack(torch::Tensor(), torch::Tensor(), kernels::ComputeType::float32);
  if (!projections || (biases != 0 && biases != 3)) return;
  if (type == kernels::ComputeType::int8) {
    qkv_.pack(torch::cat({q_proj->weight, k_proj->weight, v_proj->weight}),
              biases == 3 ? torch::cat({q_proj->bias, k_proj->bias, v_proj->bias}) : torch::Tensor(), type);
  } else if (type == kernels::ComputeType::float32) {
    qkv_weight_ = join_in_place({&q_proj->weight, &k_proj->weight, &v_proj->weight});
    if (biases == 3) qkv_bias_ = join_in_place({&q_proj->bias, &k_proj->bias, &v_proj->bias});
  }
}

torch::Tensor MultiheadAttentionImpl::fused_qkv(const torch::Tensor& x) const {
  if (qkv_.packed()) return qkv_.forward(x);
  // The views still those of the parameters (a move to another device replaces them), and no
  // gradient to record.
  if (!qkv_weight_.defined() || torch::GradMode::is_enabled() || q_proj->weight.data_ptr() != qkv_weight_.data_ptr()) {
    return {};
  }
  return kernels::linear(x, qkv_weight_, qkv_bias_);
}

AttentionResult MultiheadAttentionImpl::step_self(const torch::Tensor& query, const torch::Tensor& new_key_padding,
                                                  SelfAttentionCache& cache, bool need_weights) {
  const int64_t past = cache.k.length();
  torch::Tensor q;  // times scaling_ below, as forward() scales it
  auto qkv = fused_qkv(query);  // [B, n, 3C]
  if (qkv.defined()) {
    q = split_heads(qkv.narrow(-1, 0, embed_dim_));
    cache.k.append(split_heads(qkv.narrow(-1, embed_dim_, embed_dim_)), kv_stored(qkv));
    cache.v.append(split_heads(qkv.narrow(-1, 2 * embed_dim_, embed_dim_)), kv_stored(qkv));
  } else {
    q = split_heads(q_proj(query));
    auto k = split_heads(k_proj(query));
    cache.k.append(k, kv_stored(k));
    append_values(query, cache);
  }
  const int64_t n = query.size(1), B = query.size(0);
  // Pad tokens fed to the decoder are masked as keys, as fairseq does.
  if (new_key_padding.defined() || cache.key_padding.defined()) {
    auto old_pad = cache.key_padding.defined() ? cache.key_padding
                                               : torch::zeros({B, past}, new_key_padding.options());
    auto new_pad = new_key_padding.defined() ? new_key_padding : torch::zeros({B, n}, old_pad.options());
    cache.key_padding = torch::cat({old_pad, new_pad}, 1);
  }
  torch::Tensor mask;
  if (n > 1) mask = causal_mask(n, past + n, past, query.options());
  if (cache.key_padding.defined()) {
    auto pm = padding_to_additive(cache.key_padding, query.options());
    mask = mask.defined() ? mask + pm : pm;
  }
  AttentionResult result;
  // The cache's rows where they are stored, when a reorder left them there (incremental_state.h).
  if (cache.k.origin().defined() && cache.v.origin().defined() &&
      attend_in_one_pass(q, scaling_, cache.k.stored(), cache.v.stored(), mask, need_weights, result,
                         cache.k.origin(), cache.v.origin())) {
    return result;
  }
  if (attend_in_one_pass(q, scaling_, cache.k.tensor(), cache.v.tensor(), mask, need_weights, result)) return result;
  return attend(q * scaling_, as_type_of(cache.k.tensor(), q), as_type_of(cache.v.tensor(), q), mask, need_weights);
}

AttentionResult MultiheadAttentionImpl::step_static(const torch::Tensor& query, const torch::Tensor& memory,
                                                    const torch::Tensor& memory_padding_mask,
                                                    StaticAttentionCache& cache, bool need_weights) {
  if (!cache.k.defined()) {  // once per source batch: the projections and the mask of the memory
    auto source = memory, padding = memory_padding_mask;
    if (cache.rows > 1 && memory.size(0) % cache.rows == 0) {  // one row per source
      source = memory.slice(0, 0, memory.size(0), cache.rows);
      if (padding.defined()) padding = padding.slice(0, 0, padding.size(0), cache.rows);
    } else {
      cache.rows = 1;
    }
    auto k = split_heads(k_proj(source)), v = split_heads(v_proj(source));
    if (kv_stored(k) == torch::kBFloat16) {  // each step's query takes the scaling, as forward()'s does
      cache.k = k.to(torch::kBFloat16);
      cache.v = v.to(torch::kBFloat16);
    } else {
      cache.k = k * scaling_;  // scaled here once instead of each step's query
      cache.v = v;
    }
    if (padding.defined() && padding.any().item<bool>()) cache.mask = padding_to_additive(padding, query.options());
  }
  auto q = split_heads(q_proj(query));
  const bool keys_scaled = cache.k.scalar_type() != torch::kBFloat16;
  AttentionResult result;
  if (attend_in_one_pass(q, keys_scaled ? 1.0 : scaling_, cache.k, cache.v, cache.mask, need_weights, result)) {
    return result;
  }
  auto k = as_type_of(cache.k, q), v = as_type_of(cache.v, q);
  if (!keys_scaled) q = q * scaling_;
  if (cache.rows == 1) return attend(q, k, v, cache.mask, need_weights);
  // Each row's scores go against its source's keys: the one-query kernels take the groups as they
  // are; other products (several positions, a GPU) get one copy per row.
  auto per_row = [&](const torch::Tensor& t) { return t.defined() ? t.repeat_interleave(cache.rows, 0) : t; };
  if (single_cpu_query(q)) return attend(q, k, v, per_row(cache.mask), need_weights);
  return attend(q, per_row(k), per_row(v), per_row(cache.mask), need_weights);
}

}  // namespace leanseq::nn
