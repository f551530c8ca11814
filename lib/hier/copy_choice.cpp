// Staged or single copy by timing the first calls of each size class (copy_choice.hpp).

#include "hier/copy_choice.hpp"

#include "core/algorithm_trials.hpp"

#include "hier/hier_context.hpp"
#include "hier/settings.hpp"

#include <algorithm>
#include <bit>
#include <optional>

namespace agx::hier {
namespace {

// Staged and single copy alternate in the trial calls, three of each; timed again 256
// calls after each decision, then 1024, 4096, ... calls later.
constexpr TrialPlan plan{3, 1, false, 1.0, 256};
// `auto` against its rival lets the node path run its own trials first (algorithm_trials.hpp).
static_assert(2 * plan.calls_each + 2 <= AlgorithmTrials::node_warmup);

TrialWords words(Slot& s, int c) { return {s.trial_ns[c], &s.trial_gen[c]}; }

}  // namespace

int copy_class_of(std::size_t mean) {
  const int c = static_cast<int>(std::bit_width(mean)) - 13;  // 4 KiB -> 0
  return std::clamp(c, 0, copy_classes - 1);
}

namespace {

// The way of a call that no trial decides (no kernel copies, AGX_CMA_MIN_BYTES, a block
// below the trials' sizes); none where the class's trials do.
std::optional<int> untimed_way(const HierContext& h, std::size_t mean) {
  if (!h.cma) return 0;
  if (const auto& forced = settings().cma_min_bytes) return mean >= *forced ? 1 : 0;
  if (mean < trial_min_bytes) return 0;
  return std::nullopt;
}

}  // namespace

LargeCopies choose_large_copies(HierContext& h, std::size_t mean) {
  if (const std::optional<int> way = untimed_way(h, mean)) return {*way, -1};
  return pick_way(h, h.copy_trials.data(), copy_class_of(mean), plan, words);
}

void record_trial(HierContext& h, const LargeCopies& c, double seconds) {
  record_way(h, h.copy_trials.data(), plan, c, seconds, words);
}

int decided_large_copies(const HierContext& h, std::size_t mean) {
  if (const std::optional<int> way = untimed_way(h, mean)) return *way;
  return h.copy_trials[static_cast<std::size_t>(copy_class_of(mean))].decided;
}

}  // namespace agx::hier
