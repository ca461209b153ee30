// fairseq-preprocess --dataset-impl raw splits: the text itself, binarized when read.
#pragma once
#include <string>

#include "leanseq/data/dictionary.h"

namespace leanseq::data {

// `prefix` as binarized ids: itself when <prefix>.idx exists; else, when <prefix> is text (a
// fairseq-preprocess --dataset-impl raw directory copies its input there), its lines encoded with
// `dict` as fairseq's raw reader encodes them (words split at whitespace, unknown ones <unk>,
// </s> appended) into a file in `dir`, whose prefix is returned.
std::string binarized(const std::string& prefix, const Dictionary& dict, const std::string& dir);

}  // namespace leanseq::data
