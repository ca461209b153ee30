// The one oneDNN CPU engine the kernels that call oneDNN directly share (int8_gemm.cpp,
// batched_matmul.cpp, packed_products.cpp), the cache of the primitives they make per shape, and
// the call that runs a cached primitive with the thread's own memory objects and stream.
// Only for files compiled with LEANSEQ_WITH_DNNL.
#pragma once
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace leanseq::kernels {

inline const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Makes and runs the primitives of its scope on `threads` threads (PrimitiveCache keys by the team
// size, so primitives are made for that many), where the calling thread's team has another size;
// the team size restored at its end. Loops that name their own team (kernels/parallel.h's) keep it.
class TeamSize {
 public:
  explicit TeamSize(int threads) {
    const int team = omp_get_max_threads();
    if (threads >= 1 && threads != team) {
      saved_ = team;
      omp_set_num_threads(threads);
    }
  }
  ~TeamSize() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int saved_ = 0;  // the team size to restore; 0 where it was not changed
};

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

// One argument of a primitive's call: its kind (DNNL_ARG_SRC, ...) and either a memory object the
// caller keeps (a packed weight) or the layout and address of this call's data.
struct CallArgument {
  int kind;
  const dnnl::memory* kept = nullptr;
  const dnnl::memory::desc* layout = nullptr;
  void* data = nullptr;
};

// Runs `primitive`, one of the values `owner` holds (a PrimitiveCache entry), on the calling
// thread's stream and waits for it. The memory objects of the call's data are made on a thread's
// first call with that primitive and pointed at each later call's data, and the stream is the
// thread's own: at a decoding step's five rows, making them, a stream and an argument map per call
// was about a ninth of an int8 product's time. A thread keeps the objects of at most 1024
// primitives (then starts again) and watches their owners without keeping them: the primitives
// live as long as their cache keeps them, and an owner gone (whose address a new one may take)
// gets new objects.
inline void execute_on_this_thread(const std::shared_ptr<const void>& owner, const dnnl::primitive& primitive,
                                   std::initializer_list<CallArgument> arguments) {
  struct Bound {
    std::weak_ptr<const void> owner;
    std::vector<dnnl::memory> memories;  // one per argument, in the call's order (empty where kept)
  };
  constexpr size_t kMostArguments = 8;
  if (arguments.size() > kMostArguments) {
    throw dnnl::error(dnnl_invalid_arguments, "execute_on_this_thread: more than 8 arguments");
  }
  thread_local std::unordered_map<const void*, Bound> bound;
  thread_local dnnl::stream stream(onednn_cpu_engine());
  auto it = bound.find(owner.get());
  if (it == bound.end() || it->second.owner.expired() || it->second.memories.size() != arguments.size()) {
    if (bound.size() >= 1024) bound.clear();
    Bound made{owner, {}};
    for (const auto& a : arguments) {
      made.memories.push_back(a.kept ? dnnl::memory() : dnnl::memory(*a.layout, onednn_cpu_engine(), a.data));
    }
    it = bound.insert_or_assign(owner.get(), std::move(made)).first;
  }
  dnnl_exec_arg_t args[kMostArguments];
  int n = 0;
  for (const auto& a : arguments) {
    dnnl::memory& own = it->second.memories[static_cast<size_t>(n)];
    if (!a.kept) own.set_data_handle(a.data);
    args[n++] = {a.kind, a.kept ? a.kept->get() : own.get()};
  }
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), stream.get(), n, args),
                          "could not execute a primitive");
  stream.wait();
}

}  // namespace leanseq::kernels
