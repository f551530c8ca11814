// `auto` against its rival, timed on the calls themselves (algorithm_trials.hpp).

#include "core/algorithm_trials.hpp"

#include "core/mpi_check.hpp"
#include "core/retrials.hpp"

#include <algorithm>
#include <bit>

namespace agx {

int AlgorithmTrials::class_of(std::size_t mean) {
  const int c = static_cast<int>(std::bit_width(mean)) - 21;  // 1 MiB -> 0
  return std::clamp(c, 0, classes - 1);
}

AlgorithmTrials::Pick AlgorithmTrials::pick(std::size_t mean, MPI_Comm comm) {
  const int c = class_of(mean);
  Class& t = classes_[static_cast<std::size_t>(c)];
  if (t.decided < 0 && t.calls == 2 * calls_each) {
    // The trials are over: the first call of the class after them decides, on every rank
    // (every rank makes it, whether or not its own trial calls all went through).
    // PMPI_: under the interposer agx's own collectives must not re-enter it.
    check_mpi(PMPI_Allreduce(t.best.data(), t.slowest.data(), 2, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce");
    t.decided = t.slowest[1] < margin * t.slowest[0] ? 1 : 0;
    return {0, -1};  // (this call runs the choice: what peek() said before the agreement)
  }
  if (t.decided >= 0) {
    if (!retrial_due(++t.since, t.retrials, retrial_after)) return {t.decided, -1};
    const int retrials = t.retrials + 1;  // the same call of the class on every rank
    t = Class{};
    t.retrials = retrials;
  }
  const int way = t.calls++ % 2;  // counted here, so a call that fails counts too
  return {way, c};
}

int AlgorithmTrials::peek(std::size_t mean) const {
  const Class& t = classes_[static_cast<std::size_t>(class_of(mean))];
  if (t.decided < 0) return t.calls < 2 * calls_each ? t.calls % 2 : 0;  // (the agreeing call: the choice)
  return retrial_due(t.since + 1, t.retrials, retrial_after) ? 0 : t.decided;
}

void AlgorithmTrials::record(const Pick& p, double seconds) {
  if (p.trial_class < 0) return;
  Class& t = classes_[static_cast<std::size_t>(p.trial_class)];
  double& best = t.best[static_cast<std::size_t>(p.way)];
  best = std::min(best, seconds);
}

}  // namespace agx
