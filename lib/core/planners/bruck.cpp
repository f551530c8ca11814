// Bruck, radix k (default 2): in round i, with d = k^i, every rank r sends the blocks it
// holds to the k-1 ranks r - j·d and receives as many from r + j·d (j = 1 .. k-1, while
// j·d < N); after round i rank r holds blocks r, r+1, ..., r+k^(i+1)-1 (mod N).
//
// Rounds: ceil(log_k N) for any N.   Bytes sent per rank: (N-1)·M.
// Messages per rank: up to (k-1)·ceil(log_k N): in round i, one per j with j·d < N, the
// message to r - j·d carrying min(d, N - j·d) blocks (the last round is partial).
// Larger k: fewer rounds, more messages in flight per round; k >= N is one round of N-1
// messages (direct's traffic). k = 2 is the classic Bruck: one message per round.
// Blocks are addressed by index in the receive buffer (a run that wraps past N-1 is two
// spans), so the classic final rotation copy is not needed: nothing is stored out of place.
// Restrictions: none. Parameter: k >= 2 (Problem::radix; 0 means 2).
//
//   4 ranks, k = 2:  round 0 (d 1): r sends {r} to r-1, receives {r+1} from r+1
//                    round 1 (d 2): r sends {r, r+1} to r-2, receives {r+2, r+3} from r+2
//   4 ranks, k = 4:  round 0 (d 1): r sends {r} to r-1, r-2, r-3,
//                                   receives {r+1}, {r+2}, {r+3} from r+1, r+2, r+3
//   5 ranks, k = 3:  round 0 (d 1): r0 sends {0} to r4, r3; receives {1}, {2} from r1, r2
//                    round 1 (d 3): r0 sends {0, 1} to r2; receives {3, 4} from r3

#include "core/planner.hpp"

#include <algorithm>

namespace agx {
namespace {

class BruckPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::bruck; }

 protected:
  Schedule plan_rounds(const Problem& p) const override {
    const int n = p.nranks, r = p.rank;
    // k beyond N adds nothing (every peer is already reached in round 0).
    const long long k = std::min<long long>(p.radix == 0 ? 2 : p.radix, std::max(n, 2));
    Schedule s{n, r, {}};
    for (long long dist = 1; dist < n; dist *= k) {
      Round round;
      for (long long j = 1; j < k && j * dist < n; ++j) {
        const int d = static_cast<int>(j * dist);
        const int count = static_cast<int>(std::min<long long>(dist, n - d));
        std::vector<BlockSpan> send, recv;
        append_wrapped(send, r, count, n);
        append_wrapped(recv, r + d, count, n);
        add_send(round, (r - d + n) % n, std::move(send));
        add_recv(round, (r + d) % n, std::move(recv));
      }
      s.rounds.push_back(std::move(round));
    }
    return s;
  }
};

}  // namespace

const Planner& bruck_planner() {
  static const BruckPlanner p;
  return p;
}

}  // namespace agx
