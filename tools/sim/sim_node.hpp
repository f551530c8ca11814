#pragma once
// Node-level operations (puts, gets, segment transfers: core/schedule.hpp) under SimGrid
// SMPI, for lib's own `shared_memory` and `hierarchical` schedules
// (lib/core/planners/node_planner.cpp) run by lib's own round engine (core/executor.hpp). SMPI cannot
// time real shared memory (copies between its rank threads cost no simulated time, and a
// busy-wait on a flag never lets the simulated clock move), so this NodeSegment gives the
// node operations a model, the cost model's own:
//
//   put   the rank's core copies its block into the node's segment: it sleeps (simulated
//         time) sync + copy · bytes, then raises its flag (the call's generation)
//   get   for each block, waits until the flag that covers it is up (a block of this node:
//         its owner's put; another node's block: the signal of it by the leader that
//         received it into the segment, at the end of that round), then sleeps
//         copy · bytes for the blocks it could copy; sync once per get
//   send from the segment   waits (no cost) until the owners of this node's blocks in it
//         have put them, then is an ordinary MPI message from the segment's addresses
//   flags  a wait is a SimGrid condition variable: it ends at the simulated instant the
//         flag is raised (no polling, no latency of its own; the sync term charges it)
//
// copy and sync are the cost model's copy_s_per_byte and node_sync_s (agx-sim
// --node-copy), so for node operations model and simulation agree by construction; what the
// simulation adds is the network (the leaders' messages) and when flags go up. Not
// modelled: memory-bandwidth sharing beyond the per-rank copy rate (the rate is meant as
// the one measured with every rank copying at once), lib/hier's chunked pipelining of a
// block (a get copies a block once it is completely put) and the copies a blocking call
// on one node may take instead of staging (blocks in the flag lines, single copy:
// hier/node_copies.hpp): the schedule and its rounds are lib/hier's, the copies staged.
//
// SMPI runs every rank as a thread of one process, so a node's state lives on the heap
// of its lowest rank, which passes its address to the others (SimNodes' constructor,
// collective). Outside SMPI node operations cannot run (ranks are processes).

#include "core/node_segment.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace agx::sim {

struct NodeState;  // one node's flags and segment (sim_node.cpp)

struct NodeCopyCost {
  double copy_s_per_byte = 0;
  double sync_s = 0;
};

/// This rank's view of its node. Collective over `comm`: ranks on node node_of[r].
class SimNodes {
 public:
  /// `segment`: the segment's memory for every node (timing runs: one untouched buffer of
  /// at least `segment_bytes`); null: each node allocates its own (checked runs).
  SimNodes(const std::vector<int>& node_of, MPI_Comm comm, int tag, std::byte* segment,
           std::size_t segment_bytes, NodeCopyCost cost, bool copy_data);
  ~SimNodes();
  SimNodes(const SimNodes&) = delete;
  SimNodes& operator=(const SimNodes&) = delete;

  const std::vector<int>& node_of() const { return node_of_; }
  int rank() const { return rank_; }
  int node() const { return node_; }
  int local() const { return local_; }
  int local_of(int rank) const { return local_of_[static_cast<std::size_t>(rank)]; }
  NodeState& state() const { return *state_; }
  const NodeCopyCost& cost() const { return cost_; }
  bool copy_data() const { return copy_data_; }
  std::uint64_t next_gen() { return ++gen_; }

 private:
  std::vector<int> node_of_, local_of_;
  int rank_ = 0, node_ = 0, local_ = 0;
  bool owner_ = false;
  NodeState* state_ = nullptr;
  NodeCopyCost cost_;
  bool copy_data_ = false;
  std::uint64_t gen_ = 0;
};

/// One call's segment. `executed` is the schedule the engine runs and `planned` the
/// planner's (they differ when the driver flattens buffer messages for timing runs; the
/// flags are read from the planned blocks).
class SimNodeSegment final : public NodeSegment {
 public:
  SimNodeSegment(SimNodes& nodes, const Schedule& planned, const Schedule& executed,
                 const Layout& layout);
  const Buffers& segment_buffers() const override { return seg_buffers_; }
  const Layout& segment_layout() const override { return seg_layout_; }
  void put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override;
  void signal(const NodeOp& op) override;
  bool try_wait(const NodeOp& op) override;
  bool try_get(const NodeOp& op, GetCursor& cursor, const Buffers& mine, const Layout& layout) override;
  bool holds(const Transfer& send) override;
  void segment_round_done(bool truncated) override;
  void finish() override {}
  std::string waiting_for(const NodeOp&, const GetCursor&) const override { return "simulated flags"; }

 private:
  SimNodes& nodes_;
  std::uint64_t gen_;
  std::vector<std::size_t> bytes_, offsets_;
  Layout seg_layout_;
  Buffers seg_buffers_{};
  std::unordered_map<const Transfer*, const Transfer*> planned_of_;  // executed -> planned
};

}  // namespace agx::sim
