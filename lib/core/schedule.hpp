#pragma once
// A schedule: what one rank does, round by round, in terms of block indices.
// Algorithms produce schedules (plan); executors, the validator and the cost model
// consume them. No MPI here.
//
// Three kinds of operation, each on its level (docs/algorithms.md, "Schedules"):
//   network or node   send / recv: a point-to-point message to or from a peer rank
//                     (its level is the peers' placement: same node or not)
//   node              put: copy blocks into the node's shared segment, then raise the
//                     own flag; get: copy blocks out of the segment, once the flags of
//                     the ranks that put or received them say they are there
// A transfer may read from and write to the node's segment instead of the rank's own
// buffer (Place::segment): the leaders of a hierarchical all-gather exchange node
// aggregates in place in the segment.

#include <string>
#include <vector>

namespace agx {

/// Blocks [first, first + count) — never wraps; a wrapping run is two spans.
struct BlockSpan {
  int first = 0;
  int count = 0;
  bool operator==(const BlockSpan&) const = default;
};

/// Where a transfer's blocks live: the rank's receive buffer, or its node's segment.
enum class Place : unsigned char { buffer, segment };

/// One message: to or from `peer`, carrying `blocks` in this order.
struct Transfer {
  int peer = 0;
  std::vector<BlockSpan> blocks;
  Place place = Place::buffer;
};

/// A node-level operation on the node's shared segment (no MPI).
struct NodeOp {
  enum class Kind : unsigned char {
    put,  ///< blocks the rank holds -> the segment (each block is put once per node)
    get,  ///< blocks in the segment since an earlier round -> the rank's buffer
  };
  Kind kind = Kind::put;
  std::vector<BlockSpan> blocks;
};

/// Everything in a round is posted at once and completes together. Sends may only
/// carry blocks the rank (or, from the segment, its node) held before the round;
/// receives and gets deliver at its end; a get reads what was in the segment before
/// the round.
struct Round {
  std::vector<Transfer> sends;
  std::vector<Transfer> recvs;
  std::vector<NodeOp> node;
};

/// The plan of one rank. Before round 0 the rank holds its own block `rank`.
struct Schedule {
  int nranks = 0;
  int rank = 0;
  std::vector<Round> rounds;
};

/// What a planner is asked for.
struct Problem {
  int nranks = 1;
  int rank = 0;
  int radix = 0;  ///< k of radix-k planners (bruck); 0: the planner's default
};

/// Appends blocks [first, first + count) modulo n to `spans` as one or two spans.
void append_wrapped(std::vector<BlockSpan>& spans, int first, int count, int n);

/// Adds a send and/or receive to `round`; zero-block transfers are skipped.
void add_send(Round& round, int peer, std::vector<BlockSpan> blocks, Place place = Place::buffer);
void add_recv(Round& round, int peer, std::vector<BlockSpan> blocks, Place place = Place::buffer);
/// Adds a put or get to `round`; zero-block operations are skipped.
void add_node_op(Round& round, NodeOp::Kind kind, std::vector<BlockSpan> blocks);

/// Whether any round of `s` has node-level operations or segment transfers.
bool uses_segment(const Schedule& s);

/// Total number of blocks in a list of spans.
int block_count(const std::vector<BlockSpan>& spans);

/// Human-readable dump, one line per round (for tests and agx-info).
std::string describe(const Schedule& s);

}  // namespace agx
