// Data-parallel training on LibTorch's c10d engine: a process group over a TCP-store rendezvous
// (Gloo on CPU), joined from the environment that torchrun and `leanseq train --nproc` set
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), and the collectives the trainer needs.
// Every failure of the engine (a peer that never arrives, dies or stops answering within the
// timeout) surfaces as a DistributedError naming this rank and the operation.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/core/error.h"

namespace leanseq::train {

class DistributedError : public Error {
 public:
  using Error::Error;
};

// The rendezvous settings of one worker, read from the environment.
struct DistributedEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // nullopt when WORLD_SIZE is unset; a ConfigError when the variables are incomplete or invalid.
  static std::optional<DistributedEnv> from_environment();
};

class Distributed {
 public:
  // Joins the group: rank 0 serves the TCP store, every rank waits at most `timeout` for all
  // others, and the same timeout bounds every later collective.
  Distributed(const DistributedEnv& env, std::chrono::milliseconds timeout);
  ~Distributed();
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }

  // In place, across ranks. `what` names the operation in errors.
  void all_reduce_sum(torch::Tensor& t, const std::string& what);
  void all_reduce_max(torch::Tensor& t, const std::string& what);
  void broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what);
  // Sums the gradients of `params` over ranks (an undefined gradient counts as zeros and becomes
  // a defined one), packed into flat buckets of at most `bucket_bytes` whose all-reduces are all
  // in flight before the first is waited for.
  void all_reduce_gradients(const std::vector<torch::Tensor>& params, int64_t bucket_bytes);

 private:
  struct Impl;
  DistributedEnv env_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::train
