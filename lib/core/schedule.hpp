#pragma once
// A schedule: what one rank does, round by round, in terms of block indices.
// Algorithms produce schedules (plan); executors, the validator and the cost model
// consume them. No MPI here.

#include <string>
#include <vector>

namespace agx {

/// Blocks [first, first + count) — never wraps; a wrapping run is two spans.
struct BlockSpan {
  int first = 0;
  int count = 0;
  bool operator==(const BlockSpan&) const = default;
};

/// One message: to or from `peer`, carrying `blocks` in this order.
struct Transfer {
  int peer = 0;
  std::vector<BlockSpan> blocks;
};

/// Everything in a round is posted at once and completes together. Sends may only
/// carry blocks the rank held before the round; receives deliver at its end.
struct Round {
  std::vector<Transfer> sends;
  std::vector<Transfer> recvs;
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
void add_send(Round& round, int peer, std::vector<BlockSpan> blocks);
void add_recv(Round& round, int peer, std::vector<BlockSpan> blocks);

/// Total number of blocks in a list of spans.
int block_count(const std::vector<BlockSpan>& spans);

/// Human-readable dump, one line per round (for tests and agx-info).
std::string describe(const Schedule& s);

}  // namespace agx
