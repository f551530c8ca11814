#pragma once
// Yield or sleep: how the ranks of an oversubscribed node (more ranks than cores,
// AGX_WAIT=auto) wait for each other's flags in a blocking call (wait.hpp), chosen per
// size class by timing the calls themselves (trials.hpp; way 0 yields, way 1 sleeps).
//
// Which is faster depends on the machine and the call, by more than a fixed rule can
// say: on an AMD EPYC machine (2 vCPUs, 4 ranks) sleeping gave 0.7-0.8x Open MPI's time
// from 1 MiB per rank where yielding gave 1.2-1.3x, and yielding won below 64 KiB; on an
// Intel Xeon machine (2 vCPUs) yielding won at every size from 4 KiB to 16 MiB at 3, 4
// and 8 ranks (at 8 ranks and 4 KiB: 22 us against 148 us, Open MPI 73 us; at 4 ranks
// and 256 KiB: 179 us against 268-291 us), docs/hierarchy.md.
//
// Size classes: the power of two at or below the mean block, class 0 below 1 KiB. Trial
// calls take each way in two calls in a row (yield, yield, sleep, sleep, ...; four of
// each), so that the copy choice's trials (staged and single copy alternating,
// copy_choice.hpp) meet both ways. Each rank keeps its median time of each way, not its
// best: a call that finds its peers done already takes as long either way, so the best of
// each way came out alike and picked a way by chance (at 3 ranks on 2 cores a run picked
// sleep for calls below 1 KiB and took 11x Open MPI's time, where yielding takes 0.9x).
// And sleep must win clearly, by a slowest rank's median below 3/4 of yielding's: a trial
// call's time also holds how late its peers came to it, which swung both ways' medians
// alike (at 3 ranks and 1 KiB: 19.7 against 18.3 us, 29.9 against 26.1 us, where
// yielding then took 4 us a call and sleeping 45; 3 of 8 runs slept at 1 KiB or below
// without the margin, 0 of 8 with it), and a wrong sleep costs up to 10x where a wrong
// yield cost 1.3-1.6x (the AMD machine from 1 MiB).
// AGX_WAIT=yield or sleep: that way, no trials.

#include "hier/trials.hpp"

#include <cstddef>

namespace agx::hier {

class HierContext;

inline constexpr int wait_classes = 24;

/// The class of a mean block of `mean` bytes.
int wait_class_of(std::size_t mean);

/// How a call waits: way 1 sleeps, way 0 yields; a trial call is timed (record_wait_trial).
using WaitPick = TrialPick;

/// Before a blocking call whose mean block is `mean` bytes on a node where waiters may
/// sleep with AGX_WAIT=auto.
WaitPick choose_wait(HierContext& h, std::size_t mean);

/// After a trial call ran without error on this rank: its time.
void record_wait_trial(HierContext& h, const WaitPick& w, double seconds);

}  // namespace agx::hier
