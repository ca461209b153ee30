// How a benchmark program ends on an error: one line naming the program, and leanseq's exit codes
// (2 for usage and configuration errors, 1 otherwise).
#pragma once
#include <exception>
#include <iostream>

#include "leanseq/core/error.h"

namespace leanseq::bench {

// Runs body(); returns the program's exit code.
template <class Body>
int run_reporting_errors(const char* program, Body&& body) {
  try {
    body();
  } catch (const leanseq::Error& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace leanseq::bench
