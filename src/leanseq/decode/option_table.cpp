#include "leanseq/decode/option_table.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"

namespace leanseq::decode {

namespace {

using O = TranslateOptions;
constexpr double kLarge = 1e6;  // bound of the finite real options

const std::vector<DecodingOption>& table() {
  static const std::vector<DecodingOption> t = {
      {"beam", "--beam", "", true, "Search", "beam size (sampling: samples per sentence)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.beam; }), Range::closed(1, kMaxBeam), {}},
      {"nbest", "--nbest", "", true, "Search", "hypotheses per sentence, best first (at most beam)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.nbest; }), Range::closed(1, kMaxBeam), {}},
      {"lenpen", "--lenpen", "", true, "Search", "length penalty exponent: a score is its log-probability / length^lenpen",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.lenpen; }), Range::closed(-kLarge, kLarge), {}},
      {"max_len_a", "--max-len-a", "", true, "Search", "max length = a * source length + b",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.max_len_a; }), Range::closed(0, kLarge), {}},
      {"max_len_b", "--max-len-b", "", true, "Search", "max length = a * source length + b",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.max_len_b; }), Range::closed(0, kMaxLenB), {}},
      {"min_len", "--min-len", "", true, "Search", "translations have at least this many tokens before </s>",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.min_len; }), Range::closed(0, kMaxLenB), {}},
      {"unk_penalty", "--unk-penalty,--unkpen", "", true, "Search", "subtracted from <unk> log-probabilities",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.unk_penalty; }), Range::closed(-kLarge, kLarge),
       {}},
      {"no_repeat_ngram_size", "--no-repeat-ngram-size", "", true, "Search",
       "no translation repeats an n-gram of this many tokens (0: off)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.no_repeat_ngram_size; }),
       Range::closed(0, kMaxLenB), {}},
      {"diverse_beam_groups", "--diverse-beam-groups", "", false, "Search",
       "diverse beam search: the beam is searched in this many groups, each penalized for the tokens earlier groups "
       "chose at the step (-1: off; it divides beam)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.diverse_beam_groups; }),
       Range::closed(1, kMaxBeam), -1.0},
      {"diverse_beam_strength", "--diverse-beam-strength", "", false, "Search",
       "diverse beam search: the penalty per earlier group's candidate of a token",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.diverse_beam_strength; }),
       Range::closed(-kLarge, kLarge), {}},
      {"diversity_rate", "--diversity-rate", "", false, "Search",
       "diverse siblings: the k-th best continuation of each hypothesis loses k x this (-1: off)",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.diversity_rate; }),
       Range::left_open(-1, kLarge), -1.0},
      {"prefix", "--prefix", "", false, "Search", "text every translation starts with (then the search goes on)",
       DecodingOption::TextField([](O& o) -> std::string& { return o.prefix; }), {}, {}},
      {"sampling", "--sampling", "", false, "Sampling",
       "sample instead of searching: beam samples per sentence (nbest of them, best first)",
       DecodingOption::FlagField([](O& o) -> bool& { return o.search.sampling; }), {}, {}},
      {"sampling_topk", "--sampling-topk", "", false, "Sampling", "sample from the K most likely tokens only (-1: all)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.search.sampling_topk; }), Range::closed(1, 1e9), -1.0},
      {"sampling_topp", "--sampling-topp", "", false, "Sampling",
       "sample from the smallest set of tokens whose probability reaches P (-1: all)",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.sampling_topp; }), Range::left_open(0, 1), -1.0},
      {"temperature", "--temperature", "", false, "Sampling", "logits are divided by T (sampling and search)",
       DecodingOption::NumberField([](O& o) -> double& { return o.search.temperature; }), Range::closed(1e-6, kLarge), {}},
      {"batch_size", "--batch-size", "max_batch_size", false, "Performance", "sentences per batch",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.max_sentences; }), Range::closed(1, 1e9), {}},
      {"max_tokens", "--max-tokens", "", false, "Performance",
       "padded source tokens per batch (0: no limit): a long line shares its batch with few others",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.max_tokens; }), Range::closed(0, 1e12), {}},
      {"max_input_length", "--max-input-length", "", false, "Input and output",
       "longest source in subword tokens, </s> included (0: no limit); translate cuts longer lines to it with a "
       "warning, serve refuses them (413)",
       DecodingOption::IntegerField([](O& o) -> int64_t& { return o.max_input_length; }), Range::closed(0, 1e9), {}},
  };
  return t;
}

std::string quoted(const std::string& s) { return "'" + first_line(s, 100) + "'"; }

std::string value_text(const OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return shortest_text(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return quoted(std::get<std::string>(v));
}

bool accepts(const DecodingOption& option, double v) {
  return std::isfinite(v) && (option.range.contains(v) || (option.off && v == *option.off));
}

// Text as the option's type (a form field); nullopt when it is not one.
std::optional<OptionValue> parse(const DecodingOption& option, const std::string& s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  switch (option.kind()) {
    case DecodingOption::Kind::integer: {
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (errno != 0 || *end != '\0') return std::nullopt;
      return OptionValue(static_cast<int64_t>(v));
    }
    case DecodingOption::Kind::number: {
      const double v = std::strtod(s.c_str(), &end);
      if (*end != '\0') return std::nullopt;
      return OptionValue(v);
    }
    case DecodingOption::Kind::flag:
      if (s == "true" || s == "1") return OptionValue(true);
      if (s == "false" || s == "0") return OptionValue(false);
      return std::nullopt;
    case DecodingOption::Kind::text: return OptionValue(s);
  }
  return std::nullopt;
}

}  // namespace

std::string DecodingOption::expected() const {
  const std::string or_off = off ? " or " + shortest_text(*off) + " (off)" : "";
  switch (kind()) {
    case Kind::integer: return "an integer" + range.text() + or_off;
    case Kind::number: return "a finite number" + range.text() + or_off;
    case Kind::flag: return "true or false";
    case Kind::text: return "UTF-8 text";
  }
  return "";
}

std::string DecodingOption::value_text(const TranslateOptions& o) const {
  auto& m = const_cast<TranslateOptions&>(o);  // the fields are only read
  switch (kind()) {
    case Kind::integer: return std::to_string(std::get<IntegerField>(field)(m));
    case Kind::number: return shortest_text(std::get<NumberField>(field)(m));
    case Kind::flag: return std::get<FlagField>(field)(m) ? "true" : "false";
    case Kind::text: return std::get<TextField>(field)(m);
  }
  return "";
}

bool DecodingOption::same(const TranslateOptions& a, const TranslateOptions& b) const {
  auto& x = const_cast<TranslateOptions&>(a);  // the fields are only read
  auto& y = const_cast<TranslateOptions&>(b);
  return std::visit([&](auto get) { return get(x) == get(y); }, field);
}

void DecodingOption::refuse(const std::string& got) const {
  throw ConfigError(std::string(name) + ": expected " + expected() + ", got " + got);
}

const std::vector<DecodingOption>& decoding_options() { return table(); }

const DecodingOption* find_decoding_option(const std::string& name, bool python) {
  for (const auto& option : table()) {
    if ((python ? option.python_name() : std::string(option.name)) == name) return &option;
  }
  return nullptr;
}

void set_option(TranslateOptions& o, const DecodingOption& option, const OptionValue& given) {
  OptionValue value = given;
  if (const auto* s = std::get_if<std::string>(&given); s && option.kind() != DecodingOption::Kind::text) {
    const auto parsed = parse(option, *s);
    if (!parsed) option.refuse(quoted(*s));
    value = *parsed;
  }
  switch (option.kind()) {
    case DecodingOption::Kind::integer: {
      const auto* v = std::get_if<int64_t>(&value);
      if (!v || !accepts(option, static_cast<double>(*v))) option.refuse(value_text(value));
      std::get<DecodingOption::IntegerField>(option.field)(o) = *v;
      break;
    }
    case DecodingOption::Kind::number: {
      double v = 0;
      if (const auto* i = std::get_if<int64_t>(&value)) {
        v = static_cast<double>(*i);
      } else if (const auto* d = std::get_if<double>(&value)) {
        v = *d;
      } else {
        option.refuse(value_text(value));
      }
      if (!accepts(option, v)) option.refuse(value_text(value));
      std::get<DecodingOption::NumberField>(option.field)(o) = v;
      break;
    }
    case DecodingOption::Kind::flag: {
      const auto* b = std::get_if<bool>(&value);
      if (!b) option.refuse(value_text(value));
      std::get<DecodingOption::FlagField>(option.field)(o) = *b;
      break;
    }
    case DecodingOption::Kind::text: {
      const auto* s = std::get_if<std::string>(&value);
      if (!s || io::utf8_invalid_offset(*s) >= 0) option.refuse(s ? std::string("bytes that are not UTF-8") : value_text(value));
      std::get<DecodingOption::TextField>(option.field)(o) = *s;
      break;
    }
  }
}

void check_options(const TranslateOptions& opt) {
  auto& o = const_cast<TranslateOptions&>(opt);  // the fields are only read
  for (const auto& option : table()) {
    switch (option.kind()) {
      case DecodingOption::Kind::integer: {
        const int64_t v = std::get<DecodingOption::IntegerField>(option.field)(o);
        if (!accepts(option, static_cast<double>(v))) option.refuse(std::to_string(v));
        break;
      }
      case DecodingOption::Kind::number: {
        const double v = std::get<DecodingOption::NumberField>(option.field)(o);
        if (!accepts(option, v)) option.refuse(shortest_text(v));
        break;
      }
      case DecodingOption::Kind::flag: break;
      case DecodingOption::Kind::text:
        if (io::utf8_invalid_offset(std::get<DecodingOption::TextField>(option.field)(o)) >= 0) {
          option.refuse("bytes that are not UTF-8");
        }
        break;
    }
  }
  const auto& s = opt.search;
  if (s.nbest > s.beam) {
    throw ConfigError("nbest: expected at most beam (" + std::to_string(s.beam) + "), got " + std::to_string(s.nbest));
  }
  if (!s.sampling && (s.sampling_topk > 0 || s.sampling_topp > 0)) {
    throw ConfigError("sampling_topk and sampling_topp go with sampling");
  }
  if (s.sampling_topk > 0 && s.sampling_topp > 0) throw ConfigError("sampling_topk and sampling_topp: give one of them");
  if (s.diverse_beam_groups > 1 && s.beam % s.diverse_beam_groups != 0) {
    throw ConfigError("diverse_beam_groups: expected a divisor of beam (" + std::to_string(s.beam) + "), got " +
                      std::to_string(s.diverse_beam_groups));
  }
  if (s.diverse_beam_groups > 1 && (s.sampling || s.constraint_order != ConstraintOrder::none)) {
    throw ConfigError("diverse_beam_groups goes with beam search, not sampling or constraints");
  }
  if (s.diversity_rate > -1 && (s.sampling || s.constraint_order != ConstraintOrder::none || s.diverse_beam_groups > 1)) {
    throw ConfigError("diversity_rate goes with beam search, not sampling, constraints or diverse_beam_groups");
  }
  if (s.sampling && s.constraint_order != ConstraintOrder::none) {
    throw ConfigError("constraints go with beam search, not sampling");
  }
}

}  // namespace leanseq::decode
