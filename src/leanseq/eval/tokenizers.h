// sacreBLEU's tokenizers, reproduced exactly: 13a (mteval-v13a), intl (mteval-v14 international),
// char, none.
#pragma once
#include <string>

namespace leanseq::eval {

enum class Tokenize { none, t13a, intl, chars };

// Parses "none" | "13a" | "intl" | "char"; throws ConfigError otherwise.
Tokenize parse_tokenize(const std::string& name);
std::string tokenize_name(Tokenize t);

std::string tokenize_13a(const std::string& line);
std::string tokenize_intl(const std::string& line);
std::string tokenize_char(const std::string& line);
std::string tokenize(const std::string& line, Tokenize t);

}  // namespace leanseq::eval
