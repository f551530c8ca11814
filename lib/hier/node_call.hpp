#pragma once
// shared_memory and hierarchical as schedules on the round engine (node_call.cpp): the
// nonblocking and persistent calls' path through a node. Declared for lib/core in
// hier/hier.hpp; this header adds what node_call.cpp shares with hier_allgather.cpp.

#include "hier/hier.hpp"

#include <agx/algorithm.hpp>

#include <cstddef>

namespace agx::hier {

/// The inter-node algorithm of a call of `total` bytes on `nnodes` nodes (AGX_HIER_INTER
/// or the rule; hier_allgather.cpp).
AlgorithmChoice inter_algorithm(int nnodes, std::size_t total);

/// A blocking call of `a` through the node's segment: the planner's schedule
/// (node_planner.cpp) run to completion by the round engine on this thread, with the
/// blocking calls' region of the segment and their wait style. `total` > 0.
void run_node_schedule(CommContext& ctx, Algorithm a, const Buffers& buffers,
                       const Layout& layout, std::size_t total, const BlockPieces* pieces);

}  // namespace agx::hier
