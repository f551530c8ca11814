#pragma once
// agx::torch::Work: the torch.distributed Work that every call of the agx process group
// returns. It holds what is in flight (an agx request, a fused agx request or MPI
// requests), the tensors that must stay alive until it ends, and an optional finishing
// step (copying a staging buffer into the caller's output tensors). test() and wait()
// advance it; wait() runs without the GIL.

#include <agx/fused.hpp>
#include <agx/request.hpp>
#include <mpi.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace agx::torch {

/// Something in flight: test() advances it without blocking (true once complete), wait()
/// blocks until complete. Both throw on failure.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
  /// The sender of a receive from any source (-1 otherwise).
  virtual int source() const { return -1; }
};

std::unique_ptr<Pending> pending(agx::Request request);
std::unique_ptr<Pending> pending(agx::FusedRequest request);
/// MPI requests of the MPI library (`what` names the operation in errors).
std::unique_ptr<Pending> pending(std::vector<MPI_Request> requests, const char* what);
/// Nothing in flight (the call completed when it was made).
std::unique_ptr<Pending> done();

class Work : public c10d::Work {
 public:
  /// `keep`: tensors that must outlive the call (inputs, staging); `outputs`: what
  /// result() returns; `finish` runs once, on completion, before the work reads complete;
  /// `hold`: anything else the call reads until it ends.
  Work(int rank, c10d::OpType type, const char* title, std::unique_ptr<Pending> pending,
       std::vector<at::Tensor> keep, std::vector<at::Tensor> outputs,
       std::function<void()> finish = {}, std::shared_ptr<void> hold = {});
  ~Work() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  /// A future completed with result(); waits for the work first.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  /// Advances once (block: until complete); runs `finish_` and completes on the way.
  void advance(bool block);

  std::mutex progress_;
  std::unique_ptr<Pending> pending_;
  std::vector<at::Tensor> keep_, outputs_;
  std::function<void()> finish_;
  std::shared_ptr<void> hold_;  // what the call reads besides tensors (a layout's vectors)
  bool ended_ = false;
  int source_ = -1;
};

}  // namespace agx::torch
