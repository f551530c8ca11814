#pragma once
// The three ways agx-bench times a batch of calls (docs/benchmarks.md, "Timing methods"),
// and the clock synchronization the window method needs.
//
//   barrier  per iteration: MPI_Barrier; t0; call; t1. Sample: the largest t1 - t0 of
//            all ranks. A barrier releases ranks at different instants (its own skew), so
//            a rank released early waits inside the call for the late one.
//   window   ReproMPI's scheme: clock offsets against rank 0 measured first, then every
//            rank starts iteration i at the same instant (first + i x window) of the
//            corrected clocks, waiting for it alone (no barrier). Sample: the largest end minus that
//            common start. A rank that reaches the start late makes the iteration invalid
//            (counted, not used).
//   osu      the OSU micro-benchmarks' loop: t0; call; t1; MPI_Barrier. Sample: t1 - t0
//            averaged over the ranks, so the mean of the samples is OSU's "Avg Latency".
//
// Every function is collective over `comm`; the samples are the same on every rank.

#include <mpi.h>

#include <functional>
#include <vector>

namespace bench {

/// This rank's clock against rank 0's: local MPI_Wtime = rank 0's + offset.
struct ClockSync {
  double offset = 0;
  double uncertainty = 0;  ///< largest over ranks of half the shortest round trip
};

/// `rounds` ping-pongs between rank 0 and each other rank in turn; the round with the
/// shortest round trip gives the offset (remote time minus the round trip's midpoint).
ClockSync sync_clocks(MPI_Comm comm, int rounds);

using Call = std::function<void()>;

/// Barrier method: one sample per iteration, the slowest rank's time.
std::vector<double> barrier_batch(MPI_Comm comm, int iters, const Call& call);

/// The barrier method over `passes` batches, each of as many iterations as fit
/// `batch_seconds` after one call took `once` seconds on the slowest rank (1 to
/// `max_iters`); the median sample (the modes --fused and --encoded).
double barrier_median(MPI_Comm comm, int passes, double once, double batch_seconds, int max_iters,
                      const Call& call);

/// OSU method: one sample per iteration, the ranks' mean time.
std::vector<double> osu_batch(MPI_Comm comm, int iters, const Call& call);

struct WindowTimes {
  std::vector<double> samples;  ///< valid iterations only
  int invalid = 0;              ///< iterations whose start some rank missed
};

/// Window method with windows of `window` seconds, in chunks of 10 iterations that each
/// agree on a fresh first start, `lead` seconds ahead (one held-up rank spoils the rest
/// of its chunk at most). `lead` (0: 2 windows, at least 20 us) doubles, up to 10 ms,
/// after a chunk whose first start some rank missed, and is kept for the caller's next
/// batch. Waits spin on MPI_Wtime; `yield`: with sched_yield (ranks outnumber cores: a
/// spinning waiter would take the core a peer needs).
WindowTimes window_batch(MPI_Comm comm, int iters, double window, const ClockSync& sync,
                         bool yield, const Call& call, double& lead);

}  // namespace bench
