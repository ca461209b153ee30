// Test helpers: reading the fairseq fixture files and locating ../shared.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

#include "leanseq/core/error.h"

namespace leanseq::test {

// Absolute path of ../shared/<rel>, or "" when it is absent (tests then LEANSEQ_MISSING_SHARED).
std::string shared_path(const std::string& rel);

// Absolute path of tests/<rel> in the source tree (files kept beside the tests).
std::string tests_path(const std::string& rel);

// The built `leanseq` executable ("" in a build without the command line).
std::string cli_path();

// Whether the environment says CI (CI=true or 1): then missing reference files fail a test.
bool running_under_ci();

// One fairseq fixture file (see ../shared/fixtures/fairseq/README.txt).
struct Fixture {
  std::map<std::string, torch::Tensor> params, inputs, outputs;
  std::string json_text;  // the whole file, for config fields
};

// Loads fixtures/fairseq/<name>.json; returns false when ../shared is absent.
bool load_fixture(const std::string& name, Fixture& out);

// Max absolute difference between two tensors (as float64).
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);
// The largest |a - b| relative to `magnitude`, the sum of the absolute values of the terms that
// made each element (same shape): a tolerance on a sum that scales with its terms, whatever order
// a CPU's kernels (or an unoptimised build) add them in.
double max_diff_relative_to(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& magnitude);

// d f / d x[i] by central differences, x a flat view of a double tensor (left unchanged); call
// with grad mode off when x requires grad.
double central_difference(torch::Tensor x, int64_t i, const std::function<double()>& f, double eps = 1e-6);

// How many times `body` called the operator `name` (RecordFunction callbacks of this thread: ATen's
// operators and leanseq's RECORD_FUNCTION scopes).
int64_t calls_of(const std::string& name, const std::function<void()>& body);

// Runs a shell command, returning its exit code; stdout+stderr go to `output`.
int run_command(const std::string& cmd, std::string& output);

// The whole content of a file ("" when it cannot be read).
std::string read_text(const std::string& path);

// Writes `text` to `path` byte for byte (replacing the file) and returns `path`.
std::string write_text(const std::string& path, const std::string& text);

// A fresh temporary directory under the system temp dir, removed when the test binary exits.
std::string temp_dir(const std::string& tag);

// The message of the error of type E that `f` throws; "" when it throws none.
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}
inline std::string data_error_of(const std::function<void()>& f) { return error_of<DataError>(f); }

}  // namespace leanseq::test

// Ends the current test when reference files (`what`, a path under ../shared) are absent: a
// failure under CI, where they must be there; elsewhere a skip, which ctest reports as skipped
// (tests/CMakeLists.txt), never as passed.
#define LEANSEQ_MISSING_SHARED(what)                                                          \
  do {                                                                                        \
    if (::leanseq::test::running_under_ci()) {                                                \
      FAIL() << "../shared/" << what << " is absent, and CI=true requires the reference files"; \
    }                                                                                         \
    GTEST_SKIP() << "../shared/" << what << " is absent";                                     \
  } while (0)

#define LEANSEQ_REQUIRE_FIXTURE(name, var)                                \
  ::leanseq::test::Fixture var;                                        \
  if (!::leanseq::test::load_fixture(name, var)) {                     \
    LEANSEQ_MISSING_SHARED(std::string("fixtures/fairseq/") + name + ".json"); \
  }
