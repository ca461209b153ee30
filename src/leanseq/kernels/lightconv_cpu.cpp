// The dedicated CPU kernel of the lightweight/dynamic convolution. Every loop runs over one row of
// B * T (an output position, or an input position for the gradient of x) and, inside it, over the
// R = C / H contiguous channels of one head, which the compiler vectorises; a row reads at most K
// neighbouring input rows, which stay in cache. Forward, grad_x and the dynamic grad_w are
// independent per row and split over threads; the lightweight grad_w (shared over rows) sums
// per-thread partials.
#include <vector>

#include "leanseq/kernels/lightconv.h"
#include "leanseq/kernels/lightconv_function.h"
#include "leanseq/kernels/lightconv_shape.h"
#include "leanseq/kernels/parallel.h"

#define LEANSEQ_INLINE inline __attribute__((always_inline))
#define LEANSEQ_CLONES __attribute__((target_clones("avx2", "default")))

namespace leanseq::kernels {

namespace {

template <class S>
LEANSEQ_INLINE void forward_rows(const LightconvShape& s, const S* __restrict x, const S* __restrict w,
                                 S* __restrict y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / s.T, t = r % s.T;
    S* yr = y + r * s.C;
    for (int64_t c = 0; c < s.C; ++c) yr[c] = S(0);
    const int64_t k0 = s.tap_begin(t), k1 = s.tap_end(t);
    for (int64_t h = 0; h < s.H; ++h) {
      const S* wr = w + b * s.wb + h * s.wh + t * s.wt;
      S* yh = yr + h * s.R;
      for (int64_t k = k0; k < k1; ++k) {
        const S a = wr[k];
        const S* xh = x + (b * s.T + t + k - s.P) * s.C + h * s.R;
#pragma omp simd
        for (int64_t i = 0; i < s.R; ++i) yh[i] += a * xh[i];
      }
    }
  }
}

template <class S>
LEANSEQ_INLINE void grad_x_rows(const LightconvShape& s, const S* __restrict g, const S* __restrict w,
                                S* __restrict gx, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / s.T, src = r % s.T;
    S* gr = gx + r * s.C;
    for (int64_t c = 0; c < s.C; ++c) gr[c] = S(0);
    const int64_t k0 = s.src_tap_begin(src), k1 = s.src_tap_end(src);
    for (int64_t h = 0; h < s.H; ++h) {
      S* gh = gr + h * s.R;
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t t = src - k + s.P;
        const S a = w[b * s.wb + h * s.wh + t * s.wt + k];
        const S* go = g + (b * s.T + t) * s.C + h * s.R;
#pragma omp simd
        for (int64_t i = 0; i < s.R; ++i) gh[i] += a * go[i];
      }
    }
  }
}

// grad_w[b, h, t, k] = <g[b, t, head h], x[b, t + k - P, head h]>, added into `acc` at
// b * wb + h * wh + t * wt + k, the layout of the weights (dynamic: [B, H, T, K]; lightweight: a
// per-thread [H, K]).
template <class S, class A>
LEANSEQ_INLINE void grad_w_rows(const LightconvShape& s, const S* __restrict g, const S* __restrict x, A* __restrict acc,
                                int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / s.T, t = r % s.T;
    const int64_t k0 = s.tap_begin(t), k1 = s.tap_end(t);
    for (int64_t h = 0; h < s.H; ++h) {
      const S* go = g + r * s.C + h * s.R;
      A* ar = acc + b * s.wb + h * s.wh + t * s.wt;
      for (int64_t k = k0; k < k1; ++k) {
        const S* xh = x + (b * s.T + t + k - s.P) * s.C + h * s.R;
        S dot = S(0);
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < s.R; ++i) dot += go[i] * xh[i];
        ar[k] += dot;
      }
    }
  }
}

// Instantiations compiled for AVX2 and for the baseline; the CPU picks one at load time.
#define LEANSEQ_LIGHTCONV_ROWS(S)                                                                                  \
  LEANSEQ_CLONES void forward_rows_##S(const LightconvShape& s, const S* x, const S* w, S* y, int64_t r0,          \
                                       int64_t r1) {                                                               \
    forward_rows<S>(s, x, w, y, r0, r1);                                                                           \
  }                                                                                                                \
  LEANSEQ_CLONES void grad_x_rows_##S(const LightconvShape& s, const S* g, const S* w, S* gx, int64_t r0,         \
                                      int64_t r1) {                                                                \
    grad_x_rows<S>(s, g, w, gx, r0, r1);                                                                           \
  }                                                                                                                \
  LEANSEQ_CLONES void grad_w_rows_##S(const LightconvShape& s, const S* g, const S* x, S* acc, int64_t r0,      \
                                      int64_t r1) {                                                                \
    grad_w_rows<S, S>(s, g, x, acc, r0, r1);                                                                       \
  }                                                                                                                \
  LEANSEQ_CLONES void grad_w_shared_rows_##S(const LightconvShape& s, const S* g, const S* x, double* acc,        \
                                             int64_t r0, int64_t r1) {                                             \
    grad_w_rows<S, double>(s, g, x, acc, r0, r1);                                                                  \
  }
LEANSEQ_LIGHTCONV_ROWS(float)
LEANSEQ_LIGHTCONV_ROWS(double)
#undef LEANSEQ_LIGHTCONV_ROWS

void forward_dispatch(const LightconvShape& s, const float* x, const float* w, float* y, int64_t r0, int64_t r1) {
  forward_rows_float(s, x, w, y, r0, r1);
}
void forward_dispatch(const LightconvShape& s, const double* x, const double* w, double* y, int64_t r0, int64_t r1) {
  forward_rows_double(s, x, w, y, r0, r1);
}
void grad_x_dispatch(const LightconvShape& s, const float* g, const float* w, float* gx, int64_t r0, int64_t r1) {
  grad_x_rows_float(s, g, w, gx, r0, r1);
}
void grad_x_dispatch(const LightconvShape& s, const double* g, const double* w, double* gx, int64_t r0, int64_t r1) {
  grad_x_rows_double(s, g, w, gx, r0, r1);
}
void grad_w_dispatch(const LightconvShape& s, const float* g, const float* x, float* acc, int64_t r0, int64_t r1) {
  grad_w_rows_float(s, g, x, acc, r0, r1);
}
void grad_w_dispatch(const LightconvShape& s, const double* g, const double* x, double* acc, int64_t r0, int64_t r1) {
  grad_w_rows_double(s, g, x, acc, r0, r1);
}
void grad_w_shared_dispatch(const LightconvShape& s, const float* g, const float* x, double* acc, int64_t r0,
                            int64_t r1) {
  grad_w_shared_rows_float(s, g, x, acc, r0, r1);
}
void grad_w_shared_dispatch(const LightconvShape& s, const double* g, const double* x, double* acc, int64_t r0,
                            int64_t r1) {
  grad_w_shared_rows_double(s, g, x, acc, r0, r1);
}

// Rows per thread below which splitting does not pay for the thread start.
constexpr int64_t kMinRowsPerWorker = 64;

// An output shaped like `a`, its B*T rows split over threads: rows(s, a, w, out, r0, r1). The
// forward pass (a = x) and the input gradient (a = grad_out) have this form.
template <class Rows>
torch::Tensor map_rows(const LightconvShape& s, const torch::Tensor& a, const torch::Tensor& w, Rows rows) {
  auto out = torch::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "lightconv_cpu", [&] {
    const scalar_t* ap = a.data_ptr<scalar_t>();
    const scalar_t* wp = w.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    parallel_chunks(s.B * s.T, workers_for(s.B * s.T, kMinRowsPerWorker),
                    [&](int, int64_t r0, int64_t r1) { rows(s, ap, wp, op, r0, r1); });
  });
  return out;
}

}  // namespace

struct LightconvCpu {
  static bool accepts(const torch::Tensor& x) { return x.is_cpu(); }
  static const char* device_name() { return "CPU"; }

  static torch::Tensor forward(const LightconvShape& s, const torch::Tensor& x, const torch::Tensor& w) {
    return map_rows(s, x, w, [](auto&&... a) { forward_dispatch(a...); });
  }

  static torch::Tensor grad_x(const LightconvShape& s, const torch::Tensor& g, const torch::Tensor& w) {
    return map_rows(s, g, w, [](auto&&... a) { grad_x_dispatch(a...); });
  }

  static torch::Tensor grad_w(const LightconvShape& s, const torch::Tensor& g, const torch::Tensor& x) {
    const int64_t rows = s.B * s.T;
    const int workers = workers_for(rows, kMinRowsPerWorker);
    torch::Tensor gw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lightconv_cpu_grad_w", [&] {
      const scalar_t* gp = g.data_ptr<scalar_t>();
      const scalar_t* xp = x.data_ptr<scalar_t>();
      if (s.shared()) {
        // Per-thread partial sums in double, added in a fixed order (deterministic).
        std::vector<std::vector<double>> partial(workers, std::vector<double>(s.H * s.K, 0.0));
        parallel_chunks(rows, workers, [&](int wk, int64_t r0, int64_t r1) {
          grad_w_shared_dispatch(s, gp, xp, partial[wk].data(), r0, r1);
        });
        auto sum = torch::zeros({s.H, s.K}, torch::kDouble);
        double* sp = sum.data_ptr<double>();
        for (const auto& p : partial) {
          for (int64_t i = 0; i < s.H * s.K; ++i) sp[i] += p[i];
        }
        gw = sum.to(x.scalar_type());
      } else {
        gw = torch::zeros({s.B, s.H, s.T, s.K}, x.options());
        scalar_t* gwp = gw.data_ptr<scalar_t>();
        parallel_chunks(rows, workers, [&](int, int64_t r0, int64_t r1) { grad_w_dispatch(s, gp, xp, gwp, r0, r1); });
      }
    });
    return gw;
  }
};

torch::Tensor lightconv_cpu(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l) {
  return apply_lightconv_kernel<LightconvCpu>("lightconv_cpu", x, weights, padding_l);
}

}  // namespace leanseq::kernels

#undef LEANSEQ_CLONES
#undef LEANSEQ_INLINE
