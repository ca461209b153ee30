// Checks shared by the model families: reproducing a fairseq whole-model fixture, and exact
// incremental decoding (step by step, in chunks, after a beam reorder).
#pragma once
#include <gtest/gtest.h>

#include <limits>

#include "leanseq/models/seq2seq.h"
#include "support/fixtures.h"

namespace leanseq::test {

// Encoder output, padding mask, logits, log-probabilities and the last layer's attention.
inline void check_fairseq_forward(models::Seq2SeqModel& model, Fixture& fx) {
  torch::NoGradGuard g;
  auto src = fx.inputs["src_tokens"], lengths = fx.inputs["src_lengths"], prev = fx.inputs["prev_output_tokens"];
  auto enc = model.encode(src, lengths);
  // fairseq's encoder output is S x B x C.
  EXPECT_LT(max_abs_diff(enc.out.transpose(0, 1), fx.outputs["encoder_out"]), 1e-5);
  EXPECT_TRUE(enc.padding_mask.to(torch::kLong).equal(fx.outputs["encoder_padding_mask"]));
  auto out = model.decode(prev, enc, true);
  EXPECT_LT(max_abs_diff(out.logits, fx.outputs["decoder_logits"]), 1e-5);
  EXPECT_LT(max_abs_diff(torch::log_softmax(out.logits, -1), fx.outputs["decoder_lprobs"]), 1e-5);
  EXPECT_LT(max_abs_diff(out.attn, fx.outputs["decoder_attn"]), 1e-5);
}

// Teacher-forced incremental decoding and 4 greedy steps. fairseq's full pass over the greedy
// prefix equals its steps unless full_matches_steps is false (see the fixture's "what").
inline void check_fairseq_incremental_and_greedy(models::Seq2SeqModel& model, Fixture& fx, bool full_matches_steps) {
  torch::NoGradGuard g;
  auto src = fx.inputs["src_tokens"], prev = fx.inputs["prev_output_tokens"];
  auto enc = model.encode(src, fx.inputs["src_lengths"]);
  auto state = model.init_state(enc);
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < prev.size(1); ++t) steps.push_back(model.step(prev.narrow(1, t, 1), enc, state).logits);
  EXPECT_LT(max_abs_diff(torch::cat(steps, 1), fx.outputs["incremental_teacher_forced_logits"]), 1e-5);

  // Greedy: 4 steps, argmax with the pad column excluded.
  auto state2 = model.init_state(enc);
  auto tokens = torch::full({src.size(0), 1}, 2, torch::kLong);
  std::vector<torch::Tensor> logits;
  for (int s = 0; s < 4; ++s) {
    auto l = model.step(tokens.narrow(1, s, 1), enc, state2).logits;  // [B, 1, V]
    logits.push_back(l);
    auto masked = l.squeeze(1).clone();
    masked.select(1, 1).fill_(-std::numeric_limits<float>::infinity());
    tokens = torch::cat({tokens, masked.argmax(1, true)}, 1);
  }
  EXPECT_TRUE(tokens.equal(fx.outputs["greedy_tokens"]));
  EXPECT_LT(max_abs_diff(torch::cat(logits, 1), fx.outputs["greedy_step_logits"]), 1e-5);
  if (full_matches_steps) {
    EXPECT_LT(max_abs_diff(model.decode(tokens.narrow(1, 0, 4), enc).logits, fx.outputs["greedy_full_logits"]),
              1e-5);
  } else {
    // leanseq's full pass follows the incremental semantics that fairseq's full pass departs from.
    EXPECT_LT(max_abs_diff(model.decode(tokens.narrow(1, 0, 4), enc).logits, fx.outputs["greedy_step_logits"]),
              1e-5);
  }
}

// Step-by-step decoding (in chunks of `chunk` tokens, with a random beam reorder half-way) equals
// the teacher-forced pass over the reordered prefixes.
inline void check_incremental(models::Seq2SeqModel& model, int64_t V, int64_t chunk) {
  torch::manual_seed(7);
  const int64_t B = 4, S = 7, T = 9;
  auto src = torch::randint(4, V, {B, S}, torch::kLong);
  src.select(1, S - 1).fill_(2);
  src[1].narrow(0, 4, 3).fill_(1);  // right padding in one row
  src[1][3] = 2;
  auto prev = torch::randint(4, V, {B, T}, torch::kLong);
  prev.select(1, 0).fill_(2);
  torch::NoGradGuard g;
  model.eval();
  auto enc = model.encode(src, torch::full({B}, S, torch::kLong));
  auto state = model.init_state(enc);
  auto order = torch::tensor({2, 0, 3, 3}, torch::kLong);
  auto full_enc = model.encode(src.index_select(0, order), torch::full({B}, S, torch::kLong));
  auto full = model.decode(prev.index_select(0, order), full_enc).logits;
  auto full_before = model.decode(prev, enc).logits;
  int64_t t = 0;
  const int64_t reorder_at = 4;
  std::vector<torch::Tensor> after;
  while (t < T) {
    int64_t n = std::min(chunk, (t < reorder_at ? reorder_at : T) - t);
    auto tokens = (t < reorder_at ? prev : prev.index_select(0, order)).narrow(1, t, n);
    auto l = model.step(tokens, enc, state).logits;
    if (t < reorder_at) {
      EXPECT_LT(max_abs_diff(l, full_before.narrow(1, t, n)), 1e-5) << "before reorder, t=" << t;
    } else {
      EXPECT_LT(max_abs_diff(l, full.narrow(1, t, n)), 1e-5) << "after reorder, t=" << t;
    }
    t += n;
    if (t == reorder_at) model.reorder(enc, state, order, false);
  }
}

}  // namespace leanseq::test
