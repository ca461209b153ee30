#include "leanseq/train/distributed.h"

// The Gloo process group's declarations are behind this switch; libtorch_cpu is built with it.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>

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

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
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
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

Distributed::Distributed(const DistributedEnv& env_in, std::chrono::milliseconds timeout)
    : env_(env_in), impl_(std::make_unique<Impl>()) {
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
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    if (auto ifname = env("GLOO_SOCKET_IFNAME")) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
    } else if (env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost") {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    opts->threads = 2;
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env_.rank, env_.world_size, opts);
  } catch (const std::exception& e) {
    throw DistributedError("distributed rendezvous at " + where + " (" + who + "): the ranks did not all meet within " +
                           std::to_string(timeout.count() / 1000) + " s (" + first_line(e.what()) +
                           "); check that all " + std::to_string(env_.world_size) +
                           " workers started with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (on several "
                           "machines, GLOO_SOCKET_IFNAME names the network interface to use)");
  }
}

Distributed::~Distributed() = default;

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
}  // namespace

void Distributed::all_reduce_sum(torch::Tensor& t, const std::string& what) {
  guarded(*this, what, [&] {
    std::vector<at::Tensor> v{t};
    impl_->pg->allreduce(v)->wait();
  });
}

void Distributed::all_reduce_max(torch::Tensor& t, const std::string& what) {
  guarded(*this, what, [&] {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    impl_->pg->allreduce(v, o)->wait();
  });
}

void Distributed::broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what) {
  guarded(*this, what, [&] {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    // Gloo broadcasts one tensor per call; they are all in flight before the first wait.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<std::vector<at::Tensor>> holders;
    holders.reserve(tensors.size());
    for (auto& t : tensors) {
      holders.push_back({t});
      works.push_back(impl_->pg->broadcast(holders.back(), o));
    }
    for (auto& w : works) w->wait();
  });
}

void Distributed::all_reduce_gradients(const std::vector<torch::Tensor>& params, int64_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  // Buckets of consecutive parameters of one dtype.
  std::vector<std::vector<torch::Tensor>> buckets;
  int64_t bytes = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad() = torch::zeros_like(p);
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
