// The one oneDNN CPU engine the kernels that call oneDNN directly share (int8_gemm.cpp,
// batched_matmul.cpp, packed_products.cpp), and the cache of the primitives they make per shape.
// Only for files compiled with LEANSEQ_WITH_DNNL.
#pragma once
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace leanseq::kernels {

inline const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Values made once per key (a primitive per shape) and per team size, and shared by threads; made
// outside the lock (two threads may both make one, the first kept), and the cache emptied when it
// holds `capacity`. The team size is the calling thread's omp_get_max_threads(): oneDNN splits a
// primitive's work for the threads there are when it is made, and runs it on that many, so a
// thread whose count changed (a benchmark's contenders, a Python program setting its threads, a
// pool's one-thread workers) gets primitives made for its own count.
template <class Key, class Value>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : capacity_(capacity) {}

  template <class Make>
  std::shared_ptr<const Value> get(const Key& shape, Make&& make) {
    const auto key = std::make_pair(shape, omp_get_max_threads());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = values_.find(key); it != values_.end()) return it->second;
    }
    auto made = std::make_shared<const Value>(make());
    std::lock_guard<std::mutex> lock(mutex_);
    if (values_.size() >= capacity_) values_.clear();
    return values_.emplace(key, std::move(made)).first->second;
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::map<std::pair<Key, int>, std::shared_ptr<const Value>> values_;
};

}  // namespace leanseq::kernels
