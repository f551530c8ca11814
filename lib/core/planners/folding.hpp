#pragma once
// Folding a non-power-of-two rank count onto p = the largest power of two <= N, shared by
// recursive_doubling and distance_halving: extra rank p+i (i < N-p) hands its block to
// rank i before the exchange, rank i carries block p+i through it, and afterwards sends
// rank p+i every block but its own.

#include "core/schedule.hpp"

namespace agx::folding {

/// The largest power of two <= n.
inline int power_of_two_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// Round before the exchange (empty on ranks not involved; absent when N is p).
inline void add_fold_in(Schedule& s, int p) {
  const int n = s.nranks, r = s.rank, extra = n - p;
  if (extra == 0) return;
  Round fold_in;
  if (r >= p) add_send(fold_in, r - p, {{r, 1}});
  if (r < extra) add_recv(fold_in, r + p, {{r + p, 1}});
  s.rounds.push_back(std::move(fold_in));
}

/// Round after the exchange: rank i gives rank p+i every block but p+i.
inline void add_fold_out(Schedule& s, int p) {
  const int n = s.nranks, r = s.rank, extra = n - p;
  if (extra == 0) return;
  auto all_but = [n](int b) {
    std::vector<BlockSpan> spans;
    if (b > 0) spans.push_back({0, b});
    if (b + 1 < n) spans.push_back({b + 1, n - b - 1});
    return spans;
  };
  Round fold_out;
  if (r < extra) add_send(fold_out, r + p, all_but(r + p));
  if (r >= p) add_recv(fold_out, r - p, all_but(r));
  s.rounds.push_back(std::move(fold_out));
}

}  // namespace agx::folding
