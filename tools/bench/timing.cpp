// Timed batches: barrier, window (with clock synchronization) and OSU's loop.

#include "timing.hpp"

#include <sched.h>

#include <algorithm>
#include <limits>

namespace bench {
namespace {

constexpr int sync_tag = 17017;  // agx-bench's own point-to-point traffic on its communicator

// Waits until MPI_Wtime() reaches `start`, spinning (a sleep wakes up late by tens of
// microseconds, by milliseconds on a busy machine), yielding the core when asked.
void wait_until(double start, bool yield) {
  while (MPI_Wtime() < start)
    if (yield) sched_yield();
}

}  // namespace

ClockSync sync_clocks(MPI_Comm comm, int rounds) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  std::vector<double> offsets(static_cast<std::size_t>(nranks), 0.0);
  double worst = 0;
  if (rank == 0) {
    for (int r = 1; r < nranks; ++r) {
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < rounds; ++k) {
        double remote = 0;
        const double t0 = MPI_Wtime();
        MPI_Send(nullptr, 0, MPI_BYTE, r, sync_tag, comm);
        MPI_Recv(&remote, 1, MPI_DOUBLE, r, sync_tag, comm, MPI_STATUS_IGNORE);
        const double t1 = MPI_Wtime();
        if (t1 - t0 < best) {
          best = t1 - t0;
          offsets[static_cast<std::size_t>(r)] = remote - (t0 + t1) / 2;
        }
      }
      worst = std::max(worst, best / 2);
    }
  } else {
    for (int k = 0; k < rounds; ++k) {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, sync_tag, comm, MPI_STATUS_IGNORE);
      const double now = MPI_Wtime();
      MPI_Send(&now, 1, MPI_DOUBLE, 0, sync_tag, comm);
    }
  }
  ClockSync s;
  MPI_Scatter(offsets.data(), 1, MPI_DOUBLE, &s.offset, 1, MPI_DOUBLE, 0, comm);
  MPI_Bcast(&worst, 1, MPI_DOUBLE, 0, comm);
  s.uncertainty = worst;
  return s;
}

std::vector<double> barrier_batch(MPI_Comm comm, int iters, const Call& call) {
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (auto& ti : t) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    call();
    ti = MPI_Wtime() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

std::vector<double> osu_batch(MPI_Comm comm, int iters, const Call& call) {
  std::vector<double> t(static_cast<std::size_t>(iters));
  MPI_Barrier(comm);
  for (auto& ti : t) {
    const double t0 = MPI_Wtime();
    call();
    ti = MPI_Wtime() - t0;
    MPI_Barrier(comm);
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_SUM, comm);
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  for (auto& ti : t) ti /= nranks;
  return t;
}

WindowTimes window_batch(MPI_Comm comm, int iters, double window, const ClockSync& sync,
                         bool yield, const Call& call, double& lead) {
  // Iterations run in chunks, each with a fresh common start: a rank that was held up
  // (descheduled on a busy machine) makes the rest of its chunk late at most, not the
  // rest of the batch. The chunk's first start is `lead` after the last rank entered
  // the Allreduce that agrees on it.
  constexpr std::size_t chunk = 10;
  constexpr double max_lead = 10e-3;
  const auto n = static_cast<std::size_t>(iters);
  std::vector<double> t(n), late(n, 0.0);
  if (lead <= 0) lead = std::max(20e-6, 2 * window) + 4 * sync.uncertainty;
  for (std::size_t from = 0; from < n; from += chunk) {
    double agree[2] = {MPI_Wtime() - sync.offset, from > 0 ? late[from - chunk] : 0.0};
    MPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_DOUBLE, MPI_MAX, comm);
    if (agree[1] != 0) lead = std::min(2 * lead, max_lead);
    const double first = agree[0] + lead + sync.offset;  // on this rank's clock
    for (std::size_t i = from; i < std::min(n, from + chunk); ++i) {
      const double start = first + static_cast<double>(i - from) * window;
      if (MPI_Wtime() > start) late[i] = 1;
      else wait_until(start, yield);
      call();
      t[i] = MPI_Wtime() - start;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, comm);
  MPI_Allreduce(MPI_IN_PLACE, late.data(), iters, MPI_DOUBLE, MPI_MAX, comm);
  if (n > 0 && late[(n - 1) / chunk * chunk] != 0) lead = std::min(2 * lead, max_lead);  // for the next batch
  WindowTimes w;
  for (std::size_t i = 0; i < n; ++i) {
    if (late[i] != 0) ++w.invalid;
    else w.samples.push_back(t[i]);
  }
  return w;
}

double barrier_median(MPI_Comm comm, int passes, double once, double batch_seconds, int max_iters,
                      const Call& call) {
  const int iters =
      std::clamp(once > 0 ? static_cast<int>(batch_seconds / once) : max_iters, 1, max_iters);
  std::vector<double> samples;
  for (int p = 0; p < passes; ++p) {
    const std::vector<double> batch = barrier_batch(comm, iters, call);
    samples.insert(samples.end(), batch.begin(), batch.end());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace bench
