// The fair baselines (baselines.hpp): Open MPI 4.1's and MPICH's default rules as tables,
// and HAN's composition as one schedule.

#include "baselines.hpp"

#include <algorithm>
#include <vector>

namespace agx::sim {
namespace {

constexpr Algorithm rd = Algorithm::recursive_doubling, bruck = Algorithm::bruck,
                    ne = Algorithm::neighbor_exchange, ring = Algorithm::ring;

// Open MPI 4.1, coll/tuned's fixed decision for MPI_Allgather, as a table: for
// communicators of fewer than `below` ranks (the first band that holds N), the first
// rule whose per-rank byte bound exceeds the size wins, else `otherwise`.
struct Rule {
  std::size_t below_bytes;
  Algorithm algorithm;
};
struct Band {
  int below_ranks;
  std::vector<Rule> rules;
  Algorithm otherwise;
};
const std::vector<Band>& ompi41_bands() {
  static const std::vector<Band> bands = {
      {32, {}, rd},
      {64, {{1024, rd}, {65536, ne}}, ring},
      {128, {{512, rd}, {65536, ne}}, ring},
      {256, {{512, rd}, {131072, ne}, {524288, ring}, {1048576, ne}}, ring},
      {512, {{32, rd}, {128, bruck}, {1024, rd}, {131072, ne}, {524288, ring}, {1048576, ne}}, ring},
      {1024, {{64, rd}, {256, bruck}, {2048, rd}}, ne},
      {2048, {{4, rd}, {8, bruck}, {16, rd}, {32, bruck}, {256, rd}, {512, bruck}, {4096, rd}}, ne},
      {4096, {{32, bruck}, {128, rd}, {512, bruck}, {4096, rd}}, ne},
      {0, {{2, rd}, {8, bruck}, {16, rd}, {512, bruck}, {4096, rd}}, ne},  // 4096 and more
  };
  return bands;
}

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

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

Schedule HanPlanner::plan_rounds(const Problem& p) const {
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
  const Planner& inner = planner_for(inter_.id);
  const Schedule mine = inner.plan({nodes, node, inter_.radix});
  const std::size_t inner_rounds =
      std::max(mine.rounds.size(), inner.plan({nodes, 0, inter_.radix}).rounds.size());
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

AlgorithmChoice ompi41_rule(int n, std::size_t bytes) {
  if (n <= 1) return {Algorithm::direct, 0};
  if (n == 2) return {Algorithm::direct, 0};  // two_proc: one exchange
  Algorithm a = ring;
  for (const Band& band : ompi41_bands()) {
    if (band.below_ranks != 0 && n >= band.below_ranks) continue;
    a = band.otherwise;
    for (const Rule& r : band.rules)
      if (bytes < r.below_bytes) {
        a = r.algorithm;
        break;
      }
    break;
  }
  if (a == rd && !power_of_two(n)) a = bruck;  // Open MPI's fallbacks
  if (a == ne && n % 2 != 0) a = ring;
  return {a, a == bruck ? 2 : 0};
}

AlgorithmChoice mpich_rule(int n, std::size_t bytes) {
  const std::size_t total = bytes * static_cast<std::size_t>(n);
  if (total < 524288 && power_of_two(n)) return {rd, 0};
  if (total < 81920) return {bruck, 2};
  return {ring, 0};
}

HanPlanner han_planner(int n, int ppn, std::size_t bytes) {
  const int nodes = (n + ppn - 1) / ppn;
  return HanPlanner(ppn, ompi41_rule(nodes, bytes * static_cast<std::size_t>(ppn)));
}

}  // namespace agx::sim
