// Yield or sleep by timing the first calls of each size class (wait_choice.hpp).

#include "hier/wait_choice.hpp"

#include "core/algorithm_trials.hpp"

#include "hier/hier_context.hpp"

#include <algorithm>
#include <bit>

namespace agx::hier {
namespace {

// Each way in two calls in a row, four calls of each; a rank's median of each way; sleep
// only where its slowest rank's median is below 3/4 of yielding's. Timed again 1024 calls
// after the decision, then 4096, 16384, ... calls after each later one (a wrong way costs
// up to 10x in a trial's sleeping calls: 4 of them in 1024 calls add about 4%).
constexpr TrialPlan plan{4, 2, true, 0.75, 1024};
// `auto` against its rival lets the node path run its own trials first (algorithm_trials.hpp).
static_assert(2 * plan.calls_each + 2 <= AlgorithmTrials::node_warmup);

TrialWords words(Slot& s, int c) { return {s.wait_trial_ns[c], &s.wait_trial_gen[c]}; }

}  // namespace

int wait_class_of(std::size_t mean) {
  const int c = static_cast<int>(std::bit_width(mean)) - 10;  // below 1 KiB -> 0
  return std::clamp(c, 0, wait_classes - 1);
}

WaitPick choose_wait(HierContext& h, std::size_t mean) {
  return pick_way(h, h.wait_trials.data(), wait_class_of(mean), plan, words);
}

void record_wait_trial(HierContext& h, const WaitPick& w, double seconds) {
  record_way(h, h.wait_trials.data(), plan, w, seconds, words);
}

}  // namespace agx::hier
