#pragma once
// `auto` checked against its rival on the calls themselves (docs/algorithms.md, "Choosing
// what runs"): on one node, for blocking automatic calls of large blocks, the model's
// choice (way 0) and its rival (way 1: the best point-to-point algorithm where the model
// chose the node path, shared_memory where it chose a point-to-point one) are timed on
// the first calls of each size class, and the rival is kept only where every rank found
// it faster by a margin. Per communicator (CommContext), the same on every rank:
//
//   node path first          the class's first `node_warmup` calls take the way that is
//                            the node path (shared_memory), untimed: lib/hier times its
//                            own ways on a size's first calls (copies, how ranks wait),
//                            and a trial of the node path on those calls would time its
//                            trial variants, not the path as it then runs
//   trial calls of a class   its next 2·calls_each calls alternate way 0 and way 1 (the
//                            calls of the class counted alike on every rank)
//   end of the trials        the class's next call begins with one MPI_Allreduce (max) of
//                            every rank's best time of each way on the communicator and
//                            runs the choice; from the call after it, way 1 where the
//                            slowest rank's time is below `margin` times way 0's. Calls are
//                            counted when picked, so a trial call that failed on one rank
//                            leaves every rank's count, and the agreement, in step
//   re-trials                `retrial_after` calls after a decision the trials run again,
//                            four times as many calls after each later one; the way kept
//                            stays unless the other is `margin` faster (decide: so a
//                            re-trial on a noisy moment does not undo what the first
//                            trials found; the agreeing call runs the way kept before)
//
// Below `min_bytes` of mean block a call costs little, so the model's error costs little
// too, while a trial's wrong way would cost much more than it could win: no trials.

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace agx {

class AlgorithmTrials {
 public:
  static constexpr std::size_t min_bytes = std::size_t{1} << 20;  ///< 1 MiB mean block
  static constexpr int classes = 8;         ///< 1 MiB, 2 MiB, ..., 128 MiB and above
  static constexpr int calls_each = 3;
  static constexpr double margin = 0.9;     ///< the rival must be 10% faster
  static constexpr int retrial_after = 64;  ///< calls of a class after a decision
  /// Calls of the node path before its trials: at least what lib/hier's own trials of a
  /// size take (both end within 2·calls_each + 2 calls; static_asserts in lib/hier).
  static constexpr int node_warmup = 10;

  /// The way a call takes, and its class where it is a trial call (time it: record()).
  struct Pick {
    int way = 0;
    int trial_class = -1;
  };

  /// The class of a call of `mean` bytes of mean block (>= min_bytes).
  static int class_of(std::size_t mean);
  /// The way kept from the slowest rank's best times of each way: way 1 where it is
  /// `margin` faster than way 0; after re-trials whose previous decision kept way 1
  /// (`previous`), way 0 only where it is `margin` faster than way 1.
  static int decide(int previous, const std::array<double, 2>& slowest);

  /// Before a blocking automatic call with a rival, of `mean` bytes of mean block, whose
  /// way `node_way` (0 or 1) is the node path; the first call of a class after its trials
  /// agrees on the decision over `comm` (collective: every rank makes that call).
  Pick pick(std::size_t mean, MPI_Comm comm, int node_way);
  /// The way pick() would give the next such call, changing nothing (choose_algorithm).
  int peek(std::size_t mean, int node_way) const;
  /// After a call ran without error on this rank: its seconds, kept where it was a trial
  /// call.
  void record(const Pick& p, double seconds);

  /// For agx-info and tests: a class's state.
  struct Class {
    int calls = 0;                      ///< trial calls made
    std::array<double, 2> best{1e300, 1e300};  ///< this rank's best of each way
    std::array<double, 2> slowest{0, 0};       ///< the slowest rank's, at the decision
    int decided = -1;                   ///< -1: undecided, else the way kept
    std::uint64_t since = 0;            ///< calls since the decision
    int retrials = 0;                   ///< times the trials ran again
    int previous = -1;                  ///< re-trials: the way the last decision kept
    int node_calls = 0;                 ///< untimed calls of the node path before the trials
  };
  const Class& at(int c) const { return classes_[static_cast<std::size_t>(c)]; }

 private:
  std::array<Class, classes> classes_{};
};

}  // namespace agx
