#pragma once
// Busy waiting that leaves the core to others: spin briefly, then yield on every check.
// Ranks are often oversubscribed (4 ranks on 2 cores in the tests): a waiter that never
// yields keeps the rank it waits for off the CPU. lib/hier's flag waits (hier/wait.hpp)
// build on these and add sleeping and AGX_TIMEOUT.

#include <sched.h>

namespace agx {

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

}  // namespace agx
