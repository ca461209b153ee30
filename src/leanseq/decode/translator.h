// Text in, text out: SentencePiece + dictionary around beam search, batched by sentences and
// tokens, results in input order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_pipeline.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/decode/options.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::decode {

struct TranslationHyp {
  std::string text;                  // detokenized
  std::vector<std::string> pieces;   // subword pieces (without </s>)
  Hypothesis hyp;
  bool truncated = false;            // the source was cut to max_input_length
};

struct TranslationStats {
  int64_t sentences = 0, target_tokens = 0;  // target tokens include </s>, as fairseq counts
  int64_t truncated = 0;                     // sources cut to max_input_length
  double seconds = 0;
};

// The most bytes of text a subword token is taken to span: a subword of real text spans far fewer
// (a SentencePiece piece at most 16 characters), so a line longer than max_input_length times this
// is cut there before it is tokenized, its first max_input_length tokens unchanged.
constexpr size_t kMaxBytesPerToken = 256;

class Translator {
 public:
  // src_text and tgt_text: the subword pipelines of the two sides (SentencePiece, or Moses + BPE).
  Translator(std::shared_ptr<models::Seq2SeqModel> model, data::Dictionary src_dict, data::Dictionary tgt_dict,
             std::shared_ptr<const data::TextPipeline> src_text, std::shared_ptr<const data::TextPipeline> tgt_text);

  // n-best translations of each line, in input order. `prefixes` (one per line, or nullptr for
  // opt.prefix on every line): target text each translation must start with. `constraints` (one
  // per line, from encode_constraints; with opt.search.constraint_order): what each must contain.
  std::vector<std::vector<TranslationHyp>> translate(const std::vector<std::string>& lines, const TranslateOptions& opt,
                                                     TranslationStats* stats = nullptr,
                                                     const std::vector<std::string>* prefixes = nullptr,
                                                     const std::vector<Constraints>* constraints = nullptr);
  // Translates already-encoded sources (each ending with </s>), with target prefixes as ids
  // (without </s>; one per source, or nullptr). opt.replace_unk puts `source_words` (each source's
  // subwords, as the ids encode them) in place of <unk>s, else the dictionary's words for the ids.
  std::vector<std::vector<TranslationHyp>> translate_ids(const std::vector<std::vector<int64_t>>& sources,
                                                         const TranslateOptions& opt, TranslationStats* stats = nullptr,
                                                         const std::vector<std::vector<int64_t>>* prefixes = nullptr,
                                                         const std::vector<std::vector<std::string>>* source_words = nullptr,
                                                         const std::vector<Constraints>* constraints = nullptr);
  // Target text as ids without </s>, as a prefix.
  std::vector<int64_t> encode_prefix(const std::string& text) const;
  // Constraints as target ids, each text through the target's subword pipeline (`format` tokens:
  // split at spaces), unknown subwords as <unk>, as fairseq-interactive encodes them. DataError for
  // a constraint without a token, or more than kMaxConstraintTokens in all.
  Constraints encode_constraints(const std::vector<std::string>& texts, InputFormat format = InputFormat::raw) const;
  // Forced decoding: each target's per-token log-probabilities given its source (</s> last; the
  // ensemble's mean probability when there are several models), `max_sentences` pairs at a time.
  std::vector<std::vector<float>> score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                        const TranslateOptions& opt);
  // Another model decoding with the first as an ensemble (same dictionaries: the caller checks).
  void add_ensemble_member(std::shared_ptr<models::Seq2SeqModel> model);
  int64_t ensemble_size() const { return static_cast<int64_t>(members_.size()) + 1; }
  std::vector<models::Seq2SeqModel*> models() const;  // the first model, then the members

  // How sources are framed: fairseq's </s> after them (the default), or as a CTranslate2 model
  // wants (<s> before, </s> after, either, or neither).
  void set_source_framing(bool bos, bool eos) { source_bos_ = bos, source_eos_ = eos; }
  // Whether the search ends hypotheses at the length limit as CTranslate2 does (its models:
  // SearchOptions::max_len_cuts) or as fairseq does.
  void set_max_len_cuts(bool cuts) { max_len_cuts_ = cuts; }
  // A language model continues each source: its tokens (without </s>) begin every output, as the
  // prefix fairseq's language_modeling task hands its generator, followed by any prefix given.
  void set_continues_source(bool continues) { continues_source_ = continues; }
  // A line as source ids, framed (</s> last by default), read as `format` says.
  std::vector<int64_t> encode_source(const std::string& line, InputFormat format = InputFormat::raw) const;
  // The subwords those ids stand for (raw text through the source pipeline; tokens as they are).
  std::vector<std::string> source_words(const std::string& line, InputFormat format = InputFormat::raw) const;
  std::string detokenize(const std::vector<int64_t>& target_ids) const;  // stops at </s>
  const data::Dictionary& tgt_dict() const { return tgt_dict_; }
  const data::Dictionary& src_dict() const { return src_dict_; }
  std::vector<std::string> source_pieces(const std::string& line) const { return src_text_->encode(line); }
  const data::TextPipeline& tgt_text() const { return *tgt_text_; }

 private:
  std::shared_ptr<models::Seq2SeqModel> model_;
  std::vector<std::shared_ptr<models::Seq2SeqModel>> members_;  // further ensemble members
  data::Dictionary src_dict_, tgt_dict_;
  std::shared_ptr<const data::TextPipeline> src_text_, tgt_text_;
  bool source_bos_ = false, source_eos_ = true, max_len_cuts_ = false, continues_source_ = false;
  std::vector<int64_t> framed_source(const std::vector<std::string>& words) const;
};

}  // namespace leanseq::decode
