#include "support/fixtures.h"

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "leanseq/core/error.h"

namespace leanseq::test {

std::string shared_path(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(LEANSEQ_SHARED_DIR) / rel;
  if (!std::filesystem::exists(p)) return "";
  return std::filesystem::canonical(p).string();
}

std::string tests_path(const std::string& rel) { return (std::filesystem::path(LEANSEQ_TESTS_DIR) / rel).string(); }

std::string cli_path() {
#ifdef LEANSEQ_CLI
  return LEANSEQ_CLI;
#else
  return "";
#endif
}

bool running_under_ci() {
  const char* ci = std::getenv("CI");
  if (!ci) return false;
  const std::string v = ci;
  return v == "true" || v == "1" || v == "TRUE" || v == "True";
}

namespace {
torch::Tensor to_tensor(const nlohmann::json& j) {
  std::vector<int64_t> shape = j.at("shape").get<std::vector<int64_t>>();
  std::string dtype = j.at("dtype").get<std::string>();
  const auto& data = j.at("data");
  if (dtype == "int64") {
    std::vector<int64_t> v = data.get<std::vector<int64_t>>();
    return torch::tensor(v, torch::kLong).reshape(shape);
  }
  std::vector<double> v = data.get<std::vector<double>>();
  auto t = torch::tensor(v, torch::kDouble).reshape(shape);
  return dtype == "float32" ? t.to(torch::kFloat) : t;
}
void fill(const nlohmann::json& j, const char* key, std::map<std::string, torch::Tensor>& out) {
  if (!j.contains(key)) return;
  for (auto it = j.at(key).begin(); it != j.at(key).end(); ++it) out[it.key()] = to_tensor(it.value());
}
}  // namespace

bool load_fixture(const std::string& name, Fixture& out) {
  std::string path = shared_path("fixtures/fairseq/" + name + ".json");
  if (path.empty()) return false;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  out.json_text = ss.str();
  auto j = nlohmann::json::parse(out.json_text);
  fill(j, "params", out.params);
  fill(j, "inputs", out.inputs);
  fill(j, "outputs", out.outputs);
  return true;
}

double max_diff_relative_to(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& magnitude) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs() / (magnitude.to(torch::kDouble).abs() + 1e-30))
      .max()
      .item<double>();
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

int64_t calls_of(const std::string& name, const std::function<void()>& body) {
  static thread_local std::string wanted;
  static thread_local int64_t count = 0;
  wanted = name;
  count = 0;
  auto enter = [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
    if (wanted == fn.name()) ++count;
    return nullptr;
  };
  const auto handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(enter).scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  return count;
}

int run_command(const std::string& cmd, std::string& output) {
  std::string full = cmd + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf;
  output.clear();
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

namespace {
// Removes the temporary directories of a test binary when it exits.
struct TempDirs {
  std::vector<std::filesystem::path> paths;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& p : paths) std::filesystem::remove_all(p, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

double central_difference(torch::Tensor x, int64_t i, const std::function<double()>& f, double eps) {
  const double old = x[i].item<double>();
  x[i] = old + eps;
  const double up = f();
  x[i] = old - eps;
  const double down = f();
  x[i] = old;
  return (up - down) / (2 * eps);
}

std::string temp_dir(const std::string& tag) {
  std::random_device rd;
  auto p = std::filesystem::temp_directory_path() / ("leanseq-" + tag + "-" + std::to_string(rd()));
  std::filesystem::create_directories(p);
  temp_dirs().paths.push_back(p);
  return p.string();
}

}  // namespace leanseq::test
