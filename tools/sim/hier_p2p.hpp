#pragma once
// The hierarchical all-gather in point-to-point form, for simulation (SMPI cannot model
// lib/hier's shared-memory node stage, see /work/shared/notes/simgrid-smpi.md). One
// schedule over the world communicator, ranks placed node by node (node j holds ranks
// [j·ppn, (j+1)·ppn), the last node may hold fewer):
//
//   1 round          gather: every non-leader sends its block to its node's leader
//   inner rounds     leaders (local index 0) run `inner`'s schedule on the node
//                    aggregates: inner block j = the contiguous run of node j's blocks
//   ceil(log2 ppn)   binomial broadcast inside each node of everything the leader holds
//
// Non-leaders keep empty rounds while the leaders exchange, so every rank has the same
// number of rounds (the validator and the cost model compare ranks round by round).
// Restrictions: none (any N, any ppn >= 1; ppn = 1 is `inner` plus empty rounds).

#include "core/planner.hpp"

namespace agx::sim {

class HierP2PPlanner final : public Planner {
 public:
  HierP2PPlanner(int ranks_per_node, const Planner& inner) : ppn_(ranks_per_node), inner_(inner) {}
  Algorithm id() const override { return Algorithm::hierarchical; }
  Schedule plan(const Problem& p) const override;
  const Planner& inner() const { return inner_; }

 private:
  int ppn_;
  const Planner& inner_;
};

}  // namespace agx::sim
