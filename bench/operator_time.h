// Where the time of a piece of work goes, per ATen operator: while an OperatorTime lives, every
// operator call (forward, and the autograd nodes of backward) is timed through LibTorch's
// RecordFunction callbacks, and each operator is charged its self time, i.e. its own time less
// that of the operators it calls. A matrix product's self time is thus the BLAS call, and a
// `linear` is charged only the glue around its `addmm`. Work outside any operator (the
// framework's bookkeeping, the program's own loops) is what the wall time leaves over.
#pragma once
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

namespace leanseq::bench {

class OperatorTime {
 public:
  OperatorTime()
      : handle_(at::addGlobalCallback(at::RecordFunctionCallback(&OperatorTime::enter, &OperatorTime::leave)
                                          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}))) {
    std::lock_guard<std::mutex> lock(mutex_);
    self_.clear();
  }
  ~OperatorTime() { at::removeCallback(handle_); }
  OperatorTime(const OperatorTime&) = delete;
  OperatorTime& operator=(const OperatorTime&) = delete;

  struct Entry {
    std::string name;
    double seconds = 0;  // self time
    int64_t calls = 0;
  };
  // Per operator name, the most self time first.
  std::vector<Entry> by_name() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> v;
    for (const auto& [name, e] : self_) v.push_back({name, e.first, e.second});
    std::sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) {
      return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
    });
    return v;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Frame {
    Clock::time_point start;
    double children = 0;  // seconds spent in the operators this one called
  };
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction&) {
    stack_.push_back({Clock::now()});
    return nullptr;
  }
  static void leave(const at::RecordFunction& fn, at::ObserverContext*) {
    if (stack_.empty()) return;  // entered before this OperatorTime existed
    const Frame f = stack_.back();
    stack_.pop_back();
    const double total = std::chrono::duration<double>(Clock::now() - f.start).count();
    if (!stack_.empty()) stack_.back().children += total;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& e = self_[fn.name()];
    e.first += total - f.children;
    ++e.second;
  }
  static inline std::mutex mutex_;
  static inline std::map<std::string, std::pair<double, int64_t>> self_;  // self seconds, calls
  static inline thread_local std::vector<Frame> stack_;
  at::CallbackHandle handle_;
};

// Whether an operator's self time is a matrix product (the BLAS or oneDNN call; `linear` and
// `matmul` are only the glue around the product they call). The backward nodes of the kernels
// that call oneDNN in training (kernels/dense.cpp, kernels/batched_matmul.cpp) are their products.
inline bool matrix_product(const std::string& name) {
  static const std::set<std::string> products{"aten::_addmm_activation", "aten::addbmm", "aten::addmm",
                                              "aten::addmm_",            "aten::baddbmm", "aten::bmm",
                                              "aten::mm",                "leanseq::onednn_linear"};
  static const std::string node = "torch::autograd::CppNode<leanseq::kernels::";
  if (name.rfind(node, 0) == 0) {
    return name.find("TrainedLinear") != std::string::npos || name.find("BatchedMatmul") != std::string::npos;
  }
  return products.count(name) > 0;
}

// The operators' self times over `units` units of work (updates, decoding steps) named `unit`:
// the 25 largest, each with ms_per_<unit> and calls_per_<unit> (e.g. ms_per_update), and the
// shares of the wall time `seconds` that matrix products, the other operators and the rest took.
inline nlohmann::json operator_profile(const std::vector<OperatorTime::Entry>& by_name, double seconds, double units,
                                       const std::string& unit) {
  nlohmann::json ops = nlohmann::json::array();
  double products = 0, all = 0;
  for (const auto& e : by_name) {
    all += e.seconds;
    if (matrix_product(e.name)) products += e.seconds;
    if (ops.size() < 25) {
      ops.push_back({{"name", e.name},
                     {"ms_per_" + unit, 1e3 * e.seconds / units},
                     {"share", e.seconds / seconds},
                     {"calls_per_" + unit, static_cast<double>(e.calls) / units}});
    }
  }
  return {{"matrix_products_share", products / seconds},
          {"other_operators_share", (all - products) / seconds},
          {"outside_operators_share", 1.0 - all / seconds},
          {"by_self_time", ops}};
}

}  // namespace leanseq::bench
