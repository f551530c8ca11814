// Staged or single copy by timing the first calls of each size class (copy_choice.hpp).

#include "hier/copy_choice.hpp"

#include "hier/hier_context.hpp"
#include "hier/settings.hpp"

#include <algorithm>
#include <atomic>
#include <bit>

namespace agx::hier {
namespace {

constexpr int trials_each = 3;

std::uint64_t nanoseconds(double seconds) {
  return static_cast<std::uint64_t>(std::min(seconds, 1e9) * 1e9);
}

}  // namespace

int copy_class_of(std::size_t mean) {
  const int c = static_cast<int>(std::bit_width(mean)) - 13;  // 4 KiB -> 0
  return std::clamp(c, 0, copy_classes - 1);
}

LargeCopies choose_large_copies(HierContext& h, std::size_t mean) {
  if (!h.cma) return {};
  if (const auto& forced = settings().cma_min_bytes) return {mean >= *forced, -1};
  if (mean < trial_min_bytes) return {};
  const int c = copy_class_of(mean);
  CopyTrials& t = h.copy_trials[static_cast<std::size_t>(c)];
  if (t.decided >= 0) return {t.decided == 1, -1};
  if (t.calls < 2 * trials_each) return {t.calls % 2 == 1, c};
  if (h.gen() + 1 < t.ended + 2) return {};  // the peers' times may not be visible yet
  std::uint64_t worst[2] = {0, 0};
  bool same = true;
  for (int j = 0; j < h.topo.local_size(); ++j) {
    const Slot& s = h.slot(j);
    same = same && s.trial_gen[c].load(std::memory_order_acquire) == t.ended;
    for (int k = 0; k < 2; ++k)
      worst[k] = std::max(worst[k], s.trial_ns[c][k].load(std::memory_order_relaxed));
  }
  // (Ranks whose trials ended at other calls made other calls: an erroneous program,
  // whose counts the copies report as disagreeing. Staged, as before any trial.)
  t.decided = same && worst[1] < worst[0] ? 1 : 0;
  return {t.decided == 1, -1};
}

void record_trial(HierContext& h, const LargeCopies& c, double seconds) {
  if (c.trial_class < 0) return;
  CopyTrials& t = h.copy_trials[static_cast<std::size_t>(c.trial_class)];
  double& best = t.best[c.single_copy ? 1 : 0];
  best = std::min(best, seconds);
  if (++t.calls < 2 * trials_each) return;
  Slot& own = h.own_slot();
  for (int k = 0; k < 2; ++k)
    own.trial_ns[c.trial_class][k].store(nanoseconds(t.best[k]), std::memory_order_relaxed);
  t.ended = h.gen();
  own.trial_gen[c.trial_class].store(t.ended, std::memory_order_release);
}

}  // namespace agx::hier
