// fairseq's own BLEU (its libbleu, the scorer of fairseq-score and of fairseq-generate's last
// line) over whitespace tokens, with its rules: each line's tokens get an </s> appended, then
// <pad>s are trimmed at the start and </s>/<pad> at the end, but never the first token (so an
// empty line counts as one token, </s>); a reference's <unk> matches nothing; n-gram matches are
// clipped by the hypothesis' counts; no smoothing (one_init: fairseq's sentence-level +1 on 2- to
// 4-grams). Its result_string is fairseq's line: "BLEU4 = 27.70, 60.4/33.5/21.0/13.6 (BP=1.000,
// ratio=1.000, syslen=10, reflen=9)".
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::eval {

class FairseqBleu {
 public:
  explicit FairseqBleu(bool one_init = false);
  // One sentence pair, as whitespace-separated tokens (the words of fairseq's encode_line).
  void add(const std::vector<std::string>& ref, const std::vector<std::string>& hyp);
  // BLEU up to `order` (1 to 4) in percent; the n-gram precisions (0 to 1); the brevity penalty.
  double score(int order = 4) const;
  std::array<double, 4> precisions() const;
  double brevity() const;
  std::string result_string(int order = 4) const;
  uint64_t syslen() const { return predlen_; }
  uint64_t reflen() const { return reflen_; }

 private:
  uint64_t reflen_ = 0, predlen_ = 0;
  std::array<uint64_t, 4> match_{}, count_{};
};

}  // namespace leanseq::eval
