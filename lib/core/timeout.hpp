#pragma once
// Hang diagnosis (AGX_TIMEOUT=<seconds>, docs/reliability.md).
//
// A collective hangs when some rank never makes its part of the call (it skipped the
// call, called it with other arguments, died, or waits for something else). Every
// place where agx waits — the round engine's rounds (executor.cpp, persistent plans
// included) and lib/hier's shared-memory flags (hier/wait.hpp) — keeps a StallClock
// while AGX_TIMEOUT is set. When a wait sees no progress (no message completed, the
// flag did not move) for the timeout, agx writes one line to stderr naming the rank (in
// the communicator and in MPI_COMM_WORLD), the algorithm, the round or stage, and the
// peers, blocks or flag it waits for; then:
//
//   AGX_TIMEOUT_ACTION=abort (default)  MPI_Abort(comm, MPI_ERR_OTHER): the other ranks
//                                       are stuck too and a started collective cannot be
//                                       withdrawn from them
//   AGX_TIMEOUT_ACTION=error            pending receives are cancelled and sends released
//                                       (abandon()), then agx::Error(MPI_ERR_OTHER) with
//                                       the same text; the communicator is not usable for
//                                       agx collectives afterwards
//
// With AGX_TIMEOUT unset nothing of this runs: the executor keeps MPI_Waitall.

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace agx {

/// AGX_TIMEOUT in seconds; 0 when off.
double timeout_seconds();

/// The no-progress clock of one wait.
class StallClock {
 public:
  explicit StallClock(double limit_seconds) : limit_(limit_seconds) { restart(); }
  /// Progress was seen: the clock starts again.
  void restart();
  /// A check that saw no progress: true once the limit has passed since the last progress.
  /// A gap longer than the limit since the previous check restarts the clock instead: a
  /// request that nobody polled (test() called rarely) had no chance to progress.
  bool stalled();
  /// Seconds since the last progress.
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  double limit_;
  Clock::time_point since_, last_check_;
};

/// One MPI_Testsome over `requests` (`scratch` is resized to hold its indices):
/// returns how many of the `open` requests are still open, restarting `clock` when
/// some completed.
std::size_t test_some(std::vector<MPI_Request>& requests, std::vector<int>& scratch,
                      std::size_t open, StallClock& clock,
                      std::vector<MPI_Status>* done = nullptr);

/// "rank 1 of 3 (world rank 4)": `rank` of `comm` and its rank in MPI_COMM_WORLD.
std::string rank_in(MPI_Comm comm, int rank);
/// The rank of `rank` of `comm` in MPI_COMM_WORLD (-1 when it is not there).
int world_rank_of(MPI_Comm comm, int rank);

/// Writes `line` to stderr, then fails as AGX_TIMEOUT_ACTION says: MPI_Abort(comm,
/// MPI_ERR_OTHER), or throw agx::Error(MPI_ERR_OTHER, line).
[[noreturn]] void report_hang(MPI_Comm comm, const std::string& line);

/// AGX_TIMEOUT_ACTION=error: withdraws the pending requests of a stalled wait so that no
/// message can land in the caller's buffers afterwards. Receives are cancelled and
/// completed (given up to a second; one already matched cannot be cancelled and is then
/// freed), sends are freed (MPI cannot take back a send). Every handle ends up
/// MPI_REQUEST_NULL or inactive (persistent). `is_send[i]` tells which requests are sends.
void abandon(MPI_Request* requests, const std::vector<bool>& is_send) noexcept;

}  // namespace agx
