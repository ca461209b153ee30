// Translating from a C++ program: a model loaded from its file, its options, its results. Plain
// standard types only; part of the stable API (docs/versioning.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace leanseq {

// How a model is loaded.
struct LoadOptions {
  std::string device = "cpu";  // cpu, cuda or cuda:N
  // default (the type the weights are stored in), auto, float32, int8, int8_bfloat16, bfloat16,
  // float16 (docs/fast.md); a type this CPU or build lacks falls back, and compute_type_notice() says so
  std::string compute_type = "default";
  int threads = 0;                    // compute threads of the process (0: leave as they are)
  std::vector<std::string> ensemble;  // more checkpoints that decode with the first as one ensemble
};

// The decoding options of `leanseq translate`, by the names its reference lists (beam, nbest,
// lenpen, max_len_a, max_len_b, sampling, batch_size, ...: docs/reference); an option not set
// keeps the command's default. set() checks the name and the value at once: ConfigError
// "<name>: expected <what it takes>, got <value>", the message of every other surface.
class TranslationOptions {
 public:
  using Value = std::variant<int64_t, double, bool, std::string>;
  TranslationOptions();
  TranslationOptions(const TranslationOptions& other);
  TranslationOptions& operator=(const TranslationOptions& other);
  TranslationOptions(TranslationOptions&&) noexcept;
  TranslationOptions& operator=(TranslationOptions&&) noexcept;
  ~TranslationOptions();

  TranslationOptions& set(const std::string& name, int64_t value) { return set_value(name, value); }
  TranslationOptions& set(const std::string& name, int value) { return set_value(name, int64_t{value}); }
  TranslationOptions& set(const std::string& name, double value) { return set_value(name, value); }
  TranslationOptions& set(const std::string& name, bool value) { return set_value(name, value); }
  TranslationOptions& set(const std::string& name, const std::string& value) { return set_value(name, value); }
  TranslationOptions& set(const std::string& name, const char* value) { return set_value(name, std::string(value)); }
  // The value of `name` as text ("5" for beam by default); ConfigError for an unknown name.
  std::string get(const std::string& name) const;
  // Whether results carry each target token's most attended source position.
  TranslationOptions& return_alignment(bool on);

  class Impl;

 private:
  friend class Translator;
  TranslationOptions& set_value(const std::string& name, const Value& value);
  std::unique_ptr<Impl> impl_;
};

// One option as `names()` lists it.
struct TranslationOptionInfo {
  std::string name, expected, default_value, help;
};

struct TranslationResult {
  std::string text;                   // detokenized
  std::vector<std::string> tokens;    // the target's subwords (without </s>)
  double score = 0;                   // log-probability, normalized by length^lenpen
  std::vector<float> token_scores;    // each token's log-probability, </s>'s last
  std::vector<int64_t> alignment;     // per token (not </s>): its source position, with return_alignment
  bool truncated = false;             // the source was cut to max_input_length
};

class Translator {
 public:
  // A leanseq checkpoint (trained, imported from fairseq, quantized): CheckpointError naming the
  // file when it cannot be read, ConfigError for a bad option.
  explicit Translator(const std::string& checkpoint, const LoadOptions& options = {});
  Translator(Translator&&) noexcept;
  Translator& operator=(Translator&&) noexcept;
  ~Translator();

  // The n-best translations of each line, in input order; an empty line, or one that is not
  // UTF-8, has none. Calls from several threads take turns.
  std::vector<std::vector<TranslationResult>> translate(const std::vector<std::string>& lines,
                                                        const TranslationOptions& options = {}) const;
  // Forced decoding: each target's token log-probabilities given its source (</s>'s last).
  std::vector<std::vector<float>> score(const std::vector<std::string>& sources,
                                        const std::vector<std::string>& targets) const;

  std::string source_language() const;
  std::string target_language() const;
  std::string compute_type() const;         // the type the products run in
  std::string compute_type_notice() const;  // why it is not the one asked for ("" when it is)
  int ensemble_size() const;

  // Every decoding option: name, what it takes, default and help.
  static std::vector<TranslationOptionInfo> options();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq
