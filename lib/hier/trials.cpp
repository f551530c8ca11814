// Two ways of a call timed on the calls themselves (trials.hpp).

#include "hier/trials.hpp"

#include "core/retrials.hpp"
#include "hier/hier_context.hpp"

#include <algorithm>

namespace agx::hier {
namespace {

std::uint64_t nanoseconds(double seconds) {
  return static_cast<std::uint64_t>(std::min(seconds, 1e9) * 1e9);
}

}  // namespace

TrialPick pick_way(HierContext& h, TimedTrials* classes, int c, const TrialPlan& plan,
                   TrialWords (*words)(Slot&, int)) {
  TimedTrials& t = classes[c];
  if (t.decided >= 0) {
    if (!retrial_due(++t.since, t.retrials, plan.retrial_after)) return {t.decided, -1};
    const int retrials = t.retrials + 1;  // the same call of the class on every rank
    t = TimedTrials{};
    t.retrials = retrials;
  }
  if (t.calls < 2 * plan.calls_each) return {(t.calls / plan.period) % 2, c};
  if (h.gen() + 1 < t.ended + 2) return {};  // the peers' times may not be visible yet
  std::uint64_t worst[2] = {0, 0};
  bool same = true;
  for (int j = 0; j < h.topo.local_size(); ++j) {
    const TrialWords w = words(h.slot(j), c);
    same = same && w.gen->load(std::memory_order_acquire) == t.ended;
    for (int k = 0; k < 2; ++k) worst[k] = std::max(worst[k], w.ns[k].load(std::memory_order_relaxed));
  }
  // (Ranks whose trials ended at other calls made other calls: an erroneous program,
  // whose counts the copies report as disagreeing. Way 0, as before any trial.)
  t.decided = same && static_cast<double>(worst[1]) < plan.margin * static_cast<double>(worst[0]) ? 1 : 0;
  return {t.decided, -1};
}

void record_way(HierContext& h, TimedTrials* classes, const TrialPlan& plan, const TrialPick& pick,
                double seconds, TrialWords (*words)(Slot&, int)) {
  if (pick.trial_class < 0) return;
  TimedTrials& t = classes[pick.trial_class];
  int& n = t.count[pick.way];
  if (n < max_trials_each) t.seconds[pick.way][n++] = seconds;
  if (++t.calls < 2 * plan.calls_each) return;
  for (int k = 0; k < 2; ++k) {  // each way's best, or median
    double* v = t.seconds[k];
    const int m = t.count[k];
    std::sort(v, v + m);
    t.best[k] = m == 0 ? 1e300 : !plan.median ? v[0] : m % 2 == 1 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
  }
  const TrialWords own = words(h.own_slot(), pick.trial_class);
  for (int k = 0; k < 2; ++k) own.ns[k].store(nanoseconds(t.best[k]), std::memory_order_relaxed);
  t.ended = h.gen();
  own.gen->store(t.ended, std::memory_order_release);
}

}  // namespace agx::hier
