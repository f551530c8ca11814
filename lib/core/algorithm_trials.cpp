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

int AlgorithmTrials::decide(int previous, const std::array<double, 2>& slowest) {
  if (previous == 1) return slowest[0] < margin * slowest[1] ? 0 : 1;
  return slowest[1] < margin * slowest[0] ? 1 : 0;
}

AlgorithmTrials::Pick AlgorithmTrials::pick(std::size_t mean, MPI_Comm comm, int node_way) {
  const int c = class_of(mean);
  Class& t = classes_[static_cast<std::size_t>(c)];
  if (t.decided < 0 && t.calls == 0 && t.node_calls < node_warmup) {  // the node path's own trials first
    ++t.node_calls;
    return {node_way, -1};
  }
  if (t.decided < 0 && t.calls == 2 * calls_each) {
    // The trials are over: the first call of the class after them decides, on every rank
    // (every rank makes it, whether or not its own trial calls all went through).
    // PMPI_: under the interposer agx's own collectives must not re-enter it.
    check_mpi(PMPI_Allreduce(t.best.data(), t.slowest.data(), 2, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce");
    t.decided = decide(t.previous, t.slowest);
    // This call runs the way kept before (the choice at first): what peek() said before
    // the agreement.
    return {std::max(t.previous, 0), -1};
  }
  if (t.decided >= 0) {
    if (!retrial_due(++t.since, t.retrials, retrial_after)) return {t.decided, -1};
    const int retrials = t.retrials + 1;  // the same call of the class on every rank
    const int previous = t.decided, node_calls = t.node_calls;
    t = Class{};
    t.retrials = retrials;
    t.previous = previous;
    t.node_calls = node_calls;
  }
  const int way = t.calls++ % 2;  // counted here, so a call that fails counts too
  return {way, c};
}

int AlgorithmTrials::peek(std::size_t mean, int node_way) const {
  const Class& t = classes_[static_cast<std::size_t>(class_of(mean))];
  if (t.decided < 0 && t.calls == 0 && t.node_calls < node_warmup) return node_way;
  if (t.decided < 0) return t.calls < 2 * calls_each ? t.calls % 2 : std::max(t.previous, 0);  // (the agreeing call)
  return retrial_due(t.since + 1, t.retrials, retrial_after) ? 0 : t.decided;
}

void AlgorithmTrials::record(const Pick& p, double seconds) {
  if (p.trial_class < 0) return;
  Class& t = classes_[static_cast<std::size_t>(p.trial_class)];
  double& best = t.best[static_cast<std::size_t>(p.way)];
  best = std::min(best, seconds);
}

}  // namespace agx
