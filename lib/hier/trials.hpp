#pragma once
// Choosing between two ways of running a call by timing the calls themselves, per size
// class of the call (the copies, copy_choice.hpp; how ranks wait, wait_choice.hpp):
//
//   trial calls of a class   the first 2·each calls of the class take way (k / period) % 2
//                            in their k-th call; each rank keeps its best time of each way,
//                            or its median (TrialPlan::median)
//   end of the trials (gen g) each rank publishes both times and g in its slot
//   a call at gen >= g + 2   every rank reads every local rank's times (published before
//                            that rank's call g + 1, whose flags this rank has read) and
//                            takes the way whose slowest rank was faster; calls between g
//                            and g + 2 take way 0
//   re-trials                TrialPlan::retrial_after calls of the class after a decision,
//                            its trials run again (and then after 4x, 16x, ... as many
//                            calls): a decision that a noisy moment made (a peer late, the
//                            machine busy) or that the job's later phases changed does not
//                            hold for good
//
// Every rank takes the same way in every call: the trial calls follow from the count of
// the class's calls, the same everywhere, and the decision from the same published words.
// A call that is not timed (not recorded) does not count: the next one takes its way.

#include <atomic>
#include <cstdint>

namespace agx::hier {

class HierContext;
struct Slot;

/// Trial calls of each way at most (TrialPlan::calls_each).
inline constexpr int max_trials_each = 8;

/// What a rank keeps per size class.
struct TimedTrials {
  int calls = 0;                            ///< trial calls made
  double seconds[2][max_trials_each] = {};  ///< each way's trial times (count[way] of them)
  int count[2] = {0, 0};
  /// Once the trials are over: each way's best seconds, or median (TrialPlan::median)
  double best[2] = {1e300, 1e300};
  std::uint64_t ended = 0;                  ///< gen of the last trial call (0: trials not over)
  int decided = -1;                 ///< -1 undecided, else the way taken until the next trials
  std::uint64_t since = 0;          ///< calls of the class since the decision
  int retrials = 0;                 ///< times the trials ran again (TrialPlan::retrial_after)
};

/// The words of one size class's trials in a rank's slot (shared with the node).
struct TrialWords {
  std::atomic<std::uint64_t>* ns;  ///< [2]: the best times (ns) of each way
  std::atomic<std::uint64_t>* gen;  ///< the gen of the last trial call
};

/// How a choice runs its trials: calls of each way (at most max_trials_each), how many
/// calls in a row take one way before the other (1: alternate), and what a rank makes of
/// its times of a way: the best (what a way can do: the copies' speed), or the median
/// (what it typically does: how long a wait takes, where a call that found its peers done
/// already is as fast either way and the best would pick a way by chance).
/// `margin`: way 1 is taken only where its slowest rank's time is below margin times way
/// 0's (1: whichever is faster; less where a wrong way 1 costs more than a wrong way 0).
/// `retrial_after`: calls of a class after its decision before its trials run again,
/// four times as many before each later time (0: a decision holds for good).
struct TrialPlan {
  int calls_each = 3;
  int period = 1;
  bool median = false;
  double margin = 1.0;
  int retrial_after = 0;
};

/// The way a call takes, and its size class where it is a trial call (time it: record_way).
struct TrialPick {
  int way = 0;
  int trial_class = -1;  ///< >= 0: a trial call of this class
};

/// Before a call of size class `c`: its way. `classes`: the choice's trials per class;
/// `words(slot, c)`: the class's words in a slot.
TrialPick pick_way(HierContext& h, TimedTrials* classes, int c, const TrialPlan& plan,
                   TrialWords (*words)(Slot&, int));

/// After a call ran without error on this rank: its time, kept where it was a trial call.
void record_way(HierContext& h, TimedTrials* classes, const TrialPlan& plan, const TrialPick& pick,
                double seconds, TrialWords (*words)(Slot&, int));

}  // namespace agx::hier
