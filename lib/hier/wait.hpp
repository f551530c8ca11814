#pragma once
// Waiting on shared-memory flags: spin briefly, then yield the core on every check.
// Ranks are often oversubscribed (4 ranks on 2 cores in the tests); a waiter that
// never yields keeps the rank it waits for off the CPU, and sched_yield alone does not
// hand the core over reliably (the scheduler may run the yielder again at once). So
// where a node has more ranks than cores (HierContext::oversubscribed, AGX_WAIT), a
// waiter sleeps in the kernel after a short spin: a futex on the node's wake-up word,
// which every flag store bumps (notify) while anybody sleeps on it.
//
// With AGX_TIMEOUT set (core/timeout.hpp), a flag that does not move for the timeout
// ends the wait through `stalled(seconds)`, which writes the diagnosis (which flag of
// which local rank, in which stage) and does not return. Unset, the loop is as cheap
// as before: one look at the setting after the spin phase.

#include "core/spin.hpp"
#include "core/timeout.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace agx::hier {

using agx::cpu_relax;  // core/spin.hpp
using agx::spin_then_yield;

/// The node's wake-up word, in shared memory (local rank 0's slot).
struct NodeSignal {
  std::atomic<std::uint32_t> epoch{0};     ///< bumped by every flag store while sleepers > 0
  std::atomic<std::uint32_t> sleepers{0};  ///< waiters inside (or about to enter) futex_wait
};
static_assert(sizeof(std::atomic<std::uint32_t>) == 4, "futex words are 32 bits");

/// After a flag store (release): wakes the node's sleepers, if any. Without sleepers a
/// fence and one load: the fence orders the flag store before the look at `sleepers`,
/// pairing with the sleeper's increment before its last look at the flag.
inline void notify(NodeSignal& s) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_relaxed) == 0) return;
  s.epoch.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&s.epoch), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

/// Sleeps until the node's epoch moves (or 1 ms passes) unless `ready()` already holds;
/// returns what that look at `ready()` said (true: it holds, the caller stops waiting:
/// a predicate that polls something only every so many looks may not say so again at
/// once, and each further look here may be a sleep).
template <class Pred>
bool sleep_once(NodeSignal& s, Pred& ready) {
  s.sleepers.fetch_add(1, std::memory_order_seq_cst);
  const std::uint32_t seen = s.epoch.load(std::memory_order_seq_cst);
  const bool done = ready();
  if (!done) {
    const timespec limit{0, 1000000};  // a lost wake-up costs 1 ms, never a hang
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&s.epoch), FUTEX_WAIT, seen, &limit,
            nullptr, 0);
  }
  s.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return done;
}

/// Checks before the first yield or sleep. On a node with more ranks than cores a waiter
/// always waits for a rank that shares its core and cannot run while it spins: 64
/// checks (each with a `pause`, about 140 cycles on this Intel Xeon) held the core for
/// about 3 µs per wait. At 4 ranks on 2 cores, OSU's osu_allgather at 1 B took 3.8-4.5 µs
/// in 5 to 6 of 8 runs with 64 and 2.0-2.1 µs in 8 of 8 with 16 (8: 7 of 8, 4: 6 of 8);
/// at 3 ranks 1.55-2.14 against 1.67-2.38 µs.
constexpr int default_spin = 64, oversubscribed_spin = 16;

/// As spin_then_yield, or, with `sleep` set (an oversubscribed node), sleeping on it
/// between checks; with AGX_TIMEOUT set, calls `stalled(seconds)` once `ready()` has
/// stayed false for the timeout.
template <class Pred, class Stalled>
void wait_until(NodeSignal* sleep, Pred ready, Stalled stalled, int spin = default_spin) {
  for (int i = 0; i < spin; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  // true: the look inside sleep_once found `ready()` true (the wait is over)
  const auto pause = [&] {
    if (sleep != nullptr) return sleep_once(*sleep, ready);
    sched_yield();
    return false;
  };
  const double limit = timeout_seconds();
  if (limit <= 0) {
    while (!ready())
      if (pause()) return;
    return;
  }
  StallClock clock(limit);
  while (!ready()) {
    if (pause()) return;
    if (clock.stalled()) stalled(clock.seconds());
  }
}

}  // namespace agx::hier
