#include "leanseq/decode/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "leanseq/kernels/beam_topk.h"
#include "leanseq/kernels/log_softmax.h"
#include "leanseq/nn/output_rows.h"

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

using States = std::vector<ConstraintTracker::State>;

// The constrained search's candidates (fairseq's LexicallyConstrainedBeamSearch.step): rows that have
// not met their constraints cannot end; the best 2 x beam of each sentence and each row's best are
// handed to constrained_candidates with the rows' states. Returns [groups, k] scores and ids (row *
// vocab + token); `states` becomes, per group, the candidates' states.
// Diverse beam search's candidates (fairseq's DiverseBeamSearch.step): group g holds the rows g,
// g + G, ...; each group's top 2 x (beam / G), over its log-probabilities plus -strength x how
// many candidates of the earlier groups chose each token, interleaved group by group. lprobs:
// [groups * beam (or groups at a first step of one row per sentence), V]; prev: [groups * beam].
std::pair<torch::Tensor, torch::Tensor> diverse_candidates(const torch::Tensor& lprobs, const torch::Tensor& prev,
                                                           int64_t step, int64_t groups, int64_t beam, int64_t vocab,
                                                           const SearchOptions& opt) {
  const int64_t G = opt.diverse_beam_groups, per_group = beam / G;
  auto lp = lprobs.to(torch::kCPU).view({groups, -1, vocab});
  auto penalty = torch::zeros({groups, vocab}, lp.options());
  std::vector<torch::Tensor> scores, ids;
  for (int64_t g = 0; g < G; ++g) {
    // At the first step every row is the same: each group expands one.
    auto lg = step == 0 ? lp.narrow(1, 0, 1) : lp.slice(1, g, beam, G);
    lg = g > 0 ? torch::add(lg, penalty.unsqueeze(1), -opt.diverse_beam_strength) : lg.contiguous();
    if (step > 0) lg = lg + prev.view({groups, beam}).slice(1, g, beam, G).unsqueeze(-1);
    auto flat = lg.reshape({groups, -1});
    auto top = flat.topk(std::min<int64_t>(2 * per_group, flat.size(1) - 1), -1);
    auto token = std::get<1>(top).remainder(vocab), row = std::get<1>(top).div(vocab, "floor") * G + g;
    scores.push_back(std::get<0>(top));
    ids.push_back(row * vocab + token);
    penalty.scatter_add_(1, token, torch::ones(token.sizes(), penalty.options()));
  }
  return {torch::stack(scores, 2).view({groups, -1}).contiguous(), torch::stack(ids, 2).view({groups, -1}).contiguous()};
}

// Diverse siblings' candidates (fairseq's DiverseSiblingsSearch.step) after the first step: each
// row's top k = 2 x beam continuations (with its score so far), the i-th lowered by i x rate, then
// the top k of them all. lprobs: [groups * beam, V]; prev: [groups * beam].
std::pair<torch::Tensor, torch::Tensor> sibling_candidates(const torch::Tensor& lprobs, const torch::Tensor& prev,
                                                           int64_t groups, int64_t beam, int64_t vocab, double rate) {
  auto lp = lprobs.to(torch::kCPU).view({groups, beam, vocab}) + prev.view({groups, beam, 1});
  const int64_t k = std::min<int64_t>(2 * beam, beam * vocab - 1);
  auto [row_scores, row_tokens] = lp.topk(k, -1);  // [groups, beam, k]
  row_scores = row_scores - torch::arange(1, k + 1, lp.options()) * rate;
  auto [scores, picked] = row_scores.reshape({groups, -1}).topk(k, -1);
  auto tokens = row_tokens.reshape({groups, -1}).gather(1, picked);
  return {scores.contiguous(), (picked.div(k, "floor") * vocab + tokens).contiguous()};
}

std::pair<torch::Tensor, torch::Tensor> constrained_step(torch::Tensor& lprobs, const torch::Tensor& prev, int64_t step,
                                                         int64_t max_len, int64_t groups, int64_t beam, int64_t vocab,
                                                         const std::vector<const ConstraintTracker*>& trackers,
                                                         std::vector<States>& states) {
  // At max_len a sentence none of whose rows has met its constraints ends as it is: its candidates
  // are the plain search's.
  std::vector<bool> unmet(static_cast<size_t>(groups), false);
  if (step > 0) {
    std::vector<int64_t> unfinished;
    for (int64_t g = 0; g < groups; ++g) {
      const auto& t = *trackers[static_cast<size_t>(g)];
      const auto& rows = states[static_cast<size_t>(g)];
      const bool any = std::any_of(rows.begin(), rows.end(), [&](const auto& s) { return t.finished(s); });
      if (step >= max_len && !any) {
        unmet[static_cast<size_t>(g)] = true;
        continue;
      }
      for (int64_t k = 0; k < beam; ++k) {
        if (!t.finished(rows[static_cast<size_t>(k)])) unfinished.push_back(g * beam + k);
      }
    }
    if (!unfinished.empty()) {
      lprobs.select(1, kEos).index_fill_(0, torch::tensor(unfinished, torch::kLong).to(lprobs.device()), kNegInf);
    }
  }
  auto lp = lprobs.view({groups, beam, vocab});
  lp = step == 0 ? lp.narrow(1, 0, 1) : lp + prev.reshape({groups, beam, 1}).to(lp.device());
  lp = lp.to(torch::kCPU).contiguous();
  const int64_t count = std::min<int64_t>(2 * beam, beam * vocab - 1);
  auto top = lp.view({groups, -1}).topk(std::min<int64_t>(count, lp.size(1) * vocab), -1);
  auto top_scores = std::get<0>(top).contiguous(), top_ids = std::get<1>(top).contiguous();
  torch::Tensor row_scores, row_ids;  // each row's best (after step 0): [groups, beam, 1]
  if (step > 0) {
    std::tie(row_scores, row_ids) = lp.topk(1, -1);
    row_scores = row_scores.contiguous();
    row_ids = row_ids.contiguous();
  }
  auto scores_out = torch::empty({groups, count}, torch::kFloat);
  auto ids_out = torch::empty({groups, count}, torch::kLong);
  auto so = scores_out.accessor<float, 2>();
  auto io = ids_out.accessor<int64_t, 2>();
  auto ts = top_scores.accessor<float, 2>();
  auto ti = top_ids.accessor<int64_t, 2>();
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<Candidate> cands;
    for (int64_t j = 0; j < top_scores.size(1); ++j) cands.push_back({ts[g][j], ti[g][j] / vocab, ti[g][j] % vocab});
    if (step > 0) {
      const float* rs = row_scores.data_ptr<float>() + g * beam;
      const int64_t* ri = row_ids.data_ptr<int64_t>() + g * beam;
      for (int64_t k = 0; k < beam; ++k) cands.push_back({rs[k], k, ri[k]});
    }
    const auto& tracker = *trackers[static_cast<size_t>(g)];
    const auto& rows = states[static_cast<size_t>(g)];
    States next;
    std::vector<Candidate> chosen;
    if (unmet[static_cast<size_t>(g)]) {
      chosen.assign(cands.begin(), cands.begin() + std::min<int64_t>(count, static_cast<int64_t>(cands.size())));
      for (const auto& c : chosen) next.push_back(tracker.advance(rows[static_cast<size_t>(c.row)], c.token));
    } else {
      chosen = constrained_candidates(tracker, rows, std::move(cands), lp[g].data_ptr<float>(), vocab, step, count, &next);
    }
    TORCH_CHECK(static_cast<int64_t>(chosen.size()) == count, "constrained search: too few candidates");
    for (int64_t j = 0; j < count; ++j) {
      so[g][j] = chosen[static_cast<size_t>(j)].score;
      io[g][j] = chosen[static_cast<size_t>(j)].row * vocab + chosen[static_cast<size_t>(j)].token;
    }
    states[static_cast<size_t>(g)] = std::move(next);
  }
  return {scores_out, ids_out};
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
                                                 const std::vector<int64_t>* src_lengths,
                                                 const std::vector<Constraints>* constraints) {
  const int64_t beam = opt.beam;
  TORCH_CHECK(beam >= 1, "beam size must be at least 1");
  const int64_t max_len =
      std::min<int64_t>(static_cast<int64_t>(opt.max_len_a * static_cast<double>(src_len)) + opt.max_len_b,
                        max_positions - 1);
  std::vector<std::vector<Hypothesis>> finalized(bsz);
  // Without a length penalty a score only falls as its hypothesis grows (log-probabilities are at
  // most 0), so once a step's best candidate ends in </s> no later hypothesis beats it: the sentence
  // ends there, with nbest hypotheses (CTranslate2's early exit, its search's where length_penalty
  // is 0). fairseq's search goes on to `beam` of them and picks the same best: with its search
  // only when one hypothesis is asked for. Not where candidates are ranked otherwise (constraints,
  // sampling, diverse groups) or a negative <unk> penalty raises a log-probability above 0.
  const bool early_exit = opt.lenpen == 0 && (opt.nbest == 1 || opt.max_len_cuts) && opt.unk_penalty >= 0 &&
                          opt.constraint_order == ConstraintOrder::none && !opt.sampling &&
                          opt.diverse_beam_groups <= 1 && opt.diversity_rate <= -1;
  std::vector<bool> best_ended(bsz, false);  // early_exit: a step's best candidate of the sentence ended
  std::vector<int64_t> active(bsz);  // original sentence index of each active group
  for (int64_t b = 0; b < bsz; ++b) active[b] = b;

  // Each row's tokens so far, </s> first ([N, step + 1] before a step), and its scores after each
  // token ([N, step]): a column more per step, so a reorder copies what the rows hold, not max_len.
  auto tokens = torch::full({bsz * beam, 1}, kEos, torch::kLong);
  auto scores = torch::zeros({bsz * beam, 0}, torch::kFloat);
  std::vector<torch::Tensor> attn_steps;  // per step [N, S] for the rows alive at that step
  torch::Tensor attn_hist;                // [N, step, S] aligned with the current rows
  // Constrained search: each sentence's constraints, and the state of each row of each active group
  // (after a step: of each candidate).
  const bool constrained = opt.constraint_order != ConstraintOrder::none;
  std::vector<ConstraintTracker> trackers;
  std::vector<States> states;
  if (constrained) {
    TORCH_CHECK(!opt.sampling, "constrained decoding samples nothing: it is a beam search");
    trackers.reserve(static_cast<size_t>(bsz));
    for (int64_t b = 0; b < bsz; ++b) {
      trackers.emplace_back(constraints ? (*constraints)[static_cast<size_t>(b)] : Constraints{}, opt.constraint_order);
      states.emplace_back(static_cast<size_t>(beam), trackers.back().start());
    }
  }

  // A plain search makes its first step once per sentence, where all its beams are the same (the
  // other beams' candidates were never looked at); sampling, constraints, prefixes and n-gram
  // blocking treat each row.
  const bool first_once = beam > 1 && decoder.first_step_per_sentence() && !constrained && !opt.sampling &&
                          !prefixes && opt.no_repeat_ngram_size <= 0;

  for (int64_t step = 0; step <= max_len; ++step) {
    if (opt.cancelled && opt.cancelled()) throw Cancelled("the search was cancelled");
    const int64_t groups = static_cast<int64_t>(active.size());
    const bool once = first_once && step == 0;  // rows are sentences, not beams
    torch::Tensor attn;
    // The candidates are chosen where the model runs (on a GPU only the top 2 x beam per sentence
    // come back to the host); the bookkeeping below is on the CPU.
    auto last = tokens.select(1, step);
    auto lprobs = decoder.step(once ? last.slice(0, 0, last.size(0), beam).contiguous() : last,
                               opt.need_attn ? &attn : nullptr);
    if (lprobs.scalar_type() != torch::kFloat) lprobs = lprobs.to(torch::kFloat);
    if (opt.need_attn) {
      auto a = attn.to(torch::kFloat).cpu().unsqueeze(1);
      if (once) a = a.repeat_interleave(beam, 0);
      attn_hist = attn_hist.defined() ? torch::cat({attn_hist, a}, 1) : a;
    }
    if (opt.max_len_cuts && step < opt.min_len && !prefixes) {
      // CTranslate2 keeps </s> out before its softmax while the minimum length is not reached:
      // the other tokens share its probability.
      lprobs.select(1, kEos).fill_(kNegInf);
      lprobs.sub_(lprobs.logsumexp(1, true));
    }
    lprobs.select(1, kPad).fill_(kNegInf);
    if (opt.unk_penalty != 0) lprobs.select(1, kUnk).sub_(opt.unk_penalty);
    if (step >= max_len) {
      auto eos_col = lprobs.select(1, kEos).clone();
      lprobs.fill_(kNegInf);
      if (opt.max_len_cuts) {
        lprobs.select(1, kEos).fill_(0);  // CTranslate2 cuts the hypothesis where it is
      } else {
        lprobs.select(1, kEos).copy_(eos_col);
      }
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
    if (constrained) {
      std::vector<const ConstraintTracker*> active_trackers;
      for (int64_t b : active) active_trackers.push_back(&trackers[static_cast<size_t>(b)]);
      std::tie(cand_scores, cand_idx) =
          constrained_step(lprobs, step > 0 ? scores.select(1, step - 1) : torch::Tensor(), step, max_len, groups, beam,
                           vocab, active_trackers, states);
    } else if (opt.diversity_rate > -1 && step > 0) {
      std::tie(cand_scores, cand_idx) =
          sibling_candidates(lprobs, scores.select(1, step - 1), groups, beam, vocab, opt.diversity_rate);
    } else if (opt.diverse_beam_groups > 1) {
      std::tie(cand_scores, cand_idx) = diverse_candidates(
          lprobs, step > 0 ? scores.select(1, step - 1) : torch::Tensor(), step, groups, beam, vocab, opt);
    } else if (opt.sampling) {
      std::tie(cand_scores, cand_idx) = sample_candidates(
          lprobs, step > 0 ? scores.select(1, step - 1) : torch::Tensor(), step, groups, beam, vocab, opt);
    } else {
      auto lp = lprobs.view({groups, once ? 1 : beam, vocab});
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
        if (j == 0) best_ended[static_cast<size_t>(active[g])] = true;
        // (CTranslate2 keeps every one of a step's top `beam` that ends, and picks the best.)
        if (static_cast<int64_t>(fin.size()) >= beam && !opt.max_len_cuts) break;
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
        const int64_t length = opt.max_len_cuts && step == max_len ? std::max<int64_t>(step, 1) : step + 1;
        h.score = cs[g][j] / std::pow(static_cast<double>(length), opt.lenpen);
        if (opt.need_attn) {
          auto a = attn_hist[row];  // [step + 1, S]
          if (src_lengths) {  // a token, not <s> or </s>, as fairseq and CTranslate2 align
            const int64_t first = opt.source_bos ? 1 : 0;
            const int64_t end = (*src_lengths)[active[g]] - (opt.source_eos ? 1 : 0);
            if (end > first) a = a.narrow(1, first, end - first);
          }
          auto best = a.argmax(1);
          for (int64_t t = 0; t <= step; ++t) h.alignment.push_back(best[t].item<int64_t>());
        }
        fin.push_back(std::move(h));
      }
      done[g] = static_cast<int64_t>(fin.size()) >= beam || step == max_len ||
                (early_exit && best_ended[static_cast<size_t>(active[g])] &&
                 static_cast<int64_t>(fin.size()) >= opt.nbest);
    }
    std::vector<int64_t> keep;
    for (int64_t g = 0; g < groups; ++g) {
      if (!done[g]) keep.push_back(g);
    }
    if (keep.empty()) break;

    // The next beams: the first `beam` candidates of each kept sentence that are not </s>. A
    // sample keeps its row; one that has ended stays as a dead row (score -inf) that never ends again.
    // As fairseq's, a </s> of score -inf is not an ending: it goes on as a dead row.
    std::vector<int64_t> order, next_tok;
    std::vector<float> next_score;
    std::vector<States> next_states;
    for (int64_t g : keep) {
      int64_t taken = 0;
      States row_states;
      for (int64_t j = 0; j < k2 && taken < beam; ++j) {
        const bool ended = ci[g][j] % vocab == kEos;
        if (ended && !opt.sampling && cs[g][j] != kNegInf) continue;
        order.push_back(g * beam + ci[g][j] / vocab);
        next_tok.push_back(ci[g][j] % vocab);
        next_score.push_back(ended ? kNegInf : cs[g][j]);
        if (constrained) row_states.push_back(states[static_cast<size_t>(g)][static_cast<size_t>(j)]);
        ++taken;
      }
      TORCH_CHECK(taken == beam, "beam search: fewer than beam live candidates");
      if (constrained) next_states.push_back(std::move(row_states));
    }
    if (constrained) states = std::move(next_states);
    auto order_t = torch::tensor(order, torch::kLong);
    tokens = torch::cat({tokens.index_select(0, order_t), torch::tensor(next_tok, torch::kLong).unsqueeze(1)}, 1);
    scores = torch::cat({scores.index_select(0, order_t), torch::tensor(next_score, torch::kFloat).unsqueeze(1)}, 1);
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
                                   const torch::Tensor& src_lengths, int64_t beam, double temperature,
                                   const torch::Tensor& output_ids)
    : model_(model),
      temperature_(temperature),
      sentences_(src.size(0)),
      beam_(beam),
      enc_(model.encode(src, src_lengths)),  // one row per sentence until the first reorder, or a
      device_(enc_.out.device()) {           // step with beam rows, expands them
  state_ = model.init_state(enc_);
  state_.log_probs = temperature == 1.0;  // without a temperature the output layer may give them
  if (output_ids.defined()) {
    output_ids_ = output_ids.to(device_);
    state_.output_rows = std::make_shared<nn::OutputRows>();
    state_.output_rows->ids = output_ids_;
  }
}

void ModelStepDecoder::expand(const torch::Tensor& rows) {
  state_.rows_per_source = beam_;  // the beam rows of a sentence follow each other (expanded())
  model_.reorder(enc_, state_, rows.to(device_), false);
}

torch::Tensor ModelStepDecoder::step(const torch::Tensor& last_tokens, torch::Tensor* attn) {
  if (!expanded() && last_tokens.size(0) != sentences_) {
    expand(torch::arange(sentences_, torch::kLong).repeat_interleave(beam_));
  }
  auto tokens = last_tokens.to(device_);
  if (output_ids_.defined()) tokens = output_ids_.index_select(0, tokens);  // columns -> token ids
  auto out = model_.step(tokens.unsqueeze(1), enc_, state_, attn != nullptr);
  // The state holds what later steps read of the encoder output: the batch's copies of it (one per
  // beam after the expansion) need not be made, or moved up as sentences finish.
  if (model_.steps_read_encoder_out_once()) enc_ = models::EncoderOut{};
  if (attn) *attn = out.attn.squeeze(1);
  auto logits = out.logits.squeeze(1);
  out.logits.reset();  // the step's logits are then overwritten by their log-probabilities
  if (out.log_probs) return logits;  // already float32 (nn::output_logits)
  return log_probs(std::move(logits), temperature_);
}

torch::Tensor log_probs(torch::Tensor logits, double temperature) {
  return kernels::log_softmax(temperature != 1.0 ? logits / temperature : std::move(logits));
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
  if (!expanded()) return expand(torch::div(order, beam_, "floor"));
  model_.reorder(enc_, state_, order.to(device_), within_sentence);
}

EnsembleStepDecoder::EnsembleStepDecoder(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                                         const torch::Tensor& src_lengths, int64_t beam, double temperature,
                                         const torch::Tensor& output_ids) {
  for (auto* m : models) {
    members_.push_back(std::make_unique<ModelStepDecoder>(*m, src, src_lengths, beam, temperature, output_ids));
  }
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

namespace {
// Target ids as the columns of a shortlist (`column`: id -> column, -1 where absent).
std::vector<int64_t> to_columns(const std::vector<int64_t>& ids, const std::vector<int64_t>& column) {
  std::vector<int64_t> out;
  for (int64_t id : ids) {
    TORCH_CHECK(id >= 0 && id < static_cast<int64_t>(column.size()) && column[static_cast<size_t>(id)] >= 0,
                "generate: token ", id, " is not in the shortlist");
    out.push_back(column[static_cast<size_t>(id)]);
  }
  return out;
}
}  // namespace

std::vector<std::vector<Hypothesis>> generate(const std::vector<models::Seq2SeqModel*>& models, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes,
                                              const std::vector<Constraints>* constraints,
                                              const torch::Tensor& output_ids) {
  TORCH_CHECK(!models.empty(), "generate: no model");
  c10::InferenceMode inference;
  int64_t max_positions = std::numeric_limits<int64_t>::max();
  for (auto* m : models) max_positions = std::min(max_positions, m->max_target_positions());
  const auto lengths_cpu = src_lengths.to(torch::kCPU).to(torch::kLong).contiguous();
  const std::vector<int64_t> lengths(lengths_cpu.data_ptr<int64_t>(), lengths_cpu.data_ptr<int64_t>() + lengths_cpu.numel());
  auto run = [&](const std::vector<std::vector<int64_t>>* p, const std::vector<Constraints>* c, int64_t columns) {
    // As fairseq's SequenceGenerator: a beam at most the vocabulary (here: the columns a
    // shortlist leaves) less one.
    SearchOptions o = opt;
    o.beam = std::max<int64_t>(1, std::min(opt.beam, columns - 1));
    o.nbest = std::min(o.nbest, o.beam);
    std::unique_ptr<StepDecoder> dec;
    if (models.size() == 1) {
      dec = std::make_unique<ModelStepDecoder>(*models.front(), src, src_lengths, o.beam, o.temperature, output_ids);
    } else {
      dec = std::make_unique<EnsembleStepDecoder>(models, src, src_lengths, o.beam, o.temperature, output_ids);
    }
    return beam_search(*dec, src.size(0), src.size(1), max_positions, columns, o, p, &lengths, c);
  };
  if (!output_ids.defined()) return run(prefixes, constraints, vocab);
  // A shortlist: the search runs over its columns, the prefixes and constraints as columns too;
  // the hypotheses' columns become token ids again.
  const auto ids_cpu = output_ids.to(torch::kCPU).to(torch::kLong).contiguous();
  const std::vector<int64_t> ids(ids_cpu.data_ptr<int64_t>(), ids_cpu.data_ptr<int64_t>() + ids_cpu.numel());
  TORCH_CHECK(ids.size() > kUnk && ids[kPad] == kPad && ids[kEos] == kEos && ids[kUnk] == kUnk,
              "generate: a shortlist starts with the special tokens");
  std::vector<int64_t> column(static_cast<size_t>(vocab), -1);
  for (size_t k = 0; k < ids.size(); ++k) column.at(static_cast<size_t>(ids[k])) = static_cast<int64_t>(k);
  std::vector<std::vector<int64_t>> p;
  if (prefixes) {
    for (const auto& prefix : *prefixes) p.push_back(to_columns(prefix, column));
  }
  std::vector<Constraints> c;
  if (constraints) {
    for (const auto& sentence : *constraints) {
      c.emplace_back();
      for (const auto& one : sentence) c.back().push_back(to_columns(one, column));
    }
  }
  auto hyps = run(prefixes ? &p : nullptr, constraints ? &c : nullptr, static_cast<int64_t>(ids.size()));
  for (auto& sentence : hyps) {
    for (auto& h : sentence) {
      for (auto& t : h.tokens) t = ids[static_cast<size_t>(t)];
    }
  }
  return hyps;
}

std::vector<std::vector<Hypothesis>> generate(models::Seq2SeqModel& model, const torch::Tensor& src,
                                              const torch::Tensor& src_lengths, int64_t vocab, const SearchOptions& opt,
                                              const std::vector<std::vector<int64_t>>* prefixes) {
  return generate(std::vector<models::Seq2SeqModel*>{&model}, src, src_lengths, vocab, opt, prefixes);
}

}  // namespace leanseq::decode
