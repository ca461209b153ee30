// The errors leanseq raises on purpose: every one is a leanseq::Error whose message is one line
// naming the file, line, key or field involved and what was expected. Part of the stable API
// (docs/versioning.md).
#pragma once
#include <stdexcept>
#include <string>

namespace leanseq {

// Base of every error leanseq raises on purpose. The message is one line that names the file,
// line or key involved and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // Process exit code: 2 for usage/config errors, 1 otherwise.
  virtual int exit_code() const { return 1; }
};

// A bad command line, config key or value: the user's invocation is wrong (exit 2).
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 2; }
};

// Bad input data: missing/empty files, invalid UTF-8, mismatched corpora.
class DataError : public Error {
 public:
  using Error::Error;
};

// An unreadable, truncated or incompatible checkpoint.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

}  // namespace leanseq
