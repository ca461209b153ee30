// fairseq's --post-process (alias --remove-bpe): how fairseq-generate and -interactive turn a line of
// subwords into words before printing and scoring it.
#pragma once
#include <string>
#include <vector>

namespace leanseq::text {

// The symbols fairseq 0.12 knows: sentencepiece, wordpiece, letter, silence, _EOW, subword_nmt,
// "@@ ", "@@" and none.
const std::vector<std::string>& fairseq_post_process_symbols();

// `sentence` (space-separated subwords) post-processed as fairseq's data_utils.post_process does:
// sentencepiece joins the pieces and makes each "▁" a space; subword_nmt ("@@ ") and "@@" remove
// that marker; wordpiece "_", letter "|" and _EOW mark word ends; silence drops "<SIL>".
// ConfigError for another symbol.
std::string fairseq_post_process(const std::string& sentence, const std::string& symbol);

}  // namespace leanseq::text
