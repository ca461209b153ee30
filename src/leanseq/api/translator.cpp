// leanseq::Translator and its options (include/leanseq/translator.h) over runtime's loaded models:
// the options go through decode's option table, and are checked there.
#include <leanseq/translator.h>

#include <mutex>

#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/core/error.h"
#include "leanseq/core/threads.h"
#include "leanseq/decode/option_table.h"
#include "leanseq/runtime/inference.h"

namespace leanseq {

class TranslationOptions::Impl {
 public:
  decode::TranslateOptions decoding;
};

TranslationOptions::TranslationOptions() : impl_(std::make_unique<Impl>()) {}
TranslationOptions::TranslationOptions(const TranslationOptions& other)
    : impl_(std::make_unique<Impl>(*other.impl_)) {}
TranslationOptions& TranslationOptions::operator=(const TranslationOptions& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
TranslationOptions::TranslationOptions(TranslationOptions&&) noexcept = default;
TranslationOptions& TranslationOptions::operator=(TranslationOptions&&) noexcept = default;
TranslationOptions::~TranslationOptions() = default;

namespace {
const decode::DecodingOption& option_named(const std::string& name) {
  const auto* option = decode::find_decoding_option(name);
  if (!option) throw ConfigError(name + ": not a decoding option (leanseq::Translator::options() lists them)");
  return *option;
}
}  // namespace

TranslationOptions& TranslationOptions::set_value(const std::string& name, const Value& value) {
  // (the variants hold the same types in the same order)
  decode::OptionValue v = std::visit([](const auto& x) { return decode::OptionValue(x); }, value);
  decode::set_option(impl_->decoding, option_named(name), v);
  return *this;
}

std::string TranslationOptions::get(const std::string& name) const {
  return option_named(name).value_text(impl_->decoding);
}

TranslationOptions& TranslationOptions::return_alignment(bool on) {
  impl_->decoding.search.need_attn = on;
  return *this;
}

struct Translator::Impl {
  runtime::LoadedTranslator loaded;
  std::string compute_type, notice;
  std::mutex mutex;  // one call at a time
};

Translator::Translator(const std::string& checkpoint, const LoadOptions& options) : impl_(std::make_unique<Impl>()) {
  const auto request = runtime::compute_type_request(options.compute_type, "compute_type");
  if (options.threads < 0) throw ConfigError("threads: expected 0 or more, got " + std::to_string(options.threads));
  if (options.threads > 0) set_compute_threads(options.threads);
  std::vector<std::string> paths{checkpoint};
  paths.insert(paths.end(), options.ensemble.begin(), options.ensemble.end());
  runtime::check_checkpoints_exist(paths);
  kernels::ResolvedComputeType resolved;
  impl_->loaded = runtime::load_for_inference(paths, checkpoint::resolve_device(options.device, "device"), request, resolved);
  impl_->compute_type = kernels::compute_type_name(resolved.type);
  impl_->notice = resolved.notice;
}

Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;
Translator::~Translator() = default;

std::vector<std::vector<TranslationResult>> Translator::translate(const std::vector<std::string>& lines,
                                                                  const TranslationOptions& options) const {
  const auto& opt = options.impl_->decoding;
  std::vector<std::string> todo;
  std::vector<size_t> where;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (decode::translatable(lines[i])) todo.push_back(lines[i]), where.push_back(i);
  }
  std::vector<std::vector<decode::TranslationHyp>> done;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    done = impl_->loaded.translator->translate(todo, opt);
  }
  std::vector<std::vector<TranslationResult>> out(lines.size());
  for (size_t k = 0; k < where.size(); ++k) {
    for (auto& h : done[k]) {
      TranslationResult r;
      r.text = std::move(h.text);
      r.tokens = std::move(h.pieces);
      r.score = h.hyp.score;
      r.token_scores = std::move(h.hyp.positional_scores);
      if (!h.hyp.alignment.empty()) r.alignment.assign(h.hyp.alignment.begin(), h.hyp.alignment.end() - 1);
      r.truncated = h.truncated;
      out[where[k]].push_back(std::move(r));
    }
  }
  return out;
}

std::vector<std::vector<float>> Translator::score(const std::vector<std::string>& sources,
                                                  const std::vector<std::string>& targets) const {
  if (sources.size() != targets.size()) {
    throw ConfigError("score: " + std::to_string(sources.size()) + " sources but " + std::to_string(targets.size()) +
                      " targets");
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->loaded.translator->score(sources, targets, decode::TranslateOptions{});
}

std::string Translator::source_language() const { return impl_->loaded.loaded.vocab.src_lang; }
std::string Translator::target_language() const { return impl_->loaded.loaded.vocab.tgt_lang; }
std::string Translator::compute_type() const { return impl_->compute_type; }
std::string Translator::compute_type_notice() const { return impl_->notice; }
int Translator::ensemble_size() const { return static_cast<int>(impl_->loaded.translator->ensemble_size()); }

std::vector<TranslationOptionInfo> Translator::options() {
  const decode::TranslateOptions defaults;
  std::vector<TranslationOptionInfo> out;
  for (const auto& o : decode::decoding_options()) out.push_back({o.name, o.expected(), o.value_text(defaults), o.help});
  return out;
}

}  // namespace leanseq
