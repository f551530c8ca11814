#pragma once
// The one algorithm interface. A planner declares what it can serve and plans a
// schedule; it never calls MPI. The planners are listed in the registry (registry.hpp).

#include <agx/algorithm.hpp>

#include "core/schedule.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace agx {

class Planner {
 public:
  virtual ~Planner() = default;
  virtual Algorithm id() const = 0;
  /// Empty when this algorithm can serve `p`; otherwise the reason it cannot.
  virtual std::string unsupported_reason(const Problem& p) const {
    (void)p;
    return {};
  }
  /// The schedule of rank p.rank among p.nranks: the algorithm's rounds (plan_rounds)
  /// with the own block's local copy in round 0 (add_own_copy, core/schedule.hpp).
  /// Pure: same input, same output.
  Schedule plan(const Problem& p) const {
    Schedule s = plan_rounds(p);
    add_own_copy(s);
    return s;
  }

 protected:
  /// What the algorithm itself plans: its rounds of messages, without the own copy.
  virtual Schedule plan_rounds(const Problem& p) const = 0;
};

/// Every planner of the registry, in registry order.
std::span<const Planner* const> all_planners();

/// The planner of an algorithm; throws agx::Error (MPI_ERR_ARG) for one without a
/// planner (`automatic`, and the paths lib/hier runs).
const Planner& planner_for(Algorithm a);

/// Where the ranks of a call are, and how its node stage is cut: what the planners of
/// `shared_memory` and `hierarchical` need besides the rank (lib/core/planners/node_planner.cpp).
struct NodeShape {
  std::vector<int> node_of;               ///< per rank; nodes numbered by their lowest rank
  int leaders = 1;                        ///< leaders per node (clamped to the smallest node)
  std::optional<AlgorithmChoice> inter;   ///< the inter-node algorithm (AGX_HIER_INTER), or the rule
  std::size_t total_bytes = 0;            ///< all blocks together (the inter-node rule reads it)
  /// One node whose every receive buffer the node can map (agx::allocate, MPI_Alloc_mem):
  /// shared_memory writes each block straight into the peers' buffers (direct write)
  bool direct_write = false;
  /// One node, heap buffers: shared_memory reads each block straight from its owner's
  /// buffer (single copy, process_vm_readv) instead of staging it through the segment
  bool single_copy = false;
  /// One node, device buffers (CUDA IPC, lib/cuda/ipc.hpp): shared_memory's single-copy
  /// schedule at the device level, each rank reading its peers' blocks from their device
  /// receive buffers; the own block is copied there first (the receive allocation is what
  /// a rank exposes)
  bool device_ipc = false;
};

/// The inter-node algorithm of a hierarchical call: `forced`, else direct for one node,
/// recursive doubling (power-of-two node counts) or Bruck up to 64 KiB in total, else
/// neighbour exchange (even node counts) or ring. Throws agx::Error when it cannot serve.
AlgorithmChoice hier_inter_algorithm(int nnodes, std::size_t total_bytes,
                                     std::optional<AlgorithmChoice> forced);

/// Leaders per node that a call actually uses: `wanted` clamped to [1, smallest node].
int hier_leaders(const NodeShape& shape);

/// The schedule of `rank` for Algorithm::shared_memory (all ranks of `shape` on one node)
/// or Algorithm::hierarchical. Pure, like every planner.
Schedule plan_node_algorithm(Algorithm a, const NodeShape& shape, int rank);

}  // namespace agx
