#include "leanseq/data/bible.h"

#include <array>
#include <cstdio>
#include <sstream>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"
#include "leanseq/core/io.h"

namespace leanseq::data {
namespace {

std::string run_mod2imp(const std::string& module) {
  std::string cmd = "mod2imp '" + module + "' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw DataError("cannot run mod2imp (apt-get install libsword-utils)");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int rc = pclose(pipe);
  if (rc != 0 || out.empty()) {
    throw DataError("mod2imp " + module + ": no output; install the module (apt-get install "
                    "sword-text-sparv sword-text-web libsword-utils)");
  }
  return out;
}

// Removes every element <tag ...>...</tag> for which keep(open_tag) is false.
std::string drop_elements(const std::string& s, const std::string& tag, bool (*keep)(const std::string&)) {
  std::string out;
  const std::string open = "<" + tag, close = "</" + tag + ">";
  size_t i = 0;
  while (i < s.size()) {
    size_t p = s.find(open, i);
    while (p != std::string::npos && p + open.size() < s.size() &&
           s[p + open.size()] != ' ' && s[p + open.size()] != '>' && s[p + open.size()] != '/') {
      p = s.find(open, p + 1);
    }
    if (p == std::string::npos) break;
    size_t gt = s.find('>', p);
    if (gt == std::string::npos) break;
    std::string open_tag = s.substr(p, gt - p + 1);
    bool self_closing = open_tag.size() >= 2 && open_tag[open_tag.size() - 2] == '/';
    out.append(s, i, p - i);
    if (keep(open_tag)) {
      out += open_tag;
      i = gt + 1;
      continue;
    }
    if (self_closing) {
      i = gt + 1;
      continue;
    }
    size_t end = s.find(close, gt);
    i = end == std::string::npos ? s.size() : end + close.size();
  }
  out.append(s, std::min(i, s.size()), std::string::npos);
  return out;
}

bool keep_none(const std::string&) { return false; }
bool keep_canonical(const std::string& t) { return t.find("canonical=\"true\"") != std::string::npos; }


}  // namespace

std::string osis_to_text(const std::string& osis) {
  std::string s = drop_elements(osis, "note", keep_none);
  s = drop_elements(s, "title", keep_canonical);
  replace_all(s, "</w><w", "</w> <w");
  std::string out;
  bool in_tag = false;
  for (char c : s) {
    if (c == '<') {
      in_tag = true;
    } else if (c == '>') {
      in_tag = false;
    } else if (!in_tag) {
      out += c;
    }
  }
  replace_all(out, "&quot;", "\"");
  replace_all(out, "&lt;", "<");
  replace_all(out, "&gt;", ">");
  replace_all(out, "&apos;", "'");
  replace_all(out, "&amp;", "&");
  std::string collapsed;
  for (char c : out) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) {
      if (!collapsed.empty() && collapsed.back() != ' ') collapsed += ' ';
    } else {
      collapsed += c;
    }
  }
  while (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
  return collapsed;
}

std::map<std::string, std::string> parse_imp(const std::string& imp_text) {
  std::map<std::string, std::string> verses;
  std::istringstream in(imp_text);
  std::string line, key, body;
  auto flush = [&] {
    // Keep "Book C:V" keys with V > 0 (":0" entries are book/chapter headings).
    auto colon = key.rfind(':');
    if (!key.empty() && key[0] != '[' && colon != std::string::npos && key.substr(colon + 1) != "0") {
      std::string text = osis_to_text(body);
      if (!text.empty()) verses[key] = text;
    }
    body.clear();
  };
  while (std::getline(in, line)) {
    if (line.rfind("$$$", 0) == 0) {
      flush();
      key = line.substr(3);
    } else {
      body += line + "\n";
    }
  }
  flush();
  return verses;
}

BibleCorpusCounts build_bible_corpus(const BibleCorpusOptions& opt) {
  // The English module's dump gives the canonical verse order; pair by reference.
  std::string tgt_imp = run_mod2imp(opt.tgt_module);
  auto src = parse_imp(run_mod2imp(opt.src_module));
  std::vector<std::pair<std::string, std::string>> pairs;
  std::istringstream in(tgt_imp);
  std::string line, key, body;
  auto tgt = parse_imp(tgt_imp);
  while (std::getline(in, line)) {
    if (line.rfind("$$$", 0) != 0) continue;
    key = line.substr(3);
    auto s = src.find(key);
    auto t = tgt.find(key);
    if (s != src.end() && t != tgt.end()) pairs.emplace_back(s->second, t->second);
  }
  if (pairs.size() < 1000) throw DataError("only " + std::to_string(pairs.size()) + " verse pairs found; are both modules installed?");
  std::ostringstream tr_s, tr_t, va_s, va_t, te_s, te_t;
  BibleCorpusCounts c;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i % 31 == 0) {
      te_s << pairs[i].first << '\n', te_t << pairs[i].second << '\n', ++c.test;
    } else if (i % 62 == 15) {
      va_s << pairs[i].first << '\n', va_t << pairs[i].second << '\n', ++c.valid;
    } else {
      tr_s << pairs[i].first << '\n', tr_t << pairs[i].second << '\n', ++c.train;
    }
  }
  const std::string d = opt.out_dir + "/";
  io::make_dirs(opt.out_dir);
  io::atomic_write_text(d + "train." + opt.src_lang, tr_s.str());
  io::atomic_write_text(d + "train." + opt.tgt_lang, tr_t.str());
  io::atomic_write_text(d + "valid." + opt.src_lang, va_s.str());
  io::atomic_write_text(d + "valid." + opt.tgt_lang, va_t.str());
  io::atomic_write_text(d + "test." + opt.src_lang, te_s.str());
  io::atomic_write_text(d + "test." + opt.tgt_lang, te_t.str());
  return c;
}

}  // namespace leanseq::data
