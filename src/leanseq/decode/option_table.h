// Every decoding option declared once: its name, type, range, help and the spelling each surface
// uses (command-line flags, the server's JSON and form fields, Python's keywords). The command
// line, the server, the Python binding and the generated references read this table; defaults are
// TranslateOptions' own initial values; check_options() judges every value by it, inside
// Translator::translate, so each surface gives the same error for the same bad value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "leanseq/core/range.h"
#include "leanseq/decode/options.h"

namespace leanseq::decode {

struct DecodingOption {
  enum class Kind { integer, number, flag, text };
  using IntegerField = int64_t& (*)(TranslateOptions&);
  using NumberField = double& (*)(TranslateOptions&);
  using FlagField = bool& (*)(TranslateOptions&);
  using TextField = std::string& (*)(TranslateOptions&);

  const char* name;    // fairseq's name without dashes: the JSON field, the name errors give
  const char* flags;   // the command line's, as CLI11 takes them ("--unk-penalty,--unkpen")
  const char* python;  // Python's keyword ("" when it is `name`)
  bool per_request;    // a server's request may set it (the server's flag sets its default)
  const char* group;   // its --help section
  const char* help;
  std::variant<IntegerField, NumberField, FlagField, TextField> field;
  Range range;                // integer and number options: the values they take
  std::optional<double> off;  // a value besides `range` that turns the option off (-1 for top-k)

  Kind kind() const { return static_cast<Kind>(field.index()); }
  std::string python_name() const { return *python ? python : name; }
  // "an integer in [1, 1024]", "a finite number", "a number in (0, 1] or -1 (off)", "true or false".
  std::string expected() const;
  // The value of this option in `o`, as text (the defaults of --help and the references).
  std::string value_text(const TranslateOptions& o) const;
  // Whether `a` and `b` hold the same value of this option (compared as values, not as text).
  bool same(const TranslateOptions& a, const TranslateOptions& b) const;
  // ConfigError "<name>: expected <expected()>, got <got>": every surface's message for a value
  // this option does not take.
  [[noreturn]] void refuse(const std::string& got) const;
};

const std::vector<DecodingOption>& decoding_options();
// The option whose name, or Python keyword when `python`, is `name`; nullptr for none.
const DecodingOption* find_decoding_option(const std::string& name, bool python = false);

// A value as a surface hands it over: JSON's and Python's types, or text (a form field).
using OptionValue = std::variant<int64_t, double, bool, std::string>;
// Sets `option` of `o` to `value` (text is read as the option's type), then checks its range:
// ConfigError "<name>: expected <what it takes>, got <value>" otherwise.
void set_option(TranslateOptions& o, const DecodingOption& option, const OptionValue& value);

}  // namespace leanseq::decode
