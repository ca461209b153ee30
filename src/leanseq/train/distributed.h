// Data-parallel training on LibTorch's c10d engine: a process group over a TCP-store rendezvous
// (Gloo for CPU training, NCCL for CUDA training in a CUDA build), joined from the environment that torchrun and `leanseq train --nproc` set
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
  // Whether this build has the process group for `device` (Gloo for the CPU, NCCL for CUDA).
  static bool supports(const torch::Device& device);

  // Joins the group: rank 0 serves the TCP store, every rank waits at most `timeout` for all
  // others, and the same timeout bounds every later collective. The backend follows `device`
  // (Gloo for the CPU, NCCL for a CUDA device); a ConfigError when this build lacks it.
  Distributed(const DistributedEnv& env, std::chrono::milliseconds timeout, const torch::Device& device = torch::kCPU);
  ~Distributed();
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  // "Gloo" or "NCCL".
  const std::string& backend() const { return backend_; }

  // In place, across ranks. `what` names the operation in errors. Tensors may live on the CPU or
  // on the group's device; they are moved for the collective when the backend needs it.
  void all_reduce_sum(torch::Tensor& t, const std::string& what) { all_reduce(t, false, what); }
  void all_reduce_max(torch::Tensor& t, const std::string& what) { all_reduce(t, true, what); }
  // A few numbers (loss sums, counts) summed across ranks, in place.
  void all_reduce_sum(std::vector<double>& values, const std::string& what) {
    auto t = torch::tensor(values, torch::kDouble);
    all_reduce(t, false, what);
    for (size_t i = 0; i < values.size(); ++i) values[i] = t[static_cast<int64_t>(i)].item<double>();
  }
  void broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what);
  // Sums the gradients of `params` over ranks (an undefined gradient counts as zeros and becomes
  // a defined one), packed into flat buckets of at most `bucket_bytes` whose all-reduces are all
  // in flight before the first is waited for.
  void all_reduce_gradients(const std::vector<torch::Tensor>& params, int64_t bucket_bytes);
  // The largest absolute difference between `tensors` here and on rank 0, over all ranks (the
  // same answer everywhere); 0 when every rank holds the same values. Costs one broadcast of the
  // tensors.
  double max_difference_from_rank0(const std::vector<torch::Tensor>& tensors);

 private:
  void all_reduce(torch::Tensor& t, bool max, const std::string& what);
  struct Impl;
  DistributedEnv env_;
  std::string backend_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::train
