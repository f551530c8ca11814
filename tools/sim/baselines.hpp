#pragma once
// Fair baselines for the simulation grid: what Open MPI and MPICH would run, executed with
// agx's own planners for the same algorithms (agx's ring is a neighbour ring, as theirs).
// The rules are written from the libraries' documented decisions (docs/scale.md names the
// sources), not from their code:
//
//   ompi41   Open MPI 4.1's coll/tuned fixed decision for MPI_Allgather: by communicator
//            size band, then by bytes per rank (recursive doubling, Bruck, neighbour
//            exchange, ring; two ranks: one exchange). Its recursive doubling falls back
//            to Bruck when N is not a power of two, its neighbour exchange to ring when N
//            is odd.
//   mpich    MPICH's default rule: total bytes (N x per rank) under 512 KiB and N a power
//            of two: recursive doubling; under 80 KiB: Bruck; else ring.
//   han      Open MPI 5's coll/han composition: gather of each node's blocks to its
//            leader, all-gather of the node aggregates among the leaders (with ompi41's
//            rule on the leaders' communicator), binomial broadcast inside each node;
//            planned by HanPlanner as one point-to-point schedule:
//
//              1 round          every non-leader sends its block to its node's leader
//              inner rounds     leaders (local index 0) run `inter`'s schedule on the
//                               node aggregates (inner block j = node j's blocks)
//              ceil(log2 ppn)   binomial broadcast of all blocks inside each node
//
//            Ranks are placed node by node (node j holds ranks [j·ppn, (j+1)·ppn)).

#include "core/planner.hpp"

#include <cstddef>

namespace agx::sim {

AlgorithmChoice ompi41_rule(int nranks, std::size_t bytes_per_rank);
AlgorithmChoice mpich_rule(int nranks, std::size_t bytes_per_rank);

class HanPlanner final : public Planner {
 public:
  HanPlanner(int ranks_per_node, AlgorithmChoice inter) : ppn_(ranks_per_node), inter_(inter) {}
  Algorithm id() const override { return Algorithm::hierarchical; }
  const AlgorithmChoice& inter() const { return inter_; }

 protected:
  Schedule plan_rounds(const Problem& p) const override;

 private:
  int ppn_;
  AlgorithmChoice inter_;
};

/// HAN for `nranks` ranks, `ppn` per node, `bytes_per_rank`: the leaders' algorithm is
/// ompi41_rule(nodes, ppn · bytes_per_rank).
HanPlanner han_planner(int nranks, int ppn, std::size_t bytes_per_rank);

}  // namespace agx::sim
