// The blocking node paths: `hierarchical` (node stage in, node aggregates between nodes,
// node stage out) and `shared_memory` (one node).
//
// Across nodes the call is the planner's schedule (core/planners/node_planner.cpp, the one the
// validator proves, the cost model prices and the simulator runs), run by the round
// engine (node_call.cpp, run_node_schedule), as nonblocking and persistent calls run it.
// 4 ranks, 2 nodes of 2 (round-robin placement: node 0 = {0, 2}, node 1 = {1, 3}):
//
//   segment of each node, node-major:  [ B0 B2 | B1 B3 ]   (node 0's aggregate first)
//   round 0   every rank puts B_r into its place in its node's segment (chunks + flags)
//   round 1   every rank gets its node's other blocks as their chunks arrive; leader l
//             sends slice l of its node's aggregate from the segment once the node's
//             blocks are in (AGX_HIER_INTER's schedule over nodes: ring, bruck, ...) and
//             receives the peers' slices straight into the segment
//   next      every rank gets the blocks that came in each inter-node round in the
//             round after it, once the leader that received them has signalled them,
//             into its receive buffer at the user's layout (any order of ranks, the v
//             form with zeros and any displacements, in place or not)
//
// Bytes: each rank copies M in and (N-1)·M out; each node's leaders together send and
// receive what the inter-node schedule moves for nnodes blocks of node aggregates.
// One rank per node: the inter-node schedule directly on the user's buffers.
// One node (`shared_memory`, or `hierarchical` whose ranks share a node): the same
// planner's schedule on the same engine, with the copies that suit the call
// (node_copies.hpp), which a blocking call may take because it is over before the next
// one starts: blocks of up to 4024 B in the flag lines, single copy when enabled and
// faster, else staged through the segment.
// Blocks made of pieces (run_pieces, a fused call): puts gather and gets scatter the
// pieces (block_pieces.hpp); single copy and direct write, which publish one range per
// rank, are not used then.
// Restrictions: none on counts or placement; `shared_memory` needs all ranks on one
// (virtual) node.

#include "hier/hier.hpp"
#include "hier/node_call.hpp"

#include <agx/error.hpp>

#include "core/copy.hpp"
#include "core/nonblocking.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/timeout.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/planner.hpp"
#include "core/registry.hpp"
#include "hier/direct_write.hpp"
#include "hier/hier_context.hpp"
#include "hier/block_pieces.hpp"
#include "hier/copy_choice.hpp"
#include "hier/node_copies.hpp"
#include "hier/settings.hpp"

#include <algorithm>
#include <optional>
#include <iomanip>
#include <cstring>
#include <sstream>

namespace agx::hier {
namespace {

}  // namespace

// The inter-node algorithm: AGX_HIER_INTER, else the rule (hier_inter_algorithm, the
// same one the planner and so the cost model use).
AlgorithmChoice inter_algorithm(int nnodes, std::size_t total) {
  const Settings& s = settings();
  if (const InvalidSetting* bad = process_settings().invalid_of("AGX_HIER_INTER"))
    throw Error(MPI_ERR_ARG, "agx: " + bad->message());
  return hier_inter_algorithm(nnodes, total, s.inter);
}

namespace {

// How the point-to-point stages of these paths name themselves in AGX_TIMEOUT reports
// (integrity is checked end to end around the whole call instead, see run()).
Checks inter_checks(const AlgorithmChoice& inter, const char* stage) {
  Checks c;
  c.algorithm = to_string(inter.id);
  c.stage = stage;
  return c;
}

// `pieces`: blocks made of pieces (run_pieces): no direct write and no single copy, which
// publish one range per rank; the inline and staged stages gather and scatter the pieces.
void run_path(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
              const BlockPieces* pieces = nullptr) {
  HierContext& h = hier_context(ctx);
  h.prepare_node();
  h.running = a;
  const Topology& t = h.topo;
  if (a == Algorithm::shared_memory && t.nnodes > 1)
    throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve this call: its " +
                                 std::to_string(t.size) + " ranks span " +
                                 std::to_string(t.nnodes) + " nodes (use 'hierarchical')");
  std::size_t total = 0, largest = 0;  // (uniform blocks: no pass over the ranks)
  if (layout.is_uniform()) {
    largest = layout.bytes(0);
    total = largest * static_cast<std::size_t>(t.size);
  } else {
    for (int r = 0; r < t.size; ++r) {
      total += layout.bytes(r);
      largest = std::max(largest, layout.bytes(r));
    }
  }
  const AlgorithmChoice inter =
      t.nnodes > 1 ? inter_algorithm(t.nnodes, total) : AlgorithmChoice{Algorithm::direct, 0};
  const int me = t.rank;
  if (total == 0) return;
  if (t.size == 1 || t.nnodes == t.size) {  // nothing shared: own block, then the schedule
    if (t.size == 1) {
      copy_own_block(buffers, layout, me);
      return;
    }
    Execution e(h.inter_schedule(inter), buffers, layout, h.leader_comm, h.next_leader_tag(),
                config().max_message_bytes,
                inter_checks(inter, "hierarchical with one rank per node"));
    if (pieces != nullptr) e.use_block_pieces(*pieces);
    e.start();
    wait_blocking(e);
    return;
  }
  const std::size_t mean = total / static_cast<std::size_t>(t.size);
  // Staged or the kernel's copies (copy_choice.hpp), picked once a call: by direct write
  // where the receive buffers are not all shared (a trial then times from `entered`).
  std::optional<LargeCopies> picked;
  double entered = 0.0;
  if (t.nnodes == 1 && pieces == nullptr && direct_write_size(mean)) {
    entered = MPI_Wtime();
    if (direct_write(h, buffers, layout, true, &picked)) return;  // direct_write.hpp
  }
  LargeCopies large = picked.value_or(LargeCopies{});
  const WaitPick wait = h.wait_style_for(mean);  // (a trial call: timed, wait_choice.hpp)
  const double started = wait.trial_class >= 0 ? MPI_Wtime() : 0.0;
  HierContext::NodePlan& plan = node_plan(h, a, total);
  if (t.nnodes > 1) {  // across nodes: the planner's schedule on the round engine
    ++h.staged_calls;
    run_node_schedule(ctx, a, plan, buffers, layout, pieces);
    record_wait_trial(h, wait, MPI_Wtime() - started);
    return;
  }
  // One node: the same schedule, with the copies that suit the blocks (node_copies.hpp):
  // in the flag lines when every block fits one, else staged through the segment; or,
  // where the kernel's copy beats staging, the single-copy schedule (expose, read,
  // release).
  NodeCopies copies = NodeCopies::staged;
  if (!plan.flags_with_copies) {  // flags of their own: staged
    ++h.staged_calls;
  } else if (largest <= InlineBlock::capacity) {
    ++h.inline_calls;
    copies = NodeCopies::flag_lines;
  } else if (!picked && pieces == nullptr && (large = choose_large_copies(h, mean)).way == 1) {
    copies = NodeCopies::single_copy;  // copy_choice.hpp: measured, or AGX_CMA_MIN_BYTES
    ++h.single_copy_calls;
  } else {
    ++h.staged_calls;  // (a pick by direct write that left the call here is staged)
  }
  const double t0 = picked ? entered : large.trial_class >= 0 ? MPI_Wtime() : started;
  run_node_schedule(ctx, a, copies == NodeCopies::single_copy ? single_copy_plan(h) : plan, buffers,
                    layout, pieces, copies);
  if (large.trial_class >= 0 || wait.trial_class >= 0) {
    const double t1 = MPI_Wtime();
    record_trial(h, large, t1 - t0);
    record_wait_trial(h, wait, t1 - started);
  }
}

// One size class's trials for agx-info (describe): " <size> B <way taken or in trial>
// (<best of way 0> / <best of way 1> us here)".
void print_trials(std::ostream& os, const std::string& size, const TimedTrials& t,
                  const char* way0, const char* way1) {
  os << " " << size << " B " << (t.decided == 1 ? way1 : t.decided == 0 ? way0 : "in trial");
  if (t.ended > 0)
    os << " (" << std::fixed << std::setprecision(1) << t.best[0] * 1e6 << " / "
       << t.best[1] * 1e6 << std::defaultfloat << " us here)";
  if (t.retrials > 0) os << " [timed again " << t.retrials << "x]";
}

}  // namespace

HierContext& hier_context(CommContext& ctx) {
  // The only kind of node state there is (api/context.cpp makes it with the context).
  auto* h = static_cast<HierContext*>(ctx.node_state());
  if (h == nullptr) throw Error(MPI_ERR_INTERN, "agx: the communicator has no node state");
  return *h;
}

NodeStageParams stage_params(const HierContext& h) {
  NodeStageParams stage;
  stage.leaders = h.leaders;
  stage.inter = settings().inter;
  // One node: shared_memory priced as the faster of staged and single copy where AGX_CMA
  // allows it (nonblocking and persistent calls, which always stage, are priced without:
  // Selector::choose's `engine`). Approximate on a node whose probe at its first node
  // call finds single copy unavailable, and for device calls, whose node paths stage
  // (docs/algorithms.md, "Flags").
  stage.single_copy = settings().cma && h.topo.nnodes == 1;
  return stage;
}

void run(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
         bool checked) {
  const Config& c = config();
  if (!checked || (!c.integrity && !c.flip)) {  // (no end-to-end check: the usual call)
    run_path(ctx, a, buffers, layout);
    return;
  }
  const Checks checks = Checks::of(a);
  if (!EndToEnd::needed(checks, ctx.rank())) {
    run_path(ctx, a, buffers, layout);
    return;
  }
  EndToEnd check(ctx.comm(), ctx.rank(), buffers, layout, checks);  // the owner's CRC
  std::exception_ptr disagreement;
  HierContext& h = hier_context(ctx);
  h.rounds_done_with_error = false;
  try {
    run_path(ctx, a, buffers, layout);
  } catch (const Error&) {
    // Disagreeing counts found by the engine after every round: the check still runs (no
    // rank waits for this one's checksums), and its own failure, if any, comes first.
    // Any other error (also one before the rounds) is thrown at once.
    if (!h.rounds_done_with_error) throw;
    disagreement = std::current_exception();
  }
  check.after();
  if (disagreement) std::rethrow_exception(disagreement);
}

void run_pieces(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout,
                const BlockPieces& pieces) {
  if (!buffers.in_place)
    throw Error(MPI_ERR_INTERN, "agx: a node call of block pieces must run in place");
  run_path(ctx, a, buffers, layout, &pieces);
}

std::string describe(CommContext& ctx) {
  HierContext& h = hier_context(ctx);
  h.node_comm();
  if (h.topo.bindings.empty()) h.topo.bindings = node_bindings(h.topo);
  const Topology& t = h.topo;
  const Settings& s = settings();
  std::ostringstream os;
  const Machine& m = t.machine;
  os << "rank " << t.rank << " of " << t.size << ": node " << t.node << " of " << t.nnodes
     << " (local " << t.local << " of " << t.local_size() << ")\n";
  os << "  real nodes " << t.real_nodes << ", virtual nodes "
     << (t.virtual_setting.empty() ? "off" : t.virtual_setting) << "\n";
  os << "  nodes:";
  for (int j = 0; j < t.nnodes; ++j) {
    os << " [";
    for (std::size_t i = 0; i < t.members[static_cast<std::size_t>(j)].size(); ++i)
      os << (i ? " " : "") << t.members[static_cast<std::size_t>(j)][i];
    os << "]";
  }
  os << "\n  machine: " << m.packages << " package(s), " << m.numa_nodes << " NUMA domain(s), "
     << m.cores << " core(s), " << m.pus << " PU(s), " << m.l3_caches << " L3, " << m.l2_caches
     << " L2\n";
  for (int i = 0; i < t.local_size(); ++i) {
    const Binding& b = t.bindings[static_cast<std::size_t>(i)];
    os << "  local " << i << " = rank " << t.members[static_cast<std::size_t>(t.node)][static_cast<std::size_t>(i)]
       << ": pid " << b.pid << ", bound to PUs " << (b.cpuset[0] ? b.cpuset : "?") << " ("
       << b.bound_cores << " core(s), first core " << b.first_core << ", NUMA " << b.numa
       << ", package " << b.package << "), last ran on PU " << b.last_cpu << "\n";
  }
  os << "  waits: "
     << (!h.oversubscribed ? "spin, then yield"
         : h.sleep_forced  ? "spin, then sleep on a futex"
                           : "spin, then yield or sleep on a futex as the first calls of each size timed it")
     << (s.wait == Settings::Wait::automatic ? " (AGX_WAIT=auto: node " : " (AGX_WAIT: node ")
     << (h.oversubscribed == (s.wait != Settings::Wait::yield) && s.wait == Settings::Wait::automatic
             ? (h.oversubscribed ? "oversubscribed" : "has a core per rank")
             : "setting")
     << ")";
  if (h.oversubscribed && !h.sleep_forced) {
    os << ":";
    bool any = false;
    for (int c = 0; c < wait_classes; ++c) {
      const TimedTrials& w = h.wait_trials[static_cast<std::size_t>(c)];
      if (w.calls == 0) continue;
      any = true;
      print_trials(os, c == 0 ? std::string("< 1024") : std::to_string(std::size_t{512} << c), w,
                   "yield", "sleep");
    }
    if (!any) os << " none yet";
  }
  os << "\n";
  {  // core/algorithm_trials.hpp
    const AlgorithmTrials& at = ctx.algorithm_trials();
    os << "  auto against its rival (blocking calls from " << AlgorithmTrials::min_bytes << " B mean block):";
    bool any = false;
    for (int c = 0; c < AlgorithmTrials::classes; ++c) {
      const AlgorithmTrials::Class& t = at.at(c);
      if (t.calls == 0) continue;
      any = true;
      os << " " << (AlgorithmTrials::min_bytes << c) << " B "
         << (t.decided == 1 ? "rival" : t.decided == 0 ? "model's choice" : "in trial");
      if (t.decided >= 0)
        os << " (" << std::fixed << std::setprecision(1) << t.slowest[0] * 1e6 << " / " << t.slowest[1] * 1e6
           << std::defaultfloat << " us here)";
      if (t.retrials > 0) os << " [timed again " << t.retrials << "x]";
    }
    os << (any ? "" : " none yet") << "\n";
  }
  os << "  leaders per node " << h.leaders << ", single copy (process_vm_readv) "
     << (!h.node_ready() ? "not probed yet (at the first shared-memory call)"
         : h.cma         ? "available"
                         : "unavailable")
     << (s.cma ? "" : " (AGX_CMA=0)");
  if (h.cma) {
    os << ", " << std::fixed << std::setprecision(2) << h.cma_speed << std::defaultfloat
       << "x memcpy's speed at setup";
    if (s.cma_min_bytes) {
      os << ": used from " << *s.cma_min_bytes << " B mean block (AGX_CMA_MIN_BYTES)";
    } else {
      os << "; against staging by timing the first calls of each size from "
         << trial_min_bytes << " B:";
      bool any = false;
      for (int c = 0; c < copy_classes; ++c) {
        const CopyTrials& t = h.copy_trials[static_cast<std::size_t>(c)];
        if (t.calls == 0) continue;
        any = true;
        print_trials(os, std::to_string(trial_min_bytes << c), t, "staged", "single copy");
      }
      if (!any) os << " none yet";
    }
  }
  os << "\n";
  os << "  segment: header " << t.local_size() << " x " << sizeof(Slot) << " B, data "
     << h.data_bytes() << " B (grown " << h.grows() << "x), generation " << h.gen()
     << ", inline calls " << h.inline_calls << ", staged calls " << h.staged_calls << ", single-copy calls " << h.single_copy_calls
     << ", chunk " << h.chunk_bytes() << " B"
     << ", finished calls ahead of the ready/done watermarks " << h.ready_ahead() << "/" << h.done_ahead()
     << (h.chunk_bytes() != s.chunk_bytes ? " (whole blocks: oversubscribed)" : "") << "\n";
  return os.str();
}

}  // namespace agx::hier
