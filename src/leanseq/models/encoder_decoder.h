// The encoder-decoder model shared by the families whose encoder and decoder are fairseq-style
// modules: token embeddings (shared when share_all_embeddings), `encoder` and `decoder` children
// (fairseq's state_dict prefixes), and a decoder with forward/step and named caches per layer;
// and the language model made of such a decoder alone.
#pragma once
#include <functional>
#include <type_traits>

#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/output_rows.h"
#include "leanseq/nn/packed_weight.h"

namespace leanseq::models {

// One decoder layer applied to the hidden states: (layer index, x, whether to return its
// encoder attention) -> the layer's output and attention.
using DecoderLayerFn = std::function<nn::AttentionResult(size_t, const torch::Tensor&, bool)>;

// The decoder stack after the embeddings: `layers` layers, then the optional final LayerNorm and
// the output projection with its bias when it has one (over `rows`' ids only, when given; its
// log-probabilities with log_probs). Like fairseq (alignment_layer), the attention returned is the
// encoder attention of the last layer.
inline DecoderOut run_decoder_stack(torch::Tensor x, size_t layers, const DecoderLayerFn& layer, bool need_attn,
                                    torch::nn::LayerNorm& layer_norm, const torch::Tensor& output_weight,
                                    const nn::PackedWeight& output_packed,
                                    const torch::Tensor& project_out = torch::Tensor(),
                                    nn::OutputRows* rows = nullptr,
                                    const torch::Tensor& output_bias = torch::Tensor(), bool log_probs = false) {
  DecoderOut out;
  for (size_t i = 0; i < layers; ++i) {
    auto r = layer(i, x, need_attn && i + 1 == layers);
    x = r.out;
    if (r.weights.defined()) out.attn = r.weights;
  }
  if (layer_norm) x = layer_norm(x);
  if (project_out.defined()) x = kernels::linear(x, project_out, {});
  out.logits = nn::output_logits(x, output_weight, output_bias, output_packed, rows, log_probs);
  out.log_probs = log_probs;
  return out;
}

// Config: encoder/decoder sides with embed_dim, share_all_embeddings, max_target_positions.
// Encoder(cfg, embedding) -> EncoderOut; Decoder(cfg, embedding, vocab) with forward(prev, enc,
// need_attn), step(tokens, enc, state, need_attn) and `layers`.
// A decoder (its Impl) with `static constexpr bool kStepsReadEncoderOutOnce = true` reads the
// encoder output on its first step only (its layers' StaticAttentionCache).
template <class D, class = void>
struct StepsReadEncoderOutOnce : std::false_type {};
template <class D>
struct StepsReadEncoderOutOnce<D, std::void_t<decltype(D::kStepsReadEncoderOutOnce)>>
    : std::bool_constant<D::kStepsReadEncoderOutOnce> {};

template <class Config, class Encoder, class Decoder>
class EncoderDecoderModel : public Seq2SeqModel {
 public:
  EncoderDecoderModel(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab) : cfg_(cfg) {
    auto enc_embed = nn::make_embedding(src_vocab, cfg.encoder.embed_dim, nn::kPadIndex);
    auto dec_embed =
        cfg.share_all_embeddings ? enc_embed : nn::make_embedding(tgt_vocab, cfg.decoder.embed_dim, nn::kPadIndex);
    encoder = register_module("encoder", Encoder(cfg, enc_embed));
    decoder = register_module("decoder", Decoder(cfg, dec_embed, tgt_vocab));
  }
  EncoderOut encode(const torch::Tensor& src, const torch::Tensor&) override { return encoder(src); }
  DecoderOut decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) override {
    return decoder->forward(prev_tokens, enc, need_attn);
  }
  // Empty: each decoder layer (and A2 block) adds its named caches on its first step.
  nn::IncrementalState init_state(const EncoderOut&) override { return {}; }
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                  bool need_attn) override {
    return decoder->step(tokens, enc, state, need_attn);
  }
  int64_t max_target_positions() const override { return cfg_.max_target_positions; }
  bool steps_read_encoder_out_once() const override {
    return StepsReadEncoderOutOnce<typename Decoder::ContainedType>::value;
  }

  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  Config cfg_;
};

// A decoder-only language model (fairseq's transformer_lm, lightconv_lm): a `decoder` child
// built without encoder attention over embeddings of cfg.embedding_dim(); encode() returns an empty encoder output ([B, 0, C]), decode()
// and step() predict the next token of `prev_tokens` = [</s>, y1 .. y(n-1)].
template <class Config, class Decoder>
class DecoderOnlyModel : public Seq2SeqModel {
 public:
  DecoderOnlyModel(const Config& cfg, int64_t vocab) : cfg_(cfg) {
    decoder = register_module("decoder", Decoder(cfg, nn::make_embedding(vocab, cfg.embedding_dim(), nn::kPadIndex), vocab));
  }
  EncoderOut encode(const torch::Tensor& src, const torch::Tensor&) override {
    const int64_t B = src.size(0);
    return {torch::zeros({B, 0, cfg_.decoder.embed_dim}, decoder->output_weight.options()),
            torch::zeros({B, 0}, src.options().dtype(torch::kBool)),
            {}};
  }
  DecoderOut decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool) override {
    return decoder->forward(prev_tokens, enc, false);
  }
  nn::IncrementalState init_state(const EncoderOut&) override { return {}; }
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state, bool) override {
    return decoder->step(tokens, enc, state, false);
  }
  int64_t max_target_positions() const override { return cfg_.max_target_positions; }

  Decoder decoder{nullptr};

 private:
  Config cfg_;
};

}  // namespace leanseq::models
