#pragma once
// The candidates of a sweep point and how they are run: verified once (which also warms
// up), then timed in `passes` batches interleaved candidate by candidate and method by
// method, so that machine noise hits all of them alike, and checked again after the
// last timed call. How one batch is timed: timing.hpp (barrier, window, osu).

#include "dropin.hpp"
#include "options.hpp"
#include "problem.hpp"

#include <agx/algorithm.hpp>
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace bench {

/// mpi: PMPI_Allgather(v), the MPI library itself even under the interposer; dropin:
/// MPI_Allgather(v), through libagx_pmpi.so when it is preloaded; agx: the C++ API.
enum class Kind { mpi, dropin, agx, copy_bound };

struct Candidate {
  Kind kind = Kind::agx;
  std::string name;             ///< "mpi", "mpi-agx", "copy-bound" or an agx algorithm name
  agx::AlgorithmChoice algo{};  ///< for agx candidates
};

/// What one candidate did at one sweep point under one timing method.
struct Outcome {
  Method method = Method::barrier;
  std::string status = "ok";    ///< ok | WRONG | error | skip
  std::string note;             ///< why, for error and skip; what took a drop-in call
  std::string ran;              ///< the algorithm agx ran (auto resolved); else the name
  int iters = 0;                ///< iterations per batch
  int invalid = 0;              ///< window method: iterations whose common start was missed
  double window_s = 0;          ///< window method: the largest window used
  double sync_s = 0;            ///< window method: the largest clock-offset uncertainty
  std::vector<double> samples;  ///< seconds, one per valid timed iteration (timing.hpp)
};

/// The candidate list from the settings: mpi, mpi-agx (when asked, or by default when
/// the interposer is loaded), the agx algorithms, copy-bound.
std::vector<Candidate> make_candidates(const Settings& s, const Interposer& ip);

/// What run_point needs besides the settings.
struct RunEnv {
  const Interposer& ip;
  bool oversubscribed = false;  ///< more ranks on a node than it has cores
};

/// Runs every candidate at one problem under every method of the settings; the result
/// holds methods x candidates outcomes, method-major (index m * cands.size() + c).
/// `tick(candidate index, method, pass)` reports progress. Collective over `comm`.
std::vector<Outcome> run_point(MPI_Comm comm, const Settings& s, const RunEnv& env,
                               const Problem& p, const std::vector<Candidate>& cands,
                               const std::function<void(std::size_t, Method, int)>& tick);

}  // namespace bench
