#include "leanseq/decode/beam_search.h"

#include <cmath>
#include <limits>

#include "leanseq/kernels/beam_topk.h"
#include "leanseq/kernels/log_softmax.h"

namespace leanseq::decode {

namespace {
constexpr int64_t kPad = 1, kEos = 2, kUnk = 3;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// fairseq's NGramRepeatBlock: in every row, the tokens that would complete an n-gram the row has
// already produced (its leading </s> included) get -inf. tokens: [N, >= step + 1] on the CPU.
void block_repeated_ngrams(const torch::Tensor& tokens, torch::Tensor& lprobs, int64_t step, int64_t n) {
  if (step + 2 - n < 0) return;
  auto tk = tokens.accessor<int64_t, 2>();
  std::vector<int64_t> rows, cols;
  for (int64_t r = 0; r < tokens.size(0); ++r) {
    // The n-1 tokens that end the row now, then every earlier place they occur.
    for (int64_t i = 0; i + n - 1 <= step; ++i) {
      bool same = true;
      for (int64_t k = 0; k < n - 1 && same; ++k) same = tk[r][i + k] == tk[r][step + 2 - n + k];
      if (same && i + n - 1 <= step) {
        rows.push_back(r);
        cols.push_back(tk[r][i + n - 1]);
      }
    }
  }
  if (rows.empty()) return;
  const auto on = torch::TensorOptions().dtype(torch::kLong).device(lprobs.device());
  lprobs.index_put_({torch::tensor(rows, on), torch::tensor(cols, on)}, kNegInf);
}
// Sampling's candidates: one token drawn for every row (at step 0, `beam` draws from each
// sentence's first row), scored with its log-probability plus the row's score so far. Returns
// [groups, beam] scores and ids (row-in-group * vocab + token), in row order.
std::pair<torch::Tensor, torch::Tensor> sample_candidates(const torch::Tensor& lprobs, const torch::Tensor& scores,
                                                          int64_t step, int64_t groups, int64_t beam, int64_t vocab,
                                                          const SearchOptions& opt) {
  auto lp = lprobs.view({groups, beam, vocab});
  if (step == 0) lp = lp.narrow(1, 0, 1);
  torch::Tensor probs, ids;  // [G, B', K] probabilities and their tokens
  if (opt.sampling_topp > 0) {
    std::tie(probs, ids) = top_p(lp.exp(), opt.sampling_topp);
  } else if (opt.sampling_topk > 0) {
    auto top = lp.topk(std::min<int64_t>(opt.sampling_topk, vocab), -1);
    probs = std::get<0>(top).exp();
    ids = std::get<1>(top);
  } else {
    probs = lp.exp();
  }
  // A row whose every token is impossible (-inf everywhere) draws anything; its score stays -inf.
  probs = probs.masked_fill(probs.sum(-1, true).eq(0), 1.0);
  const int64_t k = probs.size(-1);
  torch::Tensor drawn;  // [G, beam] columns of probs
  if (step == 0) {
    drawn = torch::multinomial(probs.view({groups, k}), beam, true);
    probs = probs.expand({groups, beam, k});
    if (ids.defined()) ids = ids.expand({groups, beam, k});
  } else {
    drawn = torch::multinomial(probs.reshape({groups * beam, k}), 1, true).view({groups, beam});
  }
  auto token_lp = lp.expand({groups, beam, vocab});
  auto tokens = ids.defined() ? ids.gather(2, drawn.unsqueeze(-1)).squeeze(-1) : drawn;
  auto cand = token_lp.gather(2, tokens.unsqueeze(-1)).squeeze(-1);  // the token's own log-probability
  if (step > 0) cand = cand + scores.view({groups, beam}).to(cand.device());
  auto rows = torch::arange(beam, tokens.options()).view({1, beam});
  return {cand.to(torch::kFloat).cpu().contiguous(), (rows * vocab + tokens).cpu().contiguous()};
}
}  // namespace

std::pair<torch::Tensor, torch::Tensor> top_p(const torch::Tensor& probs, double p) {
  auto sorted = probs.sort(-1, true);
  auto sorted_probs = std::get<0>(sorted), sorted_ids = std::get<1>(sorted);
  // Keep a token while the mass before it is below p: the smallest set whose mass reaches p.
  auto before = sorted_probs.cumsum(-1) - sorted_probs;
  auto keep = before.lt(p);
  const int64_t k = std::max<int64_t>(1, keep.sum(-1).max().item<int64_t>());
  auto kept = sorted_probs.narrow(-1, 0, k).masked_fill(keep.narrow(-1, 0, k).logical_not(), 0.0);
  return {kept, sorted_ids.narrow(-1, 0, k)};
}

std::vector<std::vector<Hypothesis>> beam_search(StepDecoder& decoder, int64_t bsz, int64_t src_len,
                                                 int64_t max_positions, int64_t vocab, const SearchOptions& opt,
                                                 const std::vector<std::vector<int64_t>>* prefixes,
                                                 const std::vector<int64_t>* src_lengths) {
  const int64_t beam = opt.beam;
  TORCH_CHECK(beam >= 1, "beam size must be at least 1");
  const int64_t max_len =
      std::min<int64_t>(static_cast<int64_t>(opt.max_len_a * static_cast<double>(src_len)) + opt.max_len_b,
                        max_positions - 1);
  std::vector<std::vector<Hypothesis>> finalized(bsz);
  std::vector<int64_t> active(bsz);  // original sentence index of each active group
  for (int64_t b = 0; b < bsz; ++b) active[b] = b;

  auto tokens = torch::full({bsz * beam, max_len + 2}, kPad, torch::kLong);
  tokens.select(1, 0).fill_(kEos);
  auto scores = torch::zeros({bsz * beam, max_len + 1}, torch::kFloat);
  std::vector<torch::Tensor> attn_steps;  // per step [N, S] for the rows alive at that step
  torch::Tensor attn_hist;                // [N, step, S] aligned with the current rows

  for (int64_t step = 0; step <= max_len; ++step) {
    if (opt.cancelled && opt.cancelled()) throw Cancelled("the search was cancelled");
    const int64_t groups = static_cast<int64_t>(active.size());
    torch::Tensor attn;
    // The candidates are chosen where the model runs (on a GPU only the top 2 x beam per sentence
    // come back to the host); the bookkeeping below is on the CPU.
    auto lprobs = decoder.step(tokens.select(1, step), opt.need_attn ? &attn : nullptr);
    if (lprobs.scalar_type() != torch::kFloat) lprobs = lprobs.to(torch::kFloat);
    if (opt.need_attn) {
      auto a = attn.to(torch::kFloat).cpu().unsqueeze(1);
      attn_hist = attn_hist.defined() ? torch::cat({attn_hist, a}, 1) : a;
    }
    lprobs.select(1, kPad).fill_(kNegInf);
    if (opt.unk_penalty != 0) lprobs.select(1, kUnk).sub_(opt.unk_penalty);
    if (step >= max_len) {
      auto eos_col = lprobs.select(1, kEos).clone();
      lprobs.fill_(kNegInf);
      lprobs.select(1, kEos).copy_(eos_col);
    }
    // A forced prefix token keeps its own log-probability and nothing else is possible; while any
    // sentence is in its prefix the minimum length is not applied (fairseq's order).
    bool in_prefix = false;
    if (prefixes && step < max_len) {
      for (int64_t g = 0; g < groups; ++g) {
        const auto& p = (*prefixes)[active[g]];
        if (step >= static_cast<int64_t>(p.size())) continue;
        in_prefix = true;
        auto rows = lprobs.narrow(0, g * beam, beam);
        auto keep = rows.select(1, p[step]).clone();
        rows.fill_(kNegInf);
        rows.select(1, p[step]).copy_(keep);
      }
    }
    if (!in_prefix && step < opt.min_len) lprobs.select(1, kEos).fill_(kNegInf);
    if (opt.no_repeat_ngram_size > 0) block_repeated_ngrams(tokens, lprobs, step, opt.no_repeat_ngram_size);

    torch::Tensor cand_scores, cand_idx;  // [groups, k2]: scores and row-in-group * vocab + token
    if (opt.sampling) {
      std::tie(cand_scores, cand_idx) = sample_candidates(
          lprobs, step > 0 ? scores.select(1, step - 1) : torch::Tensor(), step, groups, beam, vocab, opt);
    } else {
      auto lp = lprobs.view({groups, beam, vocab});
      torch::Tensor prev;  // each row's score so far, added to its log-probabilities
      if (step == 0) {
        lp = lp.narrow(1, 0, 1);  // all beams are identical: expand only the first
      } else {
        prev = scores.select(1, step - 1).view({groups, beam});
      }
      auto top = kernels::beam_topk(lp, prev, std::min<int64_t>(2 * beam, lp.size(1) * vocab - 1));
      cand_scores = std::get<0>(top).cpu().contiguous();
      cand_idx = std::get<1>(top).cpu().contiguous();
    }
    const int64_t k2 = cand_scores.size(1);
    auto cs = cand_scores.accessor<float, 2>();
    auto ci = cand_idx.accessor<int64_t, 2>();
    auto sc = scores.accessor<float, 2>();
    auto tk = tokens.accessor<int64_t, 2>();

    // Finalize hypotheses ending in </s> among the top `beam` candidates of each sentence.
    std::vector<bool> done(groups, false);
    for (int64_t g = 0; g < groups; ++g) {
      auto& fin = finalized[active[g]];
      for (int64_t j = 0; j < beam && j < k2; ++j) {
        if (ci[g][j] % vocab != kEos || cs[g][j] == kNegInf) continue;
        if (static_cast<int64_t>(fin.size()) >= beam) break;
        const int64_t row = g * beam + ci[g][j] / vocab;
        Hypothesis h;
        float prev = 0;
        for (int64_t t = 0; t < step; ++t) {
          h.tokens.push_back(tk[row][t + 1]);
          h.positional_scores.push_back(sc[row][t] - prev);
          prev = sc[row][t];
        }
        h.tokens.push_back(kEos);
        h.positional_scores.push_back(cs[g][j] - prev);
        h.score = cs[g][j] / std::pow(static_cast<double>(step + 1), opt.lenpen);
        if (opt.need_attn) {
          auto a = attn_hist[row];  // [step + 1, S]
          const int64_t source_eos = src_lengths ? (*src_lengths)[active[g]] - 1 : -1;
          if (source_eos > 0) a = a.narrow(1, 0, source_eos);  // a token, not </s>, as fairseq aligns
          auto best = a.argmax(1);
          for (int64_t t = 0; t <= step; ++t) h.alignment.push_back(best[t].item<int64_t>());
        }
        fin.push_back(std::move(h));
      }
      done[g] = static_cast<int64_t>(fin.size()) >= beam || step == max_len;
    }
    std::vector<int64_t> keep;
    for (int64_t g = 0; g < groups; ++g) {
      if (!done[g]) keep.push_back(g);
    }
    if (keep.empty()) break;

    // The next beams: the first `beam` candidates of each kept sentence that are not </s>. A
    // sample keeps its row; one that has ended stays as a dead row (score -inf) that never ends again.
    std::vector<int64_t> order, next_tok;
    std::vector<float> next_score;
    for (int64_t g : keep) {
      int64_t taken = 0;
      for (int64_t j = 0; j < k2 && taken < beam; ++j) {
        const bool ended = ci[g][j] % vocab == kEos;
        if (ended && !opt.sampling) continue;
        order.push_back(g * beam + ci[g][j] / vocab);
        next_tok.push_back(ci[g][j] % vocab);
        next_score.push_back(ended ? kNegInf : cs[g][j]);
        ++taken;
      }
      TORCH_CHECK(taken == beam, "beam search: fewer than beam live candidates");
    }
    auto order_t = torch::tensor(order, torch::kLong);
    tokens = tokens.index_select(0, order_t);
    scores = scores.index_select(0, order_t);
    tokens.select(1, step + 1).copy_(torch::tensor(next_tok, torch::kLong));
    scores.select(1, step).copy_(torch::tensor(next_score, torch::kFloat));
    if (attn_hist.defined()) attn_hist = attn_hist.index_select(0, order_t);
    const bool within = static_cast<int64_t>(keep.size()) == groups;
    decoder.reorder(order_t, within);
    std::vector<int64_t> next_active;
    for (int64_t g : keep) next_active.push_back(active[g]);
    active = std::move(next_active);
  }
  for (auto& fin : finalized) {
    std::stable_sort(fin.begin(), fin.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  }
  return finalized;
}

ModelStepDecoder::ModelStepDecoder(models::Seq2SeqModel& model, const torch::Tensor& src,
                                   const torch::Tensor& src_lengths, int64_t beam, double temperature)
    : model_(model), temperature_(temperature) {
  enc_ = model.encode(src, src_lengths);
  auto expand = torch::arange(src.size(0), torch::TensorOptions().dtype(torch::kLong).device(src.device()))
                    .repeat_interleave(beam);
  enc_.reorder(expand);
  state_ = model.init_state(enc_);
  state_.rows_per_source = beam;  // the rows of enc_ come in groups of beam copies of one source
}

torch::Tensor ModelStepDecoder::step(const torch::Tensor& last_tokens, torch::Tensor* attn) {
  auto out = model_.step(last_tokens.to(enc_.out.device()).unsqueeze(1), enc_, state_, attn != nullptr);
  if (attn) *attn = out.attn.squeeze(1);
  return log_probs(out.logits.squeeze(1), temperature_);
}

torch::Tensor log_probs(const torch::Tensor& logits, double temperature) {
  return kernels::log_softmax(temperature != 1.0 ? logits / temperature : logits);
}

torch::Tensor ensemble_log_probs(const std::vector<torch::Tensor>& lprobs) {
  if (lprobs.size() == 1) return lprobs.front();
  // fairseq's logsumexp - log(n), as max + log(mean(exp(lp - max))): the same value, and members
  // that agree give their own log-probabilities back exactly (exp(0) = 1, log(1) = 0), where adding
  // and subtracting log(n) would round the largest of them. A token that every member rules out
  // (max = -inf) stays -inf.
  auto all = torch::stack(lprobs);
  auto max = std::get<0>(all.max(0));
  max.masked_fill_(max.isneginf(), 0.0);
  return (all - max).exp().mean(0).log() + max;
}

void ModelStepDecoder::reorder(const torch::Tensor& order, bool within_sentence) {
  model_.reorder(enc_, state_, order.to(enc_.out.device()), within_sentence);
}

EnsembleStepDecoder::EnsembleStepDecoder(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                                         const torch::Tensor& src_lengths, int64_t beam, double temperature) {
  for (auto* m : models) members_.push_back(std::make_unique<ModelStepDecoder>(*m, src, src_lengths, beam, temperature));
}

torch::Tensor EnsembleStepDecoder::step(const torch::Tensor& last_tokens, torch::Tensor* attn) {
  std::vector<torch::Tensor> lprobs, attns;
  for (auto& m : members_) {
    torch::Tensor a;
    lprobs.push_back(m->step(last_tokens, attn ? &a : nullptr));
    if (attn && a.defined()) attns.push_back(a);
  }
  if (attn && !attns.empty()) *attn = torch::stack(attns).mean(0);
  return ensemble_log_probs(lprobs);
}

void EnsembleStepDecoder::reorder(const torch::Tensor& order, bool within_sentence) {
  for (auto& m : members_) m->reorder(order, within_sentence);
}

std::vector<std::vector<Hypothesis>> generate(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes) {
  TORCH_CHECK(!models.empty(), "generate: no model");
  c10::InferenceMode inference;
  int64_t max_positions = std::numeric_limits<int64_t>::max();
  for (auto* m : models) max_positions = std::min(max_positions, m->max_target_positions());
  const auto lengths_cpu = src_lengths.to(torch::kCPU).to(torch::kLong).contiguous();
  const std::vector<int64_t> lengths(lengths_cpu.data_ptr<int64_t>(), lengths_cpu.data_ptr<int64_t>() + lengths_cpu.numel());
  if (models.size() == 1) {
    ModelStepDecoder dec(*models.front(), src, src_lengths, opt.beam, opt.temperature);
    return beam_search(dec, src.size(0), src.size(1), max_positions, vocab, opt, prefixes, &lengths);
  }
  EnsembleStepDecoder dec(models, src, src_lengths, opt.beam, opt.temperature);
  return beam_search(dec, src.size(0), src.size(1), max_positions, vocab, opt, prefixes, &lengths);
}

std::vector<std::vector<Hypothesis>> generate(models::Seq2SeqModel& model, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes) {
  return generate(std::vector<models::Seq2SeqModel*>{&model}, src, src_lengths, vocab, opt, prefixes);
}

}  // namespace leanseq::decode
