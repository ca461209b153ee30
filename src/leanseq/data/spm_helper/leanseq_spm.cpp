// leanseq-spm: a torch-free helper process around libsentencepiece.
//
// Debian's libsentencepiece exports the protobuf-lite 3.14 it bundles. In a process that also
// loads LibTorch (and so libprotobuf 3.21) the two runtimes collide: whichever is found first
// breaks the other's static initialisation or version check. leanseq therefore keeps
// SentencePiece in this separate process and talks to it over pipes.
//
//   leanseq-spm train <trainer flags...>   train a model; errors on stderr, exit 1
//   leanseq-spm serve <model>              line protocol on stdin/stdout, flushed per reply:
//       "E\t<text>"   -> "O\t<piece> <piece> ..."    encode
//       "D\t<pieces>" -> "O\t<text>"                 decode (pieces separated by spaces)
//     errors are answered "X\t<message>".
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "train") {
    std::string args;
    for (int i = 2; i < argc; ++i) args += (args.empty() ? "" : " ") + std::string(argv[i]);
    sentencepiece::SetRandomGeneratorSeed(1);
    auto st = sentencepiece::SentencePieceTrainer::Train(args);
    if (!st.ok()) {
      std::cerr << st.ToString() << "\n";
      return 1;
    }
    return 0;
  }
  if (argc != 3 || std::string(argv[1]) != "serve") {
    std::cerr << "usage: leanseq-spm train FLAGS... | leanseq-spm serve MODEL\n";
    return 2;
  }
  sentencepiece::SentencePieceProcessor sp;
  auto st = sp.Load(argv[2]);
  if (!st.ok()) {
    std::cout << "X\t" << st.ToString() << std::endl;
    return 1;
  }
  std::cout << "O\tready" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.size() < 2 || line[1] != '\t') {
      std::cout << "X\tmalformed request" << std::endl;
      continue;
    }
    std::string payload = line.substr(2);
    if (line[0] == 'E') {
      std::vector<std::string> pieces;
      st = sp.Encode(payload, &pieces);
      if (!st.ok()) {
        std::cout << "X\t" << st.ToString() << std::endl;
        continue;
      }
      std::string out;
      for (const auto& p : pieces) out += (out.empty() ? "" : " ") + p;
      std::cout << "O\t" << out << std::endl;
    } else if (line[0] == 'D') {
      std::vector<std::string> pieces;
      size_t start = 0;
      while (start <= payload.size()) {
        size_t sp_pos = payload.find(' ', start);
        if (sp_pos == std::string::npos) sp_pos = payload.size();
        if (sp_pos > start) pieces.push_back(payload.substr(start, sp_pos - start));
        start = sp_pos + 1;
      }
      std::string text;
      st = sp.Decode(pieces, &text);
      if (!st.ok()) {
        std::cout << "X\t" << st.ToString() << std::endl;
        continue;
      }
      std::cout << "O\t" << text << std::endl;
    } else {
      std::cout << "X\tunknown request" << std::endl;
    }
  }
  return 0;
}
