#pragma once
// The candidates of a sweep point and how they are run: verified once (which also warms
// up), then timed in `passes` batches interleaved candidate by candidate, so that machine
// noise hits all of them alike, and checked again after the last timed call. Each
// iteration is MPI_Barrier; t0; call; t1, and the slowest rank's time counts.

#include "options.hpp"
#include "problem.hpp"

#include <agx/algorithm.hpp>
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace bench {

enum class Kind { mpi, agx, copy_bound };

struct Candidate {
  Kind kind = Kind::agx;
  std::string name;             ///< "mpi", "copy-bound" or an agx algorithm name
  agx::AlgorithmChoice algo{};  ///< for agx candidates
};

/// What one candidate did at one sweep point.
struct Outcome {
  std::string status = "ok";    ///< ok | WRONG | error | skip
  std::string note;             ///< why, for error and skip
  std::string ran;              ///< the algorithm agx ran (auto resolved); else the name
  int iters = 0;                ///< iterations per batch
  std::vector<double> samples;  ///< slowest-rank seconds, one per timed iteration
};

/// The candidate list from the settings: mpi, the agx algorithms, copy-bound.
std::vector<Candidate> make_candidates(const Settings& s);

/// Runs every candidate at one problem; `tick(candidate index, pass)` reports progress.
/// Collective over `comm`.
std::vector<Outcome> run_point(MPI_Comm comm, const Settings& s, const Problem& p,
                               const std::vector<Candidate>& cands,
                               const std::function<void(std::size_t, int)>& tick);

}  // namespace bench
