#pragma once
// The round engine's blocking lane for schedules without messages (docs/algorithms.md,
// "One engine"): a node schedule on one node, run to completion on the calling thread.
// It runs a rank's schedule exactly as the polled lane (Execution::start + test,
// executor.hpp) does: per round, its puts, writes and exposes (each raising its flag
// where its round signals it), its copies (unless the segment made the own block's
// copy with its write: NodeSegment::took_own_copy), then each get and read, each release and each
// wait that no get or read covers, then the signals that no put makes; after the last
// round finish(), then finished(). The difference is only
// in how it waits: for one operation at a time, through `pause`, instead of polling the
// whole round through test(). A round's gets and waits wait only for other ranks'
// earlier rounds (the validator's rule), so taking them one at a time cannot deadlock.
//
// Why a lane of its own: at a few bytes per rank a call costs about as much as its own
// instructions (every one of them is on the path between two ranks' flags), and the
// polled lane's per-call state (rebinding, per-round cursors, test()'s dispatch) cost as
// much as the exchange (docs/hierarchy.md, "Small calls on one node"). Here the node
// segment's type is a template parameter (lib/hier's NodeSegments are final classes),
// so its operations are direct calls, and nothing is kept between calls.
//
// `pause(ready)` returns once ready() holds (lib/hier: spin, then yield or sleep as the
// node's wait style says, other pending calls advanced meanwhile). Most of its looks load
// only the flag word the operation's last try awaited; every 64th look, or once that word
// moved, the operation is tried again (which also finds an owner that took another path:
// its word never moves).
//
// Returns whether the gets found a disagreement on the counts (NodeSegment::
// disagreement() has the first: every round was still run); throws any other error.

#include <agx/bytes.hpp>

#include "core/copy.hpp"
#include "core/node_segment.hpp"
#include "core/schedule.hpp"

#include <atomic>

namespace agx {

namespace detail {

template <class Segment, class Pause, class Attempt>
void await_operation(Segment& node, Pause& pause, Attempt attempt) {
  if (attempt()) return;
  NodeSegment::Awaited awaited = node.awaited();
  int looks = 0;
  pause([&] {
    if (awaited.word != nullptr && ++looks < 64 &&
        awaited.word->load(std::memory_order_acquire) == awaited.seen)
      return false;
    looks = 0;
    if (attempt()) return true;
    awaited = node.awaited();
    return false;
  });
}

}  // namespace detail

/// Runs the message-free schedule `s` on `node` (see above). `flags_with_copies`: every
/// signal and wait of `s` goes with a put or get of its round (flags_with_copies(s),
/// known once per schedule), so no operation is looked up for its partner per call.
template <class Segment, class Pause>
bool run_local_rounds(const Schedule& s, bool flags_with_copies, Segment& node,
                      const Buffers& buffers, const Layout& layout, Pause&& pause) {
  using K = NodeOp::Kind;
  for (const Round& round : s.rounds) {
    for (const NodeOp& op : round.node) {
      if (op.kind == K::put) node.put(op, buffers, layout, flags_with_copies || paired(round, op));
      else if (op.kind == K::write) node.write(op, buffers, layout, flags_with_copies || paired(round, op));
      else if (op.kind == K::expose) node.expose(op, buffers, layout, flags_with_copies || paired(round, op));
    }
    if (!node.took_own_copy()) make_copies(round, buffers, layout);
    for (const NodeOp& op : round.node) {
      if (op.kind == K::get || op.kind == K::read) {
        GetCursor cursor;
        detail::await_operation(node, pause, [&] {
          return op.kind == K::get ? node.try_get(op, cursor, buffers, layout)
                                   : node.try_read(op, cursor, buffers, layout);
        });
      } else if (op.kind == K::release) {
        detail::await_operation(node, pause, [&] { return node.try_release(op); });
      } else if (op.kind == K::wait && !flags_with_copies && !paired(round, op)) {
        detail::await_operation(node, pause, [&] { return node.try_wait(op); });
      }
    }
    if (!flags_with_copies)
      for (const NodeOp& op : round.node)
        if (op.kind == K::signal && !paired(round, op)) node.signal(op);
  }
  node.finish();
  detail::await_operation(node, pause, [&] { return node.finished(); });
  return node.disagreed();
}

}  // namespace agx
