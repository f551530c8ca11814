// Bruck: in round k every rank sends the blocks it holds to r - 2^k and receives as
// many from r + 2^k; after round k rank r holds blocks r, r+1, ..., r+2^(k+1)-1 (mod N).
//
// Rounds: ceil(log2 N) for any N.   Bytes sent per rank: (N-1)·M.   Messages: ceil(log2 N).
// Round k sends min(2^k, N-2^k) blocks. Blocks are addressed by index in the receive
// buffer (a run that wraps past N-1 is two spans), so the classic final rotation copy is
// not needed: nothing is ever stored out of place.
// Restrictions: none.
//
//   4 ranks:  round 0 (dist 1): r sends {r} to r-1, receives {r+1} from r+1
//             round 1 (dist 2): r sends {r, r+1} to r-2, receives {r+2, r+3} from r+2

#include "core/planner.hpp"

#include <algorithm>

namespace agx {
namespace {

class BruckPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::bruck; }

  Schedule plan(const Problem& p) const override {
    const int n = p.nranks, r = p.rank;
    Schedule s{n, r, {}};
    for (int dist = 1; dist < n; dist *= 2) {
      const int count = std::min(dist, n - dist);
      Round round;
      std::vector<BlockSpan> send, recv;
      append_wrapped(send, r, count, n);
      append_wrapped(recv, r + dist, count, n);
      add_send(round, (r - dist + n) % n, std::move(send));
      add_recv(round, (r + dist) % n, std::move(recv));
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
