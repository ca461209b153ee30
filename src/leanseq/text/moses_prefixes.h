// The nonbreaking prefixes of the languages sacremoses ships a list for, beyond English and German
// (cs, es, fr, it, pt, ro, ru): generated from its data by scripts/moses/generate_prefixes.py.
#pragma once
#include <string>

namespace leanseq::text {

// `lang`'s list as the lines of a nonbreaking_prefix file ("word" or "word #NUMERIC_ONLY#", each
// ending with a newline), in its file's order; nullptr for a language without a generated list.
const char* moses_prefix_list(const std::string& lang);

}  // namespace leanseq::text
