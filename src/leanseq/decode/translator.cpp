#include "leanseq/decode/translator.h"

#include <map>
#include <numeric>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/batching.h"

namespace leanseq::decode {

Translator::Translator(std::shared_ptr<models::Seq2SeqModel> model, data::Dictionary src_dict,
                       data::Dictionary tgt_dict, std::shared_ptr<const data::TextPipeline> src_text,
                       std::shared_ptr<const data::TextPipeline> tgt_text)
    : model_(std::move(model)),
      src_dict_(std::move(src_dict)),
      tgt_dict_(std::move(tgt_dict)),
      src_text_(std::move(src_text)),
      tgt_text_(std::move(tgt_text)) {}

std::vector<std::string> Translator::source_words(const std::string& line, InputFormat format) const {
  if (format == InputFormat::raw) return src_text_->encode(line);
  std::vector<std::string> tokens;
  std::istringstream words(line);
  for (std::string w; words >> w;) tokens.push_back(w);
  return tokens;
}

std::vector<int64_t> Translator::framed_source(const std::vector<std::string>& words) const {
  auto ids = src_dict_.encode(words, source_eos_);
  if (source_bos_) ids.insert(ids.begin(), data::Dictionary::kBos);
  return ids;
}

std::vector<int64_t> Translator::encode_source(const std::string& line, InputFormat format) const {
  return framed_source(source_words(line, format));
}

std::string Translator::detokenize(const std::vector<int64_t>& ids) const {
  return tgt_text_->decode(tgt_dict_.decode(ids));
}

std::vector<models::Seq2SeqModel*> Translator::models() const {
  std::vector<models::Seq2SeqModel*> models{model_.get()};
  for (const auto& m : members_) models.push_back(m.get());
  return models;
}

void Translator::add_ensemble_member(std::shared_ptr<models::Seq2SeqModel> model) {
  model->eval();
  members_.push_back(std::move(model));
}

std::vector<std::vector<float>> Translator::score(const std::vector<std::string>& sources,
                                                  const std::vector<std::string>& targets, const TranslateOptions& opt) {
  TORCH_CHECK(sources.size() == targets.size(), "score: ", sources.size(), " sources but ", targets.size(), " targets");
  c10::InferenceMode inference;
  const auto ensemble = models();
  const auto device = model_->parameters().front().device();
  std::vector<std::vector<float>> out;
  for (size_t from = 0; from < sources.size(); from += static_cast<size_t>(opt.max_sentences)) {
    const size_t to = std::min(sources.size(), from + static_cast<size_t>(opt.max_sentences));
    std::vector<std::vector<int64_t>> src, tgt;
    std::vector<int64_t> ids;
    for (size_t i = from; i < to; ++i) {
      src.push_back(encode_source(sources[i], opt.input_format));
      tgt.push_back(opt.input_format == InputFormat::raw ? tgt_dict_.encode(tgt_text_->encode(targets[i]))
                                                         : encode_source(targets[i], InputFormat::tokens));
      ids.push_back(static_cast<int64_t>(i));
    }
    auto batch = data::collate(src, tgt, ids).to(device);
    std::vector<torch::Tensor> lprobs;
    for (auto* m : ensemble) {
      const auto logits = m->decode(batch.prev_output, m->encode(batch.src, batch.src_lengths)).logits;
      lprobs.push_back(log_probs(logits, opt.search.temperature));
    }
    auto picked = ensemble_log_probs(lprobs).gather(2, batch.target.unsqueeze(-1)).squeeze(-1).cpu();  // [B, T]
    for (size_t b = 0; b < tgt.size(); ++b) {
      auto row = picked[static_cast<int64_t>(b)].narrow(0, 0, static_cast<int64_t>(tgt[b].size())).contiguous();
      out.emplace_back(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
  }
  return out;
}

std::vector<int64_t> Translator::encode_prefix(const std::string& text) const {
  return tgt_dict_.encode(tgt_text_->encode(text), false);
}

Constraints Translator::encode_constraints(const std::vector<std::string>& texts, InputFormat format) const {
  Constraints out;
  size_t total = 0;
  for (const auto& text : texts) {
    // The text is bounded before it is split, at two bytes per subword of the bound.
    if (text.size() > 2 * static_cast<size_t>(kMaxConstraintTokens)) {
      throw DataError("a constraint longer than " + std::to_string(2 * kMaxConstraintTokens) + " bytes");
    }
    auto ids = format == InputFormat::raw ? encode_prefix(text) : tgt_dict_.encode(source_words(text, format), false);
    if (ids.empty()) throw DataError("an empty constraint");
    total += ids.size();
    if (total > static_cast<size_t>(kMaxConstraintTokens)) {
      throw DataError("constraints longer than " + std::to_string(kMaxConstraintTokens) + " subwords");
    }
    out.push_back(std::move(ids));
  }
  return out;
}

namespace {
// `line`, or its first max_input_length x kMaxBytesPerToken bytes (at a character boundary) when
// it is longer and max_input_length is set.
const std::string& within_input_bytes(const std::string& line, int64_t max_input_length) {
  thread_local std::string cut;
  if (max_input_length <= 0) return line;
  const size_t limit = static_cast<size_t>(max_input_length) * kMaxBytesPerToken;
  if (line.size() <= limit) return line;
  size_t keep = limit;
  while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xC0) == 0x80) --keep;
  cut.assign(line, 0, keep);
  return cut;
}

// fairseq's replace_unk: each <unk> of `t` (its pieces) becomes the source word of the position it
// is aligned to, or that word's translation in the dictionary.
void replace_unknowns(TranslationHyp& t, const std::vector<std::string>& source, const TranslateOptions& opt) {
  for (size_t i = 0; i < t.pieces.size() && i < t.hyp.alignment.size(); ++i) {
    if (t.hyp.tokens[i] != data::Dictionary::kUnk) continue;
    const auto at = static_cast<size_t>(t.hyp.alignment[i]);
    if (at >= source.size()) continue;
    const std::string& word = source[at];
    t.pieces[i] = word;
    if (!opt.replace_unk_dict) continue;
    if (const auto found = opt.replace_unk_dict->find(word); found != opt.replace_unk_dict->end()) t.pieces[i] = found->second;
  }
}
}  // namespace

std::vector<std::vector<TranslationHyp>> Translator::translate(const std::vector<std::string>& lines,
                                                               const TranslateOptions& opt, TranslationStats* stats,
                                                               const std::vector<std::string>* prefixes,
                                                               const std::vector<Constraints>* constraints) {
  std::vector<std::vector<int64_t>> sources;
  sources.reserve(lines.size());
  std::vector<std::vector<std::string>> words;  // --replace-unk: the source subwords themselves
  for (const auto& line : lines) {
    // A line far longer than its first max_input_length tokens can span is cut before it is
    // tokenized (which costs a few hundred times its bytes); it would be cut after anyway.
    const std::string& l = within_input_bytes(line, opt.max_input_length);
    if (!opt.replace_unk) {
      sources.push_back(encode_source(l, opt.input_format));
      continue;
    }
    words.push_back(source_words(l, opt.input_format));
    sources.push_back(framed_source(words.back()));
  }
  const auto* source_words = opt.replace_unk ? &words : nullptr;
  if (!prefixes && opt.prefix.empty()) return translate_ids(sources, opt, stats, nullptr, source_words, constraints);
  std::vector<std::vector<int64_t>> ids;
  const auto shared = opt.prefix.empty() ? std::vector<int64_t>{} : encode_prefix(opt.prefix);
  for (size_t i = 0; i < lines.size(); ++i) ids.push_back(prefixes ? encode_prefix((*prefixes)[i]) : shared);
  return translate_ids(sources, opt, stats, &ids, source_words, constraints);
}

std::vector<std::vector<TranslationHyp>> Translator::translate_ids(const std::vector<std::vector<int64_t>>& sources,
                                                                   const TranslateOptions& opt_in, TranslationStats* stats,
                                                                   const std::vector<std::vector<int64_t>>* prefixes,
                                                                   const std::vector<std::vector<std::string>>* source_words,
                                                                   const std::vector<Constraints>* constraints) {
  check_options(opt_in);  // every caller's options, whatever surface they came from
  std::vector<std::vector<int64_t>> continued;
  if (continues_source_) {
    for (size_t i = 0; i < sources.size(); ++i) {
      auto p = sources[i];
      if (!p.empty() && p.back() == data::Dictionary::kEos) p.pop_back();
      if (prefixes) p.insert(p.end(), (*prefixes)[i].begin(), (*prefixes)[i].end());
      continued.push_back(std::move(p));
    }
    prefixes = &continued;
  }
  Timer timer;
  TranslateOptions opt = opt_in;
  if (opt.replace_unk) opt.search.need_attn = true;  // the alignment says which source subword
  opt.search.max_len_cuts = max_len_cuts_;
  opt.search.source_bos = source_bos_, opt.search.source_eos = source_eos_;
  if (model_->is_training()) model_->eval();  // (a model in training validates through this; threads share the others)
  auto device = model_->parameters().front().device();
  // Sources longer than max_input_length tokens (</s> included) are cut to it, ending with </s>
  // (when they are framed with one).
  const auto limit = static_cast<size_t>(std::max<int64_t>(opt.max_input_length, 0));
  std::map<int64_t, std::vector<int64_t>> cut;  // by source index
  for (size_t s = 0; s < sources.size(); ++s) {
    if (limit > 0 && sources[s].size() > limit) {
      auto& c = cut[static_cast<int64_t>(s)];
      const size_t keep = source_eos_ ? limit - 1 : limit;
      c.assign(sources[s].begin(), sources[s].begin() + static_cast<std::ptrdiff_t>(keep));
      if (source_eos_) c.push_back(sources[s].back());  // </s>
    }
  }
  if (stats) stats->truncated += static_cast<int64_t>(cut.size());
  auto source = [&](int64_t s) -> const std::vector<int64_t>& {
    auto it = cut.find(s);
    return it == cut.end() ? sources[s] : it->second;
  };
  // Longest first: similar lengths share a batch and the slowest batches start early.
  std::vector<int64_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return source(a).size() > source(b).size(); });
  std::vector<std::vector<TranslationHyp>> results(sources.size());
  size_t i = 0;
  while (i < order.size()) {
    std::vector<int64_t> ids;
    int64_t longest = 0;
    while (i < order.size() && static_cast<int64_t>(ids.size()) < opt.max_sentences) {
      int64_t len = static_cast<int64_t>(source(order[i]).size());
      if (opt.max_tokens > 0 && !ids.empty() &&
          std::max(longest, len) * static_cast<int64_t>(ids.size() + 1) > opt.max_tokens) {
        break;
      }
      longest = std::max(longest, len);
      ids.push_back(order[i++]);
    }
    std::vector<std::vector<int64_t>> src;
    for (int64_t id : ids) src.push_back(source(id));
    auto batch = data::collate(src, {}, ids);
    std::vector<std::vector<int64_t>> batch_prefixes;
    std::vector<Constraints> batch_constraints;
    for (int64_t id : ids) {
      if (prefixes) batch_prefixes.push_back((*prefixes)[id]);
      if (constraints) batch_constraints.push_back((*constraints)[id]);
    }
    torch::Tensor output_ids;  // a shortlist's tokens for this batch
    if (opt.shortlist) {
      std::vector<std::vector<std::string>> words;
      std::vector<int64_t> extra;
      for (const auto& s : src) words.push_back(src_dict_.decode(s));
      for (const auto& p : batch_prefixes) extra.insert(extra.end(), p.begin(), p.end());
      for (const auto& cs : batch_constraints) {
        for (const auto& c : cs) extra.insert(extra.end(), c.begin(), c.end());
      }
      output_ids = opt.shortlist->ids_for(words, extra);
    }
    auto hyps = generate(models(), batch.src.to(device), batch.src_lengths.to(device), tgt_dict_.size(), opt.search,
                         prefixes ? &batch_prefixes : nullptr, constraints ? &batch_constraints : nullptr, output_ids);
    for (size_t b = 0; b < ids.size(); ++b) {
      auto& out = results[ids[b]];
      for (int64_t k = 0; k < opt.search.nbest && k < static_cast<int64_t>(hyps[b].size()); ++k) {
        TranslationHyp t;
        t.hyp = hyps[b][k];
        t.pieces = tgt_dict_.decode(t.hyp.tokens);
        if (opt.replace_unk) replace_unknowns(t, source_words ? (*source_words)[ids[b]] : src_dict_.decode(source(ids[b])), opt);
        t.text = tgt_text_->decode(t.pieces);
        t.truncated = cut.count(ids[b]) > 0;
        out.push_back(std::move(t));
      }
      if (stats && !hyps[b].empty()) stats->target_tokens += static_cast<int64_t>(hyps[b][0].tokens.size());
    }
  }
  if (stats) {
    stats->sentences += static_cast<int64_t>(sources.size());
    stats->seconds += timer.seconds();
  }
  return results;
}

}  // namespace leanseq::decode
