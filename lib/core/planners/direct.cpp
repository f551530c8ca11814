// direct (linear): every rank sends its own block straight to every other rank.
//
// Rounds: 1 (N-1 sends and N-1 receives posted at once).
// Bytes sent per rank: (N-1)·M.   Messages per rank: N-1 (latency ~ α·(N-1) in practice,
// since they leave one after another).
// Restrictions: none; meant for small N, where one round of N-1 messages beats log N rounds.
// Peers are visited in the order r+1, r+2, ... so that no rank is hit by all at once.
//
//   4 ranks, one round:   r0 -> r1 r2 r3    r1 -> r2 r3 r0    r2 -> r3 r0 r1    r3 -> r0 r1 r2

#include "core/planner.hpp"

namespace agx {
namespace {

class DirectPlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::direct; }
 protected:
  Schedule plan_rounds(const Problem& p) const override {
    Schedule s{p.nranks, p.rank, {}};
    if (p.nranks == 1) return s;
    Round round;
    for (int i = 1; i < p.nranks; ++i) {
      const int to = (p.rank + i) % p.nranks;
      const int from = (p.rank - i + p.nranks) % p.nranks;
      add_send(round, to, {{p.rank, 1}});
      add_recv(round, from, {{from, 1}});
    }
    s.rounds.push_back(std::move(round));
    return s;
  }
};

}  // namespace

const Planner& direct_planner() {
  static const DirectPlanner p;
  return p;
}

}  // namespace agx
