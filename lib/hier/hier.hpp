#pragma once
// What lib/core sees of lib/hier: run a hierarchical or shared-memory all-gather, and
// reach a communicator's hierarchical state (for agx-info and tests).

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include <memory>
#include <string>

namespace agx {
class CommContext;
}

namespace agx::hier {

class HierContext;

/// The hierarchical state of `ctx`, created on first use (collective over it).
HierContext& hier_context(CommContext& ctx);

/// Runs `a` (Algorithm::hierarchical or Algorithm::shared_memory) on `ctx`.
/// Throws agx::Error when shared_memory is forced on ranks of several nodes.
/// `checked`: AGX_INTEGRITY's end-to-end check and its test seam apply (core/integrity.hpp);
/// lib/cuda passes false (its calls may differ between ranks in how often they come here).
void run(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
         bool checked = true);

/// A shared_memory or hierarchical call running on the round engine (node_call.cpp):
/// started at once, advanced by test_node_call without blocking.
struct NodeCall;
struct NodeCallDeleter {
  void operator()(NodeCall* c) const noexcept;
};
using NodeCallPtr = std::unique_ptr<NodeCall, NodeCallDeleter>;
NodeCallPtr start_node_call(CommContext& ctx, Algorithm a, const Buffers& buffers,
                            const Layout& layout);
/// Whether a node call of this layout can start without any collective set-up: the
/// node's flag segment exists and its data segment needs no growth (the same answer on
/// every rank: both are made only by calls every rank makes alike).
bool node_call_ready(CommContext& ctx, const Layout& layout);
/// True once the call is complete on this rank.
bool test_node_call(NodeCall& call);

/// A readable report of what agx sees for `comm` (collective: creates the state).
std::string describe(MPI_Comm comm);

}  // namespace agx::hier
