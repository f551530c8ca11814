// Locality-aware Bruck (after Bienz et al., arXiv 2206.03564, MPI Advance's bruck_loc):
// ranks in groups of k consecutive ranks (a node, or a dragonfly group: k = ranks per
// group), G = N/k groups. Most rounds stay inside a group; between groups each rank
// sends one message per step, and the k ranks of a group together make one step of a
// radix-(k+1) Bruck over the groups:
//
//   round 0          inside the group: every rank sends its block to the k-1 others
//                    (now each rank holds its group's k blocks)
//   per step s, with D groups held (D = 1, then (k+1)·D, ...), while D < G:
//     network round  local rank i (j = i+1, while j·D < G) sends the blocks of groups
//                    [g, g+c) (g its own group, c = min(D, G - j·D)) to local rank i of
//                    group g - j·D, and receives groups [g + j·D, g + j·D + c) from local
//                    rank i of group g + j·D
//     group round    every rank sends what it received to the k-1 others of its group
//                    (each rank now holds groups [g, g + min((k+1)·D, G)))
//
// Rounds: 1 + 2·ceil(log_{k+1} G). Bytes sent per rank: (N-1)·M inside and between
// groups together; between groups, each rank sends at most one message per step (of up
// to D·k blocks), about (N-k)·M/k per rank in all: the group's bytes leave it once.
// Blocks are addressed by index (group runs that wrap past N-1 are two spans).
// Parameter: k >= 2, the group size (Problem::radix; 0 means 8). When k does not divide N
// (or k >= N) there are no equal groups to exploit: the schedule is then Bruck's (k = 2),
// or for k >= N one group round (direct's traffic).
//
//   8 ranks, k = 4 (groups {0..3}, {4..7}): round 0: rank 0 sends {0} to 1, 2, 3 and
//   receives {1}, {2}, {3}; round 1 (D = 1): rank 0 (i = 0, j = 1) sends {0..3} to rank 4
//   and receives {4..7} from rank 4 (ranks 1..3: j·D = 2..4 >= G = 2, nothing); round 2:
//   rank 0 sends {4..7} to 1, 2, 3 (they received nothing: rank 0 receives nothing).

#include "core/planner.hpp"

#include <algorithm>

namespace agx {
namespace {

// Groups [first, first + count) (mod G) as block spans: group j is ranks [j·k, j·k + k).
std::vector<BlockSpan> group_blocks(int first, int count, int k, int groups) {
  std::vector<BlockSpan> spans;
  append_wrapped(spans, ((first % groups) + groups) % groups * k, count * k, groups * k);
  return spans;
}

class LocalityBruckPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::locality_bruck; }
 protected:
  Schedule plan_rounds(const Problem& p) const override {
    const int n = p.nranks, r = p.rank;
    const int k = std::min(p.radix == 0 ? 8 : p.radix, std::max(n, 1));
    if (n % k != 0) return planner_for(Algorithm::bruck).plan({n, r, 2});
    const int groups = n / k, g = r / k, i = r % k, base = g * k;
    Schedule s{n, r, {}};
    if (n == 1) return s;
    // Round 0: the own block to every other rank of the group.
    Round local;
    for (int l = 0; l < k; ++l) {
      if (l == i) continue;
      add_send(local, base + l, {{r, 1}});
      add_recv(local, base + l, {{base + l, 1}});
    }
    s.rounds.push_back(std::move(local));
    for (long long held = 1; held < groups; held *= k + 1) {
      const int d = static_cast<int>(held);
      // What local rank l receives in this step: groups [g + (l+1)·d, ... + c_l).
      const auto chunk = [&](int l) {
        const long long jd = static_cast<long long>(l + 1) * d;
        return jd < groups ? static_cast<int>(std::min<long long>(d, groups - jd)) : 0;
      };
      Round between;
      if (const int c = chunk(i); c > 0) {
        const int jd = (i + 1) * d;
        add_send(between, ((g - jd) % groups + groups) % groups * k + i, group_blocks(g, c, k, groups));
        add_recv(between, (g + jd) % groups * k + i, group_blocks(g + jd, c, k, groups));
      }
      s.rounds.push_back(std::move(between));
      Round share;  // what each rank received, to the others of its group
      for (int l = 0; l < k; ++l) {
        if (l == i) continue;
        if (const int c = chunk(i); c > 0) add_send(share, base + l, group_blocks(g + (i + 1) * d, c, k, groups));
        if (const int c = chunk(l); c > 0) add_recv(share, base + l, group_blocks(g + (l + 1) * d, c, k, groups));
      }
      s.rounds.push_back(std::move(share));
    }
    return s;
  }
};

}  // namespace

const Planner& locality_bruck_planner() {
  static const LocalityBruckPlanner p;
  return p;
}

}  // namespace agx
