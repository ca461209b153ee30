#include "leanseq/core/memory.h"

#include "leanseq/core/compat.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

// jemalloc reads this when it starts, before main(), in the programs linked to it: dirty pages (freed
// memory) are never purged, as M_TRIM_THRESHOLD below keeps glibc's. Its default decays them over
// ten seconds with madvise(), and a decoding step at 64 sentences per batch then faults its
// megabyte buffers in again at every step (sys time 0.7 s -> 3.8 s for test2016 in float32).
// Its memory, and its own bookkeeping, is asked for in transparent huge pages (madvise
// MADV_HUGEPAGE, which the kernel honours in its "always" and "madvise" modes): memory a process
// touches for the first time then faults in 2 MiB at a time, not 4 KiB. On a virtual machine whose
// page faults trap to the host this made test2016's int8 translation 1.17x faster in batches of
// 64 (docs/benchmarks/decoding.md#huge-pages-2026-12-05).
// Kept memory must also serve later requests whatever their size: by default jemalloc reuses a
// freed region only for a request at least 1/64 of its size, and freed neighbours merge into
// regions of tens of megabytes that no decoding step's buffer reaches. The process then mapped
// fresh memory without end: int8 translation one sentence at a time grew by about 40 MiB a
// second (2.3 GiB resident after 9000 sentences, 47 MiB of them in use). lg_extent_max_active_fit
// lifts that limit (any kept region is split for any request).
extern "C" {
[[gnu::used]] const char* malloc_conf =
    "dirty_decay_ms:-1,lg_extent_max_active_fit:30,thp:always,metadata_thp:always";
}

namespace leanseq {

void retain_freed_memory() {
  mallopt(M_MMAP_MAX, 0);                // no per-allocation mmap: large blocks come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // do not hand freed memory back to the kernel
  mallopt(M_TOP_PAD, 64 << 20);          // grow the heap in 64 MiB steps
}

void return_freed_memory() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  if (auto* mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"))) {
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);  // 4096: MALLCTL_ARENAS_ALL
  } else {
    malloc_trim(0);
  }
}

std::string allocator_summary() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  auto* mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) return "allocator: the C library's malloc";
  std::string line = "allocator: jemalloc";
  const char* version = nullptr;
  size_t n = sizeof version;
  if (mallctl("version", &version, &n, nullptr, 0) == 0 && version != nullptr) {
    const std::string v = version;
    line += " " + v.substr(0, v.find('-'));  // "5.3.0-0-g54eaed1..." -> "5.3.0"
  }
  ssize_t decay_ms = 0;
  n = sizeof decay_ms;
  std::string notes;
  if (mallctl("arenas.dirty_decay_ms", &decay_ms, &n, nullptr, 0) == 0) {
    notes = decay_ms < 0 ? "freed memory kept for reuse" : "freed memory returned after " + std::to_string(decay_ms) + " ms";
  }
  const char* thp = nullptr;
  n = sizeof thp;
  if (mallctl("opt.thp", &thp, &n, nullptr, 0) == 0 && thp != nullptr && std::string(thp) == "always") {
    notes += std::string(notes.empty() ? "" : ", ") + "huge pages";
  }
  if (!notes.empty()) line += " (" + notes + ")";
  return line;
}

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};
std::mutex g_sizes_mutex;
std::unordered_map<void*, int64_t> g_sizes;

void release(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    auto it = g_sizes.find(ptr);
    g_live -= it->second;
    g_sizes.erase(it);
  }
  c10::free_cpu(ptr);
}

// ATen's default CPU allocation (c10::alloc_cpu / free_cpu) with the sizes counted. Data and
// context are the same pointer, as raw_allocate() (used by oneDNN's integration) requires.
class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) LEANSEQ_ALLOCATOR_ALLOCATE_CONST override {
    void* ptr = c10::alloc_cpu(n);
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_sizes_mutex);
      g_sizes[ptr] = static_cast<int64_t>(n);
    }
    const int64_t live = g_live += static_cast<int64_t>(n);
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    return {ptr, ptr, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if LEANSEQ_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif
};

}  // namespace

void count_cpu_tensor_memory() {
  static CountingAllocator* counting = [] {
    auto* a = new CountingAllocator();
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  (void)counting;
}

int64_t cpu_tensor_bytes() { return g_live.load(); }
int64_t cpu_tensor_peak_bytes() { return g_peak.load(); }
void reset_cpu_tensor_peak() { g_peak = g_live.load(); }

}  // namespace leanseq
