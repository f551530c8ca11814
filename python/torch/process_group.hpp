#pragma once
// agx::torch::ProcessGroup: the torch.distributed backend "agx" (docs/torch.md).
//
// The all-gather calls (all_gather with equal or uneven shapes, all_gather_into_tensor /
// _allgather_base, all_gather_coalesced) are agx's nonblocking all-gather on the group's
// MPI communicator; everything else a training script calls (all_reduce, broadcast,
// reduce, reduce_scatter, all_to_all, gather, scatter, send/recv, barrier) is the MPI
// library's nonblocking call on a duplicate of it. Every call returns a Work at once;
// wait() / is_completed() advance it.

#include "work.hpp"

#include <mpi.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace agx::torch {

class StagingPool;  // process_group.cpp

class ProcessGroup final : public c10d::ProcessGroup {
 public:
  /// The default group: MPI_COMM_WORLD with its ranks renumbered as torch numbers them
  /// (`rank` of `size`; size must be MPI_COMM_WORLD's). Collective over MPI_COMM_WORLD.
  static c10::intrusive_ptr<ProcessGroup> create_world(int rank, int size);
  /// A group of the default group's ranks `ranks` (torch's global ranks, in the group's
  /// order); this process is `rank` in it. Collective over the group's members only.
  static c10::intrusive_ptr<ProcessGroup> create_group(const std::vector<int64_t>& ranks, int rank);

  /// Owns `comm` (a communicator of its own; agx's collectives run on it).
  explicit ProcessGroup(MPI_Comm comm);
  ~ProcessGroup() override;

  const std::string getBackendName() const override { return "agx"; }

  // agx's all-gather.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = {}) override;

  // The MPI library's.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  /// Calls served so far, by operation ("all_gather", "all_gather_into_tensor",
  /// "all_gather_coalesced" by agx; the others by the MPI library).
  std::map<std::string, std::uint64_t> calls() const;
  /// The algorithm (with its parameters) of the last all-gather agx ran.
  std::string last_algorithm() const;
  /// Where the last all-gather wrote: "direct" (into the outputs where they are),
  /// "in place", "staging" (a staging buffer, then copies); one per list when coalesced.
  std::string last_way() const;

 private:
  c10::intrusive_ptr<c10d::Work> mpi_work(c10d::OpType type, const char* what,
                                          std::vector<MPI_Request> requests,
                                          std::vector<at::Tensor> keep,
                                          std::vector<at::Tensor> outputs,
                                          std::function<void()> finish = {});
  /// AGX_CHECK=1: every rank's (operation, dtype, count) agree, or c10::Error on every
  /// rank naming the first disagreement. `expected`, when not empty, is what this rank
  /// expects every rank's count to be (all-gather); else every count must be equal.
  void agree(const char* what, at::ScalarType type, std::int64_t count,
             const std::vector<std::int64_t>& expected = {}, std::int64_t root = -1);
  /// Counts a served call (and, for agx's all-gathers, what ran and how it wrote).
  void served(const char* what, const std::string& algorithm = {}, const std::string& way = {});

  MPI_Comm comm_ = MPI_COMM_NULL;  // agx's all-gathers
  MPI_Comm mpi_ = MPI_COMM_NULL;   // the MPI library's operations (a duplicate)
  bool check_ = false;             // AGX_CHECK=1
  // Staging buffers of list all-gathers whose outputs are separate tensors, reused from
  // call to call (a fresh large buffer costs its page faults at every call).
  std::shared_ptr<StagingPool> staging_;
  mutable std::mutex served_mutex_;  // calls_, last_*: read from any Python thread
  std::map<std::string, std::uint64_t> calls_;
  std::string last_algorithm_, last_way_;
};

}  // namespace agx::torch
