#pragma once
// What lib/api (the dispatch above lib/core, lib/hier and lib/cuda) sees of lib/hier: run
// a hierarchical or shared-memory all-gather, and reach a communicator's hierarchical
// state (for agx-info and tests).

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/cost_model.hpp"

#include <memory>
#include <string>

namespace agx {
class CommContext;
class DeviceCopies;
struct BlockPieces;
}

namespace agx::hier {

class HierContext;

/// The hierarchical state of `ctx` (made at its set-up, lib/api/context.cpp).
HierContext& hier_context(CommContext& ctx);

/// How the node stage of `h`'s communicator is cut (leaders, inter-node algorithm): what
/// the cost model prices is what run() and start_node_call() run.
NodeStageParams stage_params(const HierContext& h);

/// Runs `a` (Algorithm::hierarchical or Algorithm::shared_memory) on `ctx`.
/// Throws agx::Error when shared_memory is forced on ranks of several nodes.
/// `checked`: AGX_INTEGRITY's end-to-end check and its test seam apply (core/integrity.hpp);
/// lib/cuda passes false (its calls may differ between ranks in how often they come here).
void run(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
         bool checked = true);

/// run() for blocks made of pieces (a fused call, lib/fused; core/message.hpp): block b
/// of `layout` is the list b of `pieces` (which holds its bytes), `buffers` are in place
/// and their ranges are never touched (the own pieces hold the own block already). The
/// node schedule's puts and gets gather and scatter them (hier/block_pieces.hpp); one rank per node
/// sends them as the executor's block pieces. Runs no AGX_INTEGRITY end-to-end check and
/// no AGX_TEST_FLIP (callers run such calls as ranges). Every rank of the call runs it so.
void run_pieces(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
                const BlockPieces& pieces);

/// A shared_memory or hierarchical call running on the round engine (node_call.cpp):
/// started at once, advanced by test_node_call without blocking.
struct NodeCall;
struct NodeCallDeleter {
  void operator()(NodeCall* c) const noexcept;
};
using NodeCallPtr = std::unique_ptr<NodeCall, NodeCallDeleter>;
/// `pieces`, where not null: blocks made of pieces, as run_pieces() says (it must outlive
/// the call; not under AGX_INTEGRITY or AGX_TEST_FLIP).
/// `device`, where not null: `buffers` are the pinned host mirror of device buffers, and
/// the call runs the node schedule staged (stage_on_device) with `device` as its device
/// copies (lib/cuda's StagedNodeCall; it must outlive the call). Its AGX_INTEGRITY
/// end-to-end check takes the own block's checksum once the rounds are done (the own
/// block reaches the mirror during round 0), not at the start.
NodeCallPtr start_node_call(CommContext& ctx, Algorithm a, const Buffers& buffers,
                            const Layout& layout, const BlockPieces* pieces = nullptr,
                            DeviceCopies* device = nullptr);
/// Whether the node set-up has begun on `ctx` (by a blocking or a nonblocking call), so
/// that a nonblocking node call of this layout finishes it, and any growth, from test()
/// (the same answer on every rank: only calls every rank makes alike begin it).
bool node_call_ready(CommContext& ctx, const Layout& layout);
/// Whether ctx's node set-up has begun, or a first call already ran point-to-point in
/// place of a node path: the first-call rule (core/choose.hpp) applies only before.
bool node_begun(CommContext& ctx);
/// Records that a call ran point-to-point in place of a node path (the first-call rule),
/// so that the next one makes the node state. Every rank calls it alike (collective
/// calls come in the same order everywhere).
void defer_node_set_up(CommContext& ctx);
/// True once the call is complete on this rank.
bool test_node_call(NodeCall& call);

/// A readable report of what agx sees for ctx's communicator (collective over it the
/// first time: the node communicator and the bindings of the node's ranks).
std::string describe(CommContext& ctx);

}  // namespace agx::hier
