#include "leanseq/kernels/packed_products.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/kernels/product_flops.h"
#include "leanseq/kernels/scratch.h"

#ifdef LEANSEQ_WITH_DNNL
#include "leanseq/kernels/onednn_engine.h"
#endif

namespace leanseq::kernels {

bool parse_packed_weights(const char* text) {
  if (!text || std::string(text) == "1") return true;
  if (std::string(text) == "0") return false;
  throw ConfigError(std::string("LEANSEQ_PACKED_WEIGHTS=") + text + ": expected 1 or 0");
}

int64_t parse_packed_weights_limit(const char* text) {
  if (!text) return 4096;
  char* end = nullptr;
  errno = 0;
  const long long mib = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || mib < 1 || errno == ERANGE || mib > (int64_t{1} << 40)) {
    throw ConfigError(std::string("LEANSEQ_PACKED_WEIGHTS_MB=") + text + ": expected a whole number of MiB, at least 1");
  }
  return mib;
}

namespace {

std::atomic<bool>& packed_setting() {
#ifdef LEANSEQ_WITH_DNNL
  static std::atomic<bool> on{parse_packed_weights(std::getenv("LEANSEQ_PACKED_WEIGHTS"))};
#else
  static std::atomic<bool> on{false};
#endif
  return on;
}

}  // namespace

bool packed_weights() { return packed_setting().load(); }

void set_packed_weights(bool on) {
#ifdef LEANSEQ_WITH_DNNL
  packed_setting().store(on);
#else
  (void)on;
#endif
}

#ifdef LEANSEQ_WITH_DNNL
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// The primitive for M rows of K times a packed weight (with or without a bias), the layouts it
// reads and writes and the scratchpad it needs (the caller's: a primitive shared by threads has
// none).
struct Product {
  dnnl::primitive primitive;
  dnnl::memory::desc src, weights, bias, dst, scratchpad;
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::matmul::primitive_desc matmul_desc(int64_t M, int64_t K, int64_t N, bool bias) {
  const dnnl::memory::desc src({M, K}, dt::f32, tag::ab), weights({K, N}, dt::f32, tag::any),
      dst({M, N}, dt::f32, tag::ab), b({1, N}, dt::f32, tag::ab);
  const auto desc = bias ? dnnl::matmul::desc(src, weights, b, dst) : dnnl::matmul::desc(src, weights, dst);
  return dnnl::matmul::primitive_desc(desc, user_scratchpad(), onednn_cpu_engine());
}

// The M rows [M, K] as one sequence of M positions with K channels (nwc: the same bytes), the
// weight [N, K] as N filters of width 1.
dnnl::convolution_forward::primitive_desc convolution_desc(int64_t M, int64_t K, int64_t N, bool bias) {
  const dnnl::memory::desc src({1, K, M}, dt::f32, tag::nwc), weights({N, K, 1}, dt::f32, tag::any),
      dst({1, N, M}, dt::f32, tag::nwc), b({N}, dt::f32, tag::x);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algorithm = dnnl::algorithm::convolution_direct;
  const dnnl::memory::dims stride{1}, padding{0};
  const auto desc = bias ? dnnl::convolution_forward::desc(kind, algorithm, src, weights, b, dst, stride, padding, padding)
                         : dnnl::convolution_forward::desc(kind, algorithm, src, weights, dst, stride, padding, padding);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), onednn_cpu_engine());
}

// Which primitive multiplies: oneDNN's matmul where it runs its brgemm kernels (AVX-512 and up),
// a 1x1 convolution over the rows as positions elsewhere (AVX2: there the matmul is the sgemm,
// whose sums depend on the number of rows, while the convolution's direct kernel sums each output
// the same way whatever the rows around it, and was faster from 5 rows on; at a single row it was
// slower, docs/benchmarks/performance.md).
bool multiplies_with_matmul() {
  static const bool brgemm = [] {
    try {
      return std::string(matmul_desc(64, 256, 256, false).impl_info_str()).rfind("brg", 0) == 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return brgemm;
}

// Made once per shape. Pieces have at most 512 rows, 512, a multiple of 64 or fewer than 64, so a
// pair (K, N) has at most 71 shapes; the cache is emptied past 4096 (several models' worth).
std::shared_ptr<const Product> product_for(int64_t M, int64_t K, int64_t N, bool bias) {
  static PrimitiveCache<std::tuple<int64_t, int64_t, int64_t, bool>, Product> cache(4096);
  return cache.get(std::make_tuple(M, K, N, bias), [&]() -> Product {
    if (multiplies_with_matmul()) {
      const auto pd = matmul_desc(M, K, N, bias);
      return {dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.bias_desc(), pd.dst_desc(), pd.scratchpad_desc()};
    }
    const auto pd = convolution_desc(M, K, N, bias);
    return {dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(), pd.bias_desc(), pd.dst_desc(),
            pd.scratchpad_desc()};
  });
}

// The weight [N, K] as it is stored, in the dimensions the primitive's weights have.
dnnl::memory::desc plain_weight(int64_t N, int64_t K) {
  return multiplies_with_matmul() ? dnnl::memory::desc({K, N}, dt::f32, tag::ba)
                                 : dnnl::memory::desc({N, K, 1}, dt::f32, tag::oiw);
}

// One packed weight: the storage it was read from (weakly: to see it freed), the version it had,
// and the copy in the primitives' layout.
struct Packed {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uint32_t version = 0;
  std::shared_ptr<dnnl::memory> weights;
  int64_t bytes = 0;
};

class Store {
 public:
  // The weight's packed copy, packed now if it has none or it is stale; null when the limit
  // leaves no room or oneDNN refuses.
  std::shared_ptr<dnnl::memory> get(const torch::Tensor& weight) {
    const int64_t N = weight.size(0), K = weight.size(1);
    const auto* impl = weight.unsafeGetTensorImpl();
    const auto key = std::make_tuple(static_cast<const void*>(impl->storage().unsafeGetStorageImpl()),
                                     weight.data_ptr(), N, K);
    // A tensor made in inference mode keeps no version: taken as never modified in place (such
    // weights are derived ones, made anew rather than changed).
    const uint32_t version = weight.is_inference() ? 0 : weight._version();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = packed_.find(key);
    if (it != packed_.end() && !it->second.storage.expired() && it->second.version == version) {
      return it->second.weights;
    }
    if (it != packed_.end()) {
      bytes_ -= it->second.bytes;
      packed_.erase(it);
    }
    sweep();
    const auto layout = product_for(64, K, N, false)->weights;
    const auto size = static_cast<int64_t>(layout.get_size());
    if (bytes_ + size > limit_.load()) return nullptr;
    auto copy = std::make_shared<dnnl::memory>(layout, onednn_cpu_engine());
    dnnl::memory plain(plain_weight(N, K), onednn_cpu_engine(), weight.data_ptr<float>());
    dnnl::stream stream(onednn_cpu_engine());
    dnnl::reorder(plain, *copy).execute(stream, plain, *copy);
    stream.wait();
    packed_.emplace(key, Packed{impl->storage().getWeakStorageImpl(), version, copy, size});
    bytes_ += size;
    return copy;
  }

  PackedStore held() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<int64_t>(packed_.size()), bytes_};
  }

  void set_limit(int64_t bytes) { limit_.store(bytes); }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    packed_.clear();
    bytes_ = 0;
  }

 private:
  // Drops the copies of weights freed since.
  void sweep() {
    for (auto it = packed_.begin(); it != packed_.end();) {
      if (it->second.storage.expired()) {
        bytes_ -= it->second.bytes;
        it = packed_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex mutex_;
  std::map<std::tuple<const void*, const void*, int64_t, int64_t>, Packed> packed_;
  int64_t bytes_ = 0;
  std::atomic<int64_t> limit_{parse_packed_weights_limit(std::getenv("LEANSEQ_PACKED_WEIGHTS_MB")) << 20};
};

Store& store() {
  static Store s;
  return s;
}

// The rows of the next piece of a product with `left` rows still to multiply.
int64_t piece_rows(int64_t left) { return left >= 512 ? 512 : left >= 64 ? left / 64 * 64 : left; }

// packed_product once packed weights are on; undefined when the store has no room for the weight
// or the primitive wants another layout.
torch::Tensor multiply(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t M = rows.size(0), K = rows.size(1), N = weight.size(0);
  const auto weights = store().get(weight);
  if (!weights) return {};
  // The primitives run on this thread's OpenMP team, sized as ATen's (as dense.cpp's sgemm).
  (void)at::get_num_threads();
  auto out = torch::empty({M, N}, rows.options());
  thread_local Scratch scratch;
  const float* x = rows.data_ptr<float>();
  float* y = out.data_ptr<float>();
  void* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  for (int64_t done = 0; done < M;) {
    const int64_t m = piece_rows(M - done);
    const auto product = product_for(m, K, N, bias.defined());
    if (product->weights != weights->get_desc()) return {};  // a layout other than the one packed
    void* pad = scratch.at(product->scratchpad.get_size());
    void* src = const_cast<float*>(x + done * K);
    if (b) {
      execute_on_this_thread(product, product->primitive,
                             {{DNNL_ARG_SRC, nullptr, &product->src, src},
                              {DNNL_ARG_WEIGHTS, weights.get()},
                              {DNNL_ARG_BIAS, nullptr, &product->bias, b},
                              {DNNL_ARG_DST, nullptr, &product->dst, y + done * N},
                              {DNNL_ARG_SCRATCHPAD, nullptr, &product->scratchpad, pad}});
    } else {
      execute_on_this_thread(product, product->primitive,
                             {{DNNL_ARG_SRC, nullptr, &product->src, src},
                              {DNNL_ARG_WEIGHTS, weights.get()},
                              {DNNL_ARG_DST, nullptr, &product->dst, y + done * N},
                              {DNNL_ARG_SCRATCHPAD, nullptr, &product->scratchpad, pad}});
    }
    done += m;
  }
  count_product({'N', 'T', M, N, K});
  return out;
}

}  // namespace
#endif

torch::Tensor packed_product(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
#ifdef LEANSEQ_WITH_DNNL
  if (!packed_weights()) return {};
  try {
    return multiply(rows, weight, bias);
  } catch (const dnnl::error&) {
    return {};  // oneDNN refused a primitive or the copy: the sgemm takes the product
  }
#else
  (void)rows, (void)weight, (void)bias;
  return {};
#endif
}

const char* packed_primitive() {
#ifdef LEANSEQ_WITH_DNNL
  return multiplies_with_matmul() ? "matmul" : "1x1 convolution";
#else
  return "sgemm";
#endif
}

PackedStore packed_store() {
#ifdef LEANSEQ_WITH_DNNL
  return store().held();
#else
  return {};
#endif
}

void set_packed_store_limit(int64_t bytes) {
#ifdef LEANSEQ_WITH_DNNL
  store().set_limit(bytes);
#else
  (void)bytes;
#endif
}

void clear_packed_store() {
#ifdef LEANSEQ_WITH_DNNL
  store().clear();
#endif
}

}  // namespace leanseq::kernels
