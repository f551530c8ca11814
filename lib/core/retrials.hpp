#pragma once
// When a choice timed on the calls themselves is timed again (the copy and wait trials,
// lib/hier/trials.hpp; `auto` against its rival, core/algorithm_trials.hpp): `after`
// calls of its class after the first decision, four times as many after each later one,
// so a decision made on a noisy moment does not hold for good.

#include <algorithm>
#include <cstdint>

namespace agx {

/// Whether a decided class's trials run again at its `calls_since`-th call since the
/// decision, after `retrials` earlier re-runs (`after` 0: never).
inline bool retrial_due(std::uint64_t calls_since, int retrials, int after) {
  return after > 0 && calls_since >= static_cast<std::uint64_t>(after) << (2 * std::min(retrials, 24));
}

}  // namespace agx
