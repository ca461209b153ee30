#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace leanseq::kernels {

// Working memory a kernel reuses from one call to the next (declare it thread_local): the bytes
// of its largest call so far, kept for the thread's life, so that a decoding step's products do
// not each allocate and free their buffers. `at(bytes)` gives 64-byte aligned room for `bytes`;
// what it held before is gone.
class Scratch {
 public:
  // Above this many bytes a call should use a Scratch of its own, freed when it returns.
  static constexpr size_t kept_at_most = size_t{64} << 20;

  void* at(size_t bytes) {
    if (bytes_.size() < bytes + 64) bytes_.resize(bytes + 64);
    return bytes_.data() + (64 - reinterpret_cast<uintptr_t>(bytes_.data()) % 64) % 64;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// The multiple of 64 at or above n: where the next of several buffers carved from one Scratch starts.
inline size_t aligned_size(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace leanseq::kernels
