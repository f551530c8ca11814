#pragma once
// Waiting on shared-memory flags: spin briefly, then yield the core on every check.
// Ranks are often oversubscribed (4 ranks on 2 cores in the tests); a waiter that
// never yields keeps the rank it waits for off the CPU.
//
// With AGX_TIMEOUT set (core/timeout.hpp), a flag that does not move for the timeout
// ends the wait through `stalled(seconds)`, which writes the diagnosis (which flag of
// which local rank, in which stage) and does not return. Unset, the loop is as cheap
// as before: one look at the setting after the spin phase.

#include "core/timeout.hpp"

#include <sched.h>

namespace agx::hier {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Returns once `ready()` is true. Spins `spin` checks, then yields between checks.
template <class Pred>
void spin_then_yield(Pred ready, int spin = 64) {
  for (int i = 0; i < spin; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  while (!ready()) sched_yield();
}

/// As spin_then_yield; with AGX_TIMEOUT set, calls `stalled(seconds)` once `ready()`
/// has stayed false for the timeout.
template <class Pred, class Stalled>
void wait_until(Pred ready, Stalled stalled, int spin = 64) {
  for (int i = 0; i < spin; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  const double limit = timeout_seconds();
  if (limit <= 0) {
    while (!ready()) sched_yield();
    return;
  }
  StallClock clock(limit);
  while (!ready()) {
    sched_yield();
    if (clock.stalled()) stalled(clock.seconds());
  }
}

}  // namespace agx::hier
