#include "leanseq/train/distributed.h"

#include "leanseq/core/compat.h"

// The process groups' declarations are behind c10d's switches: LibTorch's CPU library has Gloo,
// its CUDA library NCCL. The build defines LEANSEQ_WITH_GLOO when Gloo's headers are there and
// LEANSEQ_WITH_NCCL for a CUDA build with NCCL's.
#include LEANSEQ_C10D_BACKEND_HEADER
#ifdef LEANSEQ_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef LEANSEQ_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>

#include "leanseq/core/strings.h"

namespace leanseq::train {

namespace {
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int fallback, int min_value) {
  auto v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (*end != '\0' || x < min_value || x > 1 << 20) {
    throw ConfigError("environment variable " + std::string(name) + "=" + *v + ": expected an integer >= " +
                      std::to_string(min_value));
  }
  return static_cast<int>(x);
}

}  // namespace

std::optional<DistributedEnv> DistributedEnv::from_environment() {
  if (!env("WORLD_SIZE")) return std::nullopt;
  DistributedEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1);
  if (!env("RANK")) throw ConfigError("environment: WORLD_SIZE is set but RANK is not (both come from the launcher)");
  e.rank = env_int("RANK", 0, 0);
  if (e.rank >= e.world_size) {
    throw ConfigError("environment: RANK " + std::to_string(e.rank) + " is not below WORLD_SIZE " +
                      std::to_string(e.world_size));
  }
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0);
  if (auto a = env("MASTER_ADDR")) e.master_addr = *a;
  e.master_port = env_int("MASTER_PORT", 29500, 1);
  if (e.master_port > 65535) throw ConfigError("environment: MASTER_PORT " + std::to_string(e.master_port) + " is not a port");
  return e;
}

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<LEANSEQ_C10D_BACKEND> pg;
  torch::Device device{torch::kCPU};  // where the backend wants its tensors
};

bool Distributed::supports(const torch::Device& device) {
#ifdef LEANSEQ_WITH_GLOO
  if (device.is_cpu()) return true;
#endif
#ifdef LEANSEQ_WITH_NCCL
  if (device.is_cuda()) return true;
#endif
  return false;
}

namespace {
#ifdef LEANSEQ_WITH_GLOO
c10::intrusive_ptr<LEANSEQ_C10D_BACKEND> gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const DistributedEnv& e, std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (auto ifname = env("GLOO_SOCKET_IFNAME")) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
  } else if (e.master_addr == "127.0.0.1" || e.master_addr == "localhost") {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, e.rank, e.world_size, opts);
}
#endif
#ifdef LEANSEQ_WITH_NCCL
c10::intrusive_ptr<LEANSEQ_C10D_BACKEND> nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const DistributedEnv& e, std::chrono::milliseconds timeout,
                                                    const torch::Device& device) {
  c10::cuda::set_device(device.index());
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, e.rank, e.world_size, opts);
}
#endif
}  // namespace

Distributed::Distributed(const DistributedEnv& env_in, std::chrono::milliseconds timeout, const torch::Device& device)
    : env_(env_in), backend_(device.is_cuda() ? "NCCL" : "Gloo"), impl_(std::make_unique<Impl>()) {
  if (!supports(device)) {
    throw ConfigError("distributed training on " + device.str() + " needs c10d's " + backend_ +
                      " process group, which this build of leanseq does not have (" +
                      (device.is_cuda() ? "configure with -DLEANSEQ_CUDA=ON against a CUDA LibTorch with NCCL"
                                        : "install Gloo's headers, libgloo-dev, and rebuild") +
                      ")");
  }
  impl_->device = device;
  const std::string where = env_.master_addr + ":" + std::to_string(env_.master_port);
  const std::string who = "rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world_size);
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(env_.master_port);
    o.isServer = env_.rank == 0;
    o.numWorkers = static_cast<size_t>(env_.world_size);
    o.waitWorkers = true;
    o.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, o);
#ifdef LEANSEQ_WITH_GLOO
    if (device.is_cpu()) impl_->pg = gloo_group(impl_->store, env_, timeout);
#endif
#ifdef LEANSEQ_WITH_NCCL
    if (device.is_cuda()) impl_->pg = nccl_group(impl_->store, env_, timeout, device);
#endif
  } catch (const std::exception& e) {
    throw DistributedError("distributed rendezvous at " + where + " (" + who + "): the ranks did not all meet within " +
                           std::to_string(timeout.count() / 1000) + " s (" + first_line(e.what()) +
                           "); check that all " + std::to_string(env_.world_size) +
                           " workers started with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (on several "
                           "machines, GLOO_SOCKET_IFNAME names the network interface to use)");
  }
}

Distributed::~Distributed() {
#ifdef LEANSEQ_WITH_NCCL
  // NCCL's communicators are released explicitly (what Python's destroy_process_group does).
  if (impl_->pg && impl_->device.is_cuda()) {
    try {
      static_cast<c10d::ProcessGroupNCCL*>(impl_->pg.get())->shutdown();
    } catch (const std::exception&) {
    }
  }
#endif
}

namespace {
template <class F>
void guarded(const Distributed& d, const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw DistributedError("distributed: rank " + std::to_string(d.rank()) + " of " + std::to_string(d.world_size()) +
                           " lost its peers during " + what + " (" + first_line(e.what()) +
                           "); a worker died or stopped answering");
  }
}

// Runs `op` on `t` where the backend wants its tensors (NCCL: on the GPU), copying back when `t`
// lives elsewhere.
template <class Op>
void on_device(torch::Tensor& t, const torch::Device& device, Op&& op) {
  if (t.device() == device) {
    op(t);
    return;
  }
  auto moved = t.to(device);
  op(moved);
  t.copy_(moved);
}
}  // namespace

void Distributed::all_reduce(torch::Tensor& t, bool max, const std::string& what) {
  guarded(*this, what, [&] {
    on_device(t, impl_->device, [&](torch::Tensor& x) {
      std::vector<at::Tensor> v{x};
      c10d::AllreduceOptions o;
      o.reduceOp = max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
      impl_->pg->allreduce(v, o)->wait();
    });
  });
}

void Distributed::broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what) {
  guarded(*this, what, [&] {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    // One tensor per call (as Gloo wants); they are all in flight before the first wait.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<std::vector<at::Tensor>> holders;
    holders.reserve(tensors.size());
    for (auto& t : tensors) {
      holders.push_back({t.device() == impl_->device ? t : t.to(impl_->device)});
      works.push_back(impl_->pg->broadcast(holders.back(), o));
    }
    for (size_t i = 0; i < works.size(); ++i) {
      works[i]->wait();
      if (tensors[i].device() != impl_->device) tensors[i].copy_(holders[i][0]);
    }
  });
}

double Distributed::max_difference_from_rank0(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> theirs;
  theirs.reserve(tensors.size());
  for (const auto& t : tensors) theirs.push_back(t.detach().clone());
  broadcast(theirs, 0, "the broadcast of rank 0's weights for the consistency check");
  double diff = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel() == 0) continue;
    diff = std::max(diff, (tensors[i].detach() - theirs[i]).abs().max().item<double>());
  }
  auto d = torch::tensor({diff}, torch::kDouble);
  all_reduce_max(d, "the consistency check");
  return d.item<double>();
}

void Distributed::all_reduce_gradients(const std::vector<torch::Tensor>& params, int64_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  // Buckets of consecutive parameters of one dtype.
  std::vector<std::vector<torch::Tensor>> buckets;
  int64_t bytes = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    if (p.grad().device() != impl_->device) {
      throw ConfigError("distributed: a gradient on " + p.grad().device().str() + " in a " + backend_ +
                        " group on " + impl_->device.str());
    }
    const int64_t b = p.numel() * static_cast<int64_t>(p.element_size());
    if (buckets.empty() || bytes + b > bucket_bytes || buckets.back().front().scalar_type() != p.scalar_type()) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(p.grad());
    bytes += b;
  }
  guarded(*this, "the gradient all-reduce", [&] {
    std::vector<std::vector<at::Tensor>> flats;
    flats.reserve(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (const auto& grads : buckets) {
      std::vector<torch::Tensor> views;
      for (const auto& g : grads) views.push_back(g.reshape(-1));
      flats.push_back({torch::cat(views)});
      works.push_back(impl_->pg->allreduce(flats.back()));
    }
    for (size_t i = 0; i < buckets.size(); ++i) {
      works[i]->wait();
      int64_t offset = 0;
      for (auto& g : buckets[i]) {
        g.copy_(flats[i][0].narrow(0, offset, g.numel()).view_as(g));
        offset += g.numel();
      }
    }
  });
}

}  // namespace leanseq::train
