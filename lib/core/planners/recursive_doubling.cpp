// recursive doubling: in round k, rank r swaps everything it holds with r XOR 2^k.
//
// Rounds: log2 N (N a power of two).   Bytes sent per rank: (N-1)·M.   Messages: log2 N.
// After round k a rank holds the 2^(k+1) blocks of its aligned group, always one
// contiguous span of block indices.
//
// Any N (folding): p = largest power of two <= N, e = N - p. Round 0: extra rank p+i
// (i < e) sends its block to rank i. The p ranks run recursive doubling, rank i
// carrying blocks {i, p+i}. Last round: rank i sends all but block p+i to rank p+i.
// Non-power-of-two N costs log2 p + 2 rounds and (N-1)·M more bytes on the last hop.
//
//   4 ranks:  round 0: r0<->r1, r2<->r3 (one block each)
//             round 1: r0<->r2, r1<->r3 (two blocks each: {0,1} <-> {2,3})

#include "core/planner.hpp"
#include "core/planners/folding.hpp"

namespace agx {
namespace {

class RecursiveDoublingPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::recursive_doubling; }

 protected:
  Schedule plan_rounds(const Problem& pr) const override {
    const int n = pr.nranks, r = pr.rank;
    Schedule s{n, r, {}};
    if (n == 1) return s;
    const int p = folding::power_of_two_floor(n), extra = n - p;
    // Group [a, a+c) of the p ranks -> real blocks: the group plus its hosted extras.
    auto real = [&](int a, int c) {
      std::vector<BlockSpan> spans{{a, c}};
      if (a < extra) spans.push_back({p + a, std::min(a + c, extra) - a});
      return spans;
    };
    folding::add_fold_in(s, p);
    for (int dist = 1; dist < p; dist *= 2) {
      Round round;
      if (r < p) {
        const int partner = r ^ dist;
        add_send(round, partner, real(r & ~(dist - 1), dist));
        add_recv(round, partner, real(partner & ~(dist - 1), dist));
      }
      s.rounds.push_back(std::move(round));
    }
    folding::add_fold_out(s, p);
    return s;
  }

};

}  // namespace

const Planner& recursive_doubling_planner() {
  static const RecursiveDoublingPlanner p;
  return p;
}

}  // namespace agx
