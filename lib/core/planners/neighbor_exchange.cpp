// neighbor exchange (Chen et al.): ranks pair up, then pass pairs of blocks to
// alternating neighbours, so data spreads in both directions at once.
//
// Rounds: N/2 for even N.   Bytes sent per rank: (N-1)·M.   Messages: N/2.
// Step 0: r exchanges its own block with its pair partner (r^1), both then hold the
// pair's two blocks. Step i >= 1: even ranks talk to r-1 on odd i and r+1 on even i
// (odd ranks the reverse), sending the two blocks received in step i-1.
//
// Odd N (planned, not swapped): the last rank folds into its left neighbour. Round 0:
// rank N-1 sends its block to N-2. Then N-1 "virtual" ranks run the even-N exchange,
// virtual rank N-2 owning blocks {N-2, N-1}. Last round: rank N-1 receives blocks
// [0, h) from rank 0 and [h, N-1) from rank N-2, h = (N-1)/2.
// Odd N costs (N-1)/2 + 2 rounds, and rank N-1 receives N-1 blocks in the last round.
//
//   4 ranks:   step 0: r0<->r1 (blocks 0,1)   r2<->r3 (blocks 2,3)
//              step 1: r0<->r3 (pairs {0,1}<->{2,3})   r1<->r2 (pairs {0,1}<->{2,3})

#include "core/planner.hpp"

namespace agx {
namespace {

class NeighborExchangePlanner final : public Planner {
 public:
  Algorithm id() const override { return Algorithm::neighbor_exchange; }

 protected:
  Schedule plan_rounds(const Problem& p) const override {
    const int n = p.nranks, r = p.rank;
    Schedule s{n, r, {}};
    if (n == 1) return s;
    const bool odd = n % 2 == 1;
    const int m = odd ? n - 1 : n;  // virtual ranks taking part in the exchange
    if (odd) {
      Round fold_in;
      if (r == n - 1) add_send(fold_in, n - 2, {{n - 1, 1}});
      if (r == n - 2) add_recv(fold_in, n - 1, {{n - 1, 1}});
      s.rounds.push_back(std::move(fold_in));
    }
    // Virtual span [a, a+c) -> real span; the last virtual block also carries block n-1.
    auto real = [&](int a, int c) -> std::vector<BlockSpan> {
      return {{a, c + ((odd && a + c == m) ? 1 : 0)}};
    };
    if (r < m) exchange(s, r, m, real);
    else for (int i = 0; i < m / 2; ++i) s.rounds.emplace_back();  // rank n-1 waits
    if (odd) {
      const int h = (n - 1) / 2;
      Round fold_out;
      if (r == 0) add_send(fold_out, n - 1, {{0, h}});
      if (r == n - 2) add_send(fold_out, n - 1, {{h, n - 1 - h}});
      if (r == n - 1) {
        add_recv(fold_out, 0, {{0, h}});
        add_recv(fold_out, n - 2, {{h, n - 1 - h}});
      }
      s.rounds.push_back(std::move(fold_out));
    }
    return s;
  }

 private:
  template <class Real>
  static void exchange(Schedule& s, int v, int m, Real real) {
    const bool even = v % 2 == 0;
    const int neighbor[2] = {(even ? v + 1 : v - 1 + m) % m, (even ? v - 1 + m : v + 1) % m};
    const int step[2] = {even ? 2 : -2, even ? -2 : 2};
    Round first;
    add_send(first, neighbor[0], real(v, 1));
    add_recv(first, neighbor[0], real(neighbor[0], 1));
    s.rounds.push_back(std::move(first));
    int send_from = even ? v : v - 1;
    int recv_from[2] = {send_from, send_from};
    for (int i = 1; i < m / 2; ++i) {
      const int par = i % 2;
      recv_from[par] = (recv_from[par] + step[par] + m) % m;
      Round round;
      add_send(round, neighbor[par], real(send_from, 2));
      add_recv(round, neighbor[par], real(recv_from[par], 2));
      s.rounds.push_back(std::move(round));
      send_from = recv_from[par];
    }
  }
};

}  // namespace

const Planner& neighbor_exchange_planner() {
  static const NeighborExchangePlanner p;
  return p;
}

}  // namespace agx
