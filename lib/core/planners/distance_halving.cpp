// distance_halving: recursive doubling with the distances in reverse order (the idea of
// Sparbit, Loch & Koslovski 2021): round k swaps with r XOR p/2^(k+1), so the first rounds
// cross the largest distances carrying the fewest blocks and the last round, with half of
// all blocks, goes to the nearest rank. With ranks placed node by node (the usual block
// placement) the heavy rounds stay inside a node: a rank sends only about p/ppn·M bytes
// over the network instead of (N-ppn)·M with recursive doubling or Bruck.
//
// Rounds: log2 N (N a power of two); log2 p + 2 otherwise.  Bytes sent per rank: (N-1)·M
// (+ (N-1)·M on the last hop for folded N).  Messages: log2 N (+2).
// After the round of distance d, rank r holds every block i < p with i ≡ r (mod d): the
// blocks of a message are strided (one span each, several memory pieces per message).
// Any N (folding, as recursive_doubling): p = largest power of two <= N; extra rank p+i
// hands its block to rank i first, rank i carries it, and returns all blocks at the end.
// Restrictions: none.
//
//   4 ranks:  round 0 (dist 2): r0<->r2 {0}<->{2}, r1<->r3 {1}<->{3}
//             round 1 (dist 1): r0<->r1 {0,2}<->{1,3}, r2<->r3 {0,2}<->{1,3}

#include "core/planner.hpp"
#include "core/planners/folding.hpp"

namespace agx {
namespace {

class DistanceHalvingPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::distance_halving; }

 protected:
  Schedule plan_rounds(const Problem& pr) const override {
    const int n = pr.nranks, r = pr.rank;
    Schedule s{n, r, {}};
    if (n == 1) return s;
    const int p = folding::power_of_two_floor(n), extra = n - p;
    folding::add_fold_in(s, p);
    for (int dist = p / 2; dist >= 1; dist /= 2) {
      Round round;
      if (r < p) {
        const int partner = r ^ dist;
        add_send(round, partner, held(r, 2 * dist, p, extra));
        add_recv(round, partner, held(partner, 2 * dist, p, extra));
      }
      s.rounds.push_back(std::move(round));
    }
    folding::add_fold_out(s, p);
    return s;
  }

 private:
  // Blocks i < p with i ≡ r (mod stride), then the folded blocks p+i they host; runs of
  // consecutive blocks (stride 1) become one span.
  static std::vector<BlockSpan> held(int r, int stride, int p, int extra) {
    std::vector<BlockSpan> spans;
    auto push = [&](int b) {
      if (!spans.empty() && spans.back().first + spans.back().count == b) ++spans.back().count;
      else spans.push_back({b, 1});
    };
    for (int i = r % stride; i < p; i += stride) push(i);
    for (int i = r % stride; i < extra; i += stride) push(p + i);
    return spans;
  }

};

}  // namespace

const Planner& distance_halving_planner() {
  static const DistanceHalvingPlanner p;
  return p;
}

}  // namespace agx
