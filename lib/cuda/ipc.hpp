#pragma once
// One IPC call (ipc.cpp): shared_memory's single-copy schedule at the device level
// (NodeShape::device_ipc, core/planners/node_planner.cpp), run by the round engine
// (Execution's polled lane, advanced by test() without blocking) on IpcSegment, which
// carries its operations out with CUDA IPC and nonblocking collectives on the call's
// communicator.

#include <agx/bytes.hpp>
#include <mpi.h>

#include "core/executor.hpp"
#include "core/node_segment.hpp"
#include "core/schedule.hpp"
#include "cuda/backend.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace agx {
class CommContext;
}

namespace agx::cuda {

/// The IPC schedule's operations (see ipc.cpp for each one).
class IpcSegment final : public NodeSegment, public DeviceCopies {
 public:
  IpcSegment(CommContext& ctx, const Buffers& buffers, const Layout& layout);
  ~IpcSegment() override;
  IpcSegment(const IpcSegment&) = delete;
  IpcSegment& operator=(const IpcSegment&) = delete;

  /// Some rank could not export or map: every rank agreed, nothing but the own block has
  /// moved, and the call falls back (the schedule's reads and release then pass).
  bool fell_back() const { return agreed_ == 0 && step_ >= 2; }
  /// The call failed on this rank: a pending collective is freed, not waited for.
  void abandon() { abandoned_ = true; }

  // NodeSegment
  const Buffers& segment_buffers() const override { return none_; }
  const Layout& segment_layout() const override { return no_layout_; }
  void put(const NodeOp&, const Buffers&, const Layout&, bool) override;
  void expose(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override;
  void signal(const NodeOp&) override;
  bool try_wait(const NodeOp&) override;
  bool try_get(const NodeOp&, GetCursor&, const Buffers&, const Layout&) override;
  bool try_read(const NodeOp& op, GetCursor& cursor, const Buffers& mine, const Layout& layout) override;
  bool try_release(const NodeOp& op) override;
  bool holds(const Transfer&) override { return true; }
  void segment_round_done(bool) override {}
  void finish() override {}
  std::string waiting_for(const NodeOp& op, const GetCursor& cursor) const override;

  // DeviceCopies (the schedule's copy~device of the own block)
  void copy_own() override;
  void own_to_host() override;
  void own_needed(std::size_t) override {}
  void to_device(const Transfer&, std::size_t, std::size_t) override;
  void got(const NodeOp&, std::size_t, std::size_t) override;

 private:
  bool test_request();  // the pending collective, if any, is complete

  CommContext& ctx_;
  Buffers buffers_;
  Layout layout_;
  int step_ = 0;  ///< 0: exposed, handles in exchange; 1: opens in agreement; 2: agreed; 3: read; 4: released
  MPI_Request request_ = MPI_REQUEST_NULL;
  backend::IpcExport mine_{};
  std::vector<backend::IpcExport> all_;
  int ok_ = 1, agreed_ = 0;
  bool abandoned_ = false;
  Buffers none_{};
  Layout no_layout_;
};

class IpcCall {
 public:
  /// Plans the call's schedule and starts it (its own copy queued, the own block exposed,
  /// the handles in exchange). `tag`: the call's (the schedule has no message).
  IpcCall(CommContext& ctx, const Buffers& buffers, const Layout& layout, int tag);
  ~IpcCall();
  IpcCall(const IpcCall&) = delete;
  IpcCall& operator=(const IpcCall&) = delete;

  /// nullopt while running; true once complete; false, on every rank, when some rank
  /// cannot take part (nothing but the own block has moved then).
  std::optional<bool> test();

 private:
  Schedule schedule_;
  IpcSegment segment_;
  std::unique_ptr<Execution> execution_;
};

}  // namespace agx::cuda
