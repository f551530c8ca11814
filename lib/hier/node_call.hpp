#pragma once
// shared_memory and hierarchical as schedules on the round engine (node_call.cpp): the
// path of every call through a node, blocking, nonblocking and persistent. Declared for lib/core in
// hier/hier.hpp; this header adds what node_call.cpp shares with hier_allgather.cpp.

#include "hier/hier.hpp"
#include "hier/hier_context.hpp"

#include <agx/algorithm.hpp>

#include <cstddef>

namespace agx::hier {

/// The inter-node algorithm of a call of `total` bytes on `nnodes` nodes (AGX_HIER_INTER
/// or the rule; hier_allgather.cpp).
AlgorithmChoice inter_algorithm(int nnodes, std::size_t total);

/// The node schedule of `a` for calls of `total` bytes on this communicator, planned once
/// (node_call.cpp).
HierContext::NodePlan& node_plan(HierContext& h, Algorithm a, std::size_t total);

/// The single-copy schedule of this one node's rank (NodeShape::single_copy: expose,
/// read, release), planned on its first use.
HierContext::NodePlan& single_copy_plan(HierContext& h);

/// How a blocking call's puts and gets copy (node_copies.hpp): staged through the
/// segment (any call), in the flag lines or by single copy (one node only).
enum class NodeCopies { staged, flag_lines, single_copy };

/// A blocking call of `a` through the node: the planner's schedule (core/planners/node_planner.cpp)
/// run to completion by the round engine on this thread, with `copies` (staged: the
/// blocking calls' region of the segment) and the blocking calls' wait style.
/// `plan`: node_plan's for the call (its total > 0).
void run_node_schedule(CommContext& ctx, Algorithm a, HierContext::NodePlan& plan,
                       const Buffers& buffers, const Layout& layout, const BlockPieces* pieces,
                       NodeCopies copies = NodeCopies::staged);

}  // namespace agx::hier
