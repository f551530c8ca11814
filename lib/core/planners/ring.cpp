// ring: each round every rank passes the block it received last to its right neighbour.
//
// Rounds: N-1.   Bytes sent per rank: (N-1)·M (bandwidth-optimal).   Messages: N-1.
// Restrictions: none. Latency grows linearly with N, so it suits large blocks.
// Round k: send block (r-k) mod N to r+1, receive block (r-k-1) mod N from r-1.
//
//   4 ranks (block held -> sent):   round 0: r0 sends 0, r1 sends 1, r2 sends 2, r3 sends 3
//                                   round 1: r0 sends 3, r1 sends 0, r2 sends 1, r3 sends 2
//        r0 -> r1 -> r2 -> r3       round 2: r0 sends 2, r1 sends 3, r2 sends 0, r3 sends 1
//        ^__________________|

#include "core/planner.hpp"

namespace agx {
namespace {

class RingPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::ring; }
 protected:
  Schedule plan_rounds(const Problem& p) const override {
    const int n = p.nranks, r = p.rank;
    Schedule s{n, r, {}};
    const int right = (r + 1) % n, left = (r - 1 + n) % n;
    for (int k = 0; k + 1 < n; ++k) {
      Round round;
      add_send(round, right, {{(r - k + n) % n, 1}});
      add_recv(round, left, {{(r - k - 1 + 2 * n) % n, 1}});
      s.rounds.push_back(std::move(round));
    }
    return s;
  }
};

}  // namespace

const Planner& ring_planner() {
  static const RingPlanner p;
  return p;
}

}  // namespace agx
