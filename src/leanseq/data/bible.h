// A real parallel corpus any Debian machine can install without network: the public-domain
// Bible modules of the SWORD project (sword-text-sparv: Reina-Valera 1909, sword-text-web: World
// English Bible), dumped with mod2imp (libsword-utils) and joined by verse reference.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace leanseq::data {

struct BibleCorpusOptions {
  std::string out_dir;
  std::string src_module = "spaRV1909eb", tgt_module = "engWEB2015eb";
  std::string src_lang = "es", tgt_lang = "en";
};

struct BibleCorpusCounts {
  int64_t train = 0, valid = 0, test = 0;
};

// Verse reference ("Genesis 1:1") -> plain text, from mod2imp's raw OSIS output.
std::map<std::string, std::string> parse_imp(const std::string& imp_text);
// Plain text of one verse's OSIS markup: notes and non-canonical titles removed, adjacent word
// elements separated by a space, other tags dropped, entities decoded, whitespace collapsed.
std::string osis_to_text(const std::string& osis);

// Writes <out>/{train,valid,test}.{src,tgt}: verse pairs in canonical order; every 31st pair
// (index % 31 == 0) is test and every 62nd offset by 15 is valid, fixed for all machines.
BibleCorpusCounts build_bible_corpus(const BibleCorpusOptions& opt);

}  // namespace leanseq::data
