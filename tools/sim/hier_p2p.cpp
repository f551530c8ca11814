// HierP2PPlanner: gather to the node leader, leaders exchange node aggregates with an
// existing planner's schedule, binomial broadcast inside the node (see hier_p2p.hpp).

#include "hier_p2p.hpp"

#include <algorithm>

namespace agx::sim {
namespace {

// Blocks of inner (node-level) spans as rank-level spans: node run [f, f+c) is ranks
// [f·ppn, min((f+c)·ppn, n)).
std::vector<BlockSpan> widen(const std::vector<BlockSpan>& node_spans, int ppn, int n) {
  std::vector<BlockSpan> out;
  for (const BlockSpan& s : node_spans) {
    const int first = s.first * ppn, last = std::min((s.first + s.count) * ppn, n);
    if (last > first) out.push_back({first, last - first});
  }
  return out;
}

// Every block except `b`, as at most two spans.
std::vector<BlockSpan> all_but(int b, int n) {
  std::vector<BlockSpan> spans;
  if (b > 0) spans.push_back({0, b});
  if (b + 1 < n) spans.push_back({b + 1, n - b - 1});
  return spans;
}

}  // namespace

Schedule HierP2PPlanner::plan(const Problem& p) const {
  const int n = p.nranks, r = p.rank, ppn = std::max(1, std::min(ppn_, n));
  const int nodes = (n + ppn - 1) / ppn, node = r / ppn, local = r % ppn;
  const int leader = node * ppn, size = std::min(ppn, n - leader);
  Schedule s{n, r, {}};
  if (n == 1) return s;
  if (size > 1) {  // gather to the leader
    Round gather;
    if (local > 0) add_send(gather, leader, {{r, 1}});
    else
      for (int l = 1; l < size; ++l) add_recv(gather, leader + l, {{leader + l, 1}});
    s.rounds.push_back(std::move(gather));
  }
  // Leaders: the inner schedule of this node among `nodes`; everyone: as many rounds.
  // (agx's planners give every rank the same number of rounds; node 0's is the count.)
  const Schedule mine = inner_.plan({nodes, node});
  const std::size_t inner_rounds =
      std::max(mine.rounds.size(), inner_.plan({nodes, 0}).rounds.size());
  for (std::size_t k = 0; k < inner_rounds; ++k) {
    Round round;
    if (local == 0 && k < mine.rounds.size()) {
      for (const Transfer& t : mine.rounds[k].sends) add_send(round, t.peer * ppn, widen(t.blocks, ppn, n));
      for (const Transfer& t : mine.rounds[k].recvs) add_recv(round, t.peer * ppn, widen(t.blocks, ppn, n));
    }
    s.rounds.push_back(std::move(round));
  }
  // Binomial broadcast from local 0: in round k, locals l < 2^k send to l + 2^k.
  for (int dist = 1; dist < size; dist *= 2) {
    Round round;
    if (local < dist && local + dist < size) add_send(round, r + dist, all_but(r + dist, n));
    if (local >= dist && local < 2 * dist) add_recv(round, r - dist, all_but(r, n));
    s.rounds.push_back(std::move(round));
  }
  return s;
}

}  // namespace agx::sim
