// Writes a small seed corpus for each fuzz target under OUT/<target>/: valid inputs the fuzzer
// mutates from (a torch.save zip and legacy file, a LibTorch archive, a dictionary, an index, a
// request, BPE codes, sentences), and, when SHARED is given, the pickles and dictionaries of the
// real fairseq checkpoints in SHARED/fixtures/fairseq-pt, its BPE codes and the first lines of its
// tokenizer inputs (read there, never copied into the repository).
// Usage: make_seeds OUT [SHARED]
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "leanseq/core/zip.h"
#include "leanseq/data/indexed.h"
#include "leanseq/interop/ctranslate2_file.h"
#include "leanseq/interop/torch_file.h"
#include "support/torch_files.h"

namespace fs = std::filesystem;
using leanseq::test::pkl;
using leanseq::test::u32;

namespace {
void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// torch's legacy format: magic number, protocol, system info, the object, its storage keys, then
// each storage's element count and bytes.
std::string legacy_file() {
  std::string out = pkl("80028a0a6cfc9c46f9206aa850192e");       // the magic number
  out += pkl("80024de9032e");                                     // protocol 1001
  out += pkl("80027d") + "X" + u32(13) + "little_endian" + pkl("88732e");  // {'little_endian': True}
  out += leanseq::test::tensor_pickle(4, 0, {2, 2}, {2, 1}, true);
  out += pkl("80025d") + "X" + u32(1) + "0" + pkl("612e");  // ['0']
  const int64_t numel = 4;
  out += std::string(reinterpret_cast<const char*>(&numel), 8);
  for (float v : {1.f, 2.f, 3.f, 4.f}) out += std::string(reinterpret_cast<const char*>(&v), 4);
  return out;
}
}  // namespace

// A CTranslate2 model.bin of `version` (6: what CTranslate2 4.x writes) with small variables of
// each storage type, the scales of the quantized ones, a scalar and an alias.
std::string ct2_model_bin(uint32_t version) {
  std::string b;
  auto num = [&](uint64_t v, int width) {
    for (int i = 0; i < width; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto text = [&](const std::string& t) {
    num(t.size() + 1, 2);
    b += t;
    b.push_back('\0');
  };
  struct Var {
    std::string name;
    std::vector<uint32_t> shape;
    uint8_t type, width;
  };
  std::vector<Var> vars = {{"encoder/layer_0/linear_0/weight", {2, 3}, 1, 1},
                           {"encoder/layer_0/linear_0/weight_scale", {2}, 0, 4},
                           {"decoder/layer_0/linear_0/weight", {2, 2}, 2, 2},
                           {"decoder/layer_0/linear_0/weight_scale", {}, 0, 4},
                           {"decoder/embeddings/weight", {3, 2}, 4, 2},
                           {"encoder/embeddings_0/weight", {3, 2}, 5, 2},
                           {"num_heads", {}, 3, 4}};
  if (version < 4) vars.resize(4);  // before version 4, types were given by their width
  num(version, 4);
  if (version >= 2) {
    text("TransformerSpec");
    num(3, 4);
  }
  num(vars.size(), 4);
  for (const auto& v : vars) {
    text(v.name);
    num(v.shape.size(), 1);
    uint64_t n = 1;
    for (auto d : v.shape) {
      num(d, 4);
      n *= d;
    }
    if (version >= 4) {
      num(v.type, 1);
      num(n * v.width, 4);
    } else {
      num(v.width, 1);
      num(n, 4);
    }
    for (uint64_t i = 0; i < n * v.width; ++i) b.push_back(static_cast<char>(v.width == 4 && i % 4 == 3 ? 0x3f : 0x40 + i % 7));
  }
  if (version >= 3) {
    num(1, 4);
    text("decoder/projection/weight");
    text("decoder/layer_0/linear_0/weight");
  }
  return b;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: make_seeds OUT [SHARED]\n";
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path tmp = out / "tmp";
  fs::create_directories(tmp);

  // torch_file: a zip archive, and the legacy format, each checked to read.
  fs::create_directories(out / "torch_file");
  leanseq::test::write_torch_zip((out / "torch_file/zip.pt").string(), 6, 0, {2, 3}, {3, 1});
  write(out / "torch_file/legacy.pt", legacy_file());
  for (const char* name : {"zip.pt", "legacy.pt"}) {
    leanseq::interop::TorchFile f((out / "torch_file" / name).string());
    if (f.tensor(*f.root()->get("w")->tensor).sum().item<float>() <= 0) throw std::runtime_error("a bad seed");
  }
  // pickle: the zip's data.pkl, and a Namespace.
  write(out / "pickle/tensor.pkl", leanseq::test::tensor_pickle(6, 0, {2, 3}, {3, 1}));
  write(out / "pickle/namespace.pkl",
        pkl("80026361726770617273650a4e616d6573706163650a710029817d580400000061726368580500000066636f6e7673622e"));
  // checkpoint: a LibTorch archive with a checkpoint's first records.
  {
    torch::manual_seed(1);
    torch::serialize::OutputArchive ar;
    ar.write("format_version", torch::tensor({int64_t{1}}));
    ar.write("config", torch::tensor({97, 114, 99, 104}, torch::kUInt8));
    ar.write("model.0", torch::randn({4, 4}));
    fs::create_directories(out / "checkpoint");
    ar.save_to((out / "checkpoint/small.pt").string());
  }
  // dictionary and indexed dataset.
  write(out / "dictionary/dict.txt", "a 10\nb 5\nc 1 #fairseq:overwrite\n");
  {
    leanseq::data::IndexedWriter w;
    w.add({5, 6, 2});
    w.add({7, 2});
    w.save((tmp / "x").string());
    write(out / "indexed/two.idx", std::string("\x05\x00", 2) + read(tmp / "x.idx"));
  }
  {
    // fairseq-preprocess's format: 2 sentences of 3 uint16 ids (the .bin's 12 bytes: 3 units of 4).
    leanseq::data::FairseqIndexedWriter w((tmp / "f").string(), 100);
    w.add({5, 6, 2});
    w.add({7, 8, 2});
    w.finish();
    write(out / "indexed/fairseq.idx", std::string("\x03\x00", 2) + read(tmp / "f.idx"));
  }
  // request
  write(out / "request/texts.json", R"({"texts": ["a1 a2", "a3"], "beam": 2, "lenpen": 1.0, "max_len_b": 10})");
  write(out / "request/text.json", R"({"text": "Ein Mann fährt Rad.", "nbest": 1})");
  write(out / "request/constraints.json",
        R"({"texts": ["Ein Mann.", "Zwei Hunde."], "constraints": [["man", "two words"], []], "constraint_order": "unordered"})");
  // bpe_codes: subword-nmt's two versions and fastBPE's; tokenize: what Moses' rules treat apart.
  write(out / "bpe_codes/v02.codes", "#version: 0.2\ne r</w>\nl o\nlo w\nn e\nne w\ne s\nes t</w>\nM \xc3\xa4\n");
  write(out / "bpe_codes/v01.codes", "e r\nl o\nlo w\nr </w>\n");
  write(out / "bpe_codes/fastbpe.codes", "e r</w> 20\nl o 15\nlo w 9\n");
  write(out / "tokenize/en.txt", "Mr. Smith paid $3.50 for the \"well-known\" book (it's 1,000 pages) & left...");
  write(out / "tokenize/de.txt", "Die M\xc3\xa4nner, z.B. Herr M\xc3\xbcller, bauten 3 H\xc3\xa4user \xe2\x80\x93 1990er: \xc2\xabgut\xc2\xbb!");
  write(out / "tokenize/xml.txt", "a < b > c & d | e [ f ] g ' h \" i @-@ j &amp; k");
  // config: a train -c file, and one whose aliases name a large tree.
  write(out / "config/train.yaml",
        "count: 3\nany: -7\nname: x\nflag: true\na:\n  rate: 0.25\n  b:\n    scale: 2.5\n");
  write(out / "config/aliases.yaml", "a: &a {rate: 0.5}\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n");
  // ctranslate2: model.bin in each binary version CTranslate2 wrote.
  for (uint32_t version : {1, 2, 3, 5, 6}) {
    write(out / ("ctranslate2/v" + std::to_string(version) + ".bin"), ct2_model_bin(version));
    write(tmp / "ct2/model.bin", ct2_model_bin(version));
    write(tmp / "ct2/shared_vocabulary.txt", "<unk>\n<s>\n</s>\n");
    const leanseq::interop::Ct2Model model((tmp / "ct2").string());
    for (const auto& name : model.names()) {  // each seed reads whole
      if (model.stored_type(name) != leanseq::interop::Ct2Type::int32) (void)model.float32(name);
    }
  }
  // http: what clients send, one connection each.
  const std::string json_body = R"({"text": "w1 w2 w3", "beam": 2})";
  write(out / "http/translate.txt", "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                                        std::to_string(json_body.size()) + "\r\n\r\n" + json_body);
  write(out / "http/form.txt", "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                               "Content-Length: 23\r\n\r\nq=w1%20w2&source=xx&t=1");
  write(out / "http/pipelined.txt", "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /languages HTTP/1.1\r\nHost: x\r\n\r\n"
                                    "GET /%FF?model=tiny HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  // LibreTranslate's API: html, auto, alternatives, /detect, a file upload and its download.
  const std::string lt_body = R"({"q": ["<p>w1 <b>w2</b>. w3</p>"], "source": "auto", "target": "yy", "format": "html", "alternatives": 2})";
  write(out / "http/libretranslate.txt", "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                                             std::to_string(lt_body.size()) + "\r\n\r\n" + lt_body +
                                             "POST /detect HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nq=w1+w2.");
  const std::string multipart = "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.html\"\r\n\r\n"
                                "<h1>w1 w2</h1>\r\n--B\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nxx\r\n"
                                "--B\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nyy\r\n--B--\r\n";
  write(out / "http/translate_file.txt", "POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                                             "Content-Length: " + std::to_string(multipart.size()) + "\r\n\r\n" + multipart +
                                             "GET /download_file/0-0.a.html HTTP/1.1\r\nHost: x\r\n\r\n");
  write(out / "http/chunked.txt", "POST /v1/translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "c\r\n{\"text\": \"w1\r\n2\r\n\"}\r\n0\r\n\r\n");

  // Where ../shared is there: its BPE codes and tokenizer inputs, and the real fairseq checkpoints'
  // pickles and dictionaries.
  if (argc > 2) {
    const fs::path tokenizers = fs::path(argv[2]) / "fixtures/fairseq-pt/tokenizers";
    const std::string codes = read(tokenizers / "bpecodes");
    if (!codes.empty()) write(out / "bpe_codes/multi30k.codes", codes.substr(0, 8000));
    for (const char* lang : {"en", "de"}) {
      std::ifstream in(tokenizers / (std::string("input.") + lang));
      std::string line;
      for (int i = 0; i < 8 && std::getline(in, line); ++i) {
        write(out / "tokenize" / (std::string(lang) + "." + std::to_string(i) + ".txt"), line);
      }
    }
    const fs::path dir = fs::path(argv[2]) / "fixtures/fairseq-pt";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const fs::path model = e.path() / "model.pt";
      if (!fs::exists(model)) continue;
      try {
        leanseq::zip::Reader r(model.string());
        if (r.starts_like_zip()) {
          for (const auto& [name, rec] : r.records()) {
            if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0) {
              write(out / "pickle" / (e.path().filename().string() + ".pkl"), r.read(name));
            }
          }
        }
      } catch (const leanseq::zip::ZipError&) {
      }
      const std::string dict = read(e.path() / "dict.de.txt");
      if (!dict.empty()) write(out / "dictionary" / (e.path().filename().string() + ".txt"), dict.substr(0, 4000));
    }
  }
  fs::remove_all(tmp);
  return 0;
}
