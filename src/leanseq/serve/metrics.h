// The server's counters and histograms in Prometheus' text format (GET /metrics).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "leanseq/serve/connections.h"

namespace leanseq::serve {

// Counters and histograms in Prometheus' text format.
// Labels come from a closed set (the server's routes and HTTP status codes), never from a request,
// so that no client can grow /metrics or write into it.
class Metrics {
 public:
  // `endpoints`: the routes counted by name; any other path is counted as "other".
  explicit Metrics(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {}

  void request(const std::string& path, int status, double seconds) {
    const bool known = std::find(endpoints_.begin(), endpoints_.end(), path) != endpoints_.end();
    const int code = status >= 100 && status <= 599 ? status : 0;
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{known ? path : "other", code}];
    observe(latency_, latency_bounds_, seconds);
  }
  void batch(const std::string& model, int64_t sentences, double seconds, int64_t tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    model_sentences_[model] += sentences;
    observe(batch_, batch_bounds_, static_cast<double>(sentences));
    sentences_ += sentences;
    tokens_ += tokens;
    decode_seconds_ += seconds;
  }
  // `queues`: each model's name and the sentences waiting for it.
  std::string text(const std::vector<std::pair<std::string, int64_t>>& queues, const ConnectionCounts& connections) const {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t queued = 0;
    for (const auto& q : queues) queued += q.second;
    std::ostringstream os;
    os << "# HELP leanseq_requests_total HTTP requests by endpoint and status code.\n"
          "# TYPE leanseq_requests_total counter\n";
    for (const auto& [k, n] : requests_) {
      os << "leanseq_requests_total{endpoint=\"" << label(k.first) << "\",code=\"" << k.second << "\"} " << n << "\n";
    }
    histogram(os, "leanseq_request_duration_seconds", "Time from a request's arrival to its answer.", latency_,
              latency_bounds_);
    histogram(os, "leanseq_batch_size_sentences", "Sentences per decoding batch.", batch_, batch_bounds_);
    os << "# HELP leanseq_translated_sentences_total Sentences translated.\n# TYPE leanseq_translated_sentences_total counter\n"
       << "leanseq_translated_sentences_total " << sentences_ << "\n"
       << "# HELP leanseq_target_tokens_total Target tokens produced (</s> included).\n# TYPE leanseq_target_tokens_total counter\n"
       << "leanseq_target_tokens_total " << tokens_ << "\n"
       << "# HELP leanseq_tokens_per_second Target tokens per second of decoding time.\n# TYPE leanseq_tokens_per_second gauge\n"
       << "leanseq_tokens_per_second " << (decode_seconds_ > 0 ? static_cast<double>(tokens_) / decode_seconds_ : 0.0) << "\n"
       << "# HELP leanseq_queue_length Sentences waiting for a decoding batch.\n# TYPE leanseq_queue_length gauge\n"
       << "leanseq_queue_length " << queued << "\n"
       << "# HELP leanseq_connections_open HTTP connections open.\n# TYPE leanseq_connections_open gauge\n"
       << "leanseq_connections_open " << connections.open << "\n"
       << "# HELP leanseq_connections_closed_total Connections the server ended: refused (every slot busy), "
          "evicted (idle, for a new one), timed_out (too slow to send a request).\n"
       << "# TYPE leanseq_connections_closed_total counter\n"
       << "leanseq_connections_closed_total{reason=\"refused\"} " << connections.refused << "\n"
       << "leanseq_connections_closed_total{reason=\"evicted\"} " << connections.evicted << "\n"
       << "leanseq_connections_closed_total{reason=\"timed_out\"} " << connections.timed_out << "\n"
       << "# HELP leanseq_model_queue_length Sentences waiting for a decoding batch, by model.\n"
       << "# TYPE leanseq_model_queue_length gauge\n";
    for (const auto& [name, n] : queues) os << "leanseq_model_queue_length{model=\"" << label(name) << "\"} " << n << "\n";
    os << "# HELP leanseq_model_translated_sentences_total Sentences translated, by model.\n"
       << "# TYPE leanseq_model_translated_sentences_total counter\n";
    for (const auto& [name, n] : queues) {
      const auto it = model_sentences_.find(name);
      os << "leanseq_model_translated_sentences_total{model=\"" << label(name) << "\"} "
         << (it == model_sentences_.end() ? 0 : it->second) << "\n";
    }
    return os.str();
  }

 private:
  // A label value as Prometheus' text format escapes it.
  static std::string label(const std::string& v) {
    std::string out;
    for (char c : v) out += c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : std::string(1, c);
    return out;
  }
  struct Histogram {
    std::vector<int64_t> counts;
    double sum = 0;
    int64_t total = 0;
  };
  static void observe(Histogram& h, const std::vector<double>& bounds, double v) {
    if (h.counts.empty()) h.counts.assign(bounds.size(), 0);
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (v <= bounds[i]) ++h.counts[i];
    }
    h.sum += v;
    ++h.total;
  }
  static void histogram(std::ostream& os, const std::string& name, const std::string& help, const Histogram& h,
                        const std::vector<double>& bounds) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i) {
      os << name << "_bucket{le=\"" << bounds[i] << "\"} " << (h.counts.empty() ? 0 : h.counts[i]) << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << h.total << "\n" << name << "_sum " << h.sum << "\n"
       << name << "_count " << h.total << "\n";
  }
  const std::vector<std::string> endpoints_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // by (endpoint, status code)
  Histogram latency_, batch_;
  const std::vector<double> latency_bounds_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  const std::vector<double> batch_bounds_{1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::map<std::string, int64_t> model_sentences_;
  int64_t sentences_ = 0, tokens_ = 0;
  double decode_seconds_ = 0;
};

}  // namespace leanseq::serve
