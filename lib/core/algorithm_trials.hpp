#pragma once
// `auto` checked against its rival on the calls themselves (docs/algorithms.md, "Choosing
// what runs"): on one node, for blocking automatic calls of large blocks, the model's
// choice (way 0) and its rival (way 1: the best point-to-point algorithm where the model
// chose the node path, shared_memory where it chose a point-to-point one) are timed on
// the first calls of each size class, and the rival is kept only where every rank found
// it faster by a margin. Per communicator (CommContext), the same on every rank:
//
//   trial calls of a class   its first 2·calls_each calls alternate way 0 and way 1 (the
//                            calls of the class counted alike on every rank)
//   end of the trials        each rank's best time of each way, the slowest rank's taken
//                            (one MPI_Allreduce on the communicator, in that call); way 1
//                            where it is below `margin` times way 0's
//   re-trials                `retrial_after` calls after a decision the trials run again,
//                            four times as many calls after each later one
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

  /// The way a call takes, and its class where it is a trial call (time it: record()).
  struct Pick {
    int way = 0;
    int trial_class = -1;
  };

  /// The class of a call of `mean` bytes of mean block (>= min_bytes).
  static int class_of(std::size_t mean);

  /// Before a blocking automatic call with a rival, of `mean` bytes of mean block.
  Pick pick(std::size_t mean);
  /// The way pick() would give the next such call, changing nothing (choose_algorithm).
  int peek(std::size_t mean) const;
  /// After that call ran without error on this rank: its seconds, kept where it was a
  /// trial call; the last trial call of a class agrees on the decision over `comm`
  /// (collective: every rank makes that call).
  void record(const Pick& p, double seconds, MPI_Comm comm);

  /// For agx-info and tests: a class's state.
  struct Class {
    int calls = 0;                      ///< trial calls made
    std::array<double, 2> best{1e300, 1e300};  ///< this rank's best of each way
    std::array<double, 2> slowest{0, 0};       ///< the slowest rank's, at the decision
    int decided = -1;                   ///< -1: undecided, else the way kept
    std::uint64_t since = 0;            ///< calls since the decision
    int retrials = 0;                   ///< times the trials ran again
  };
  const Class& at(int c) const { return classes_[static_cast<std::size_t>(c)]; }

 private:
  std::array<Class, classes> classes_{};
};

}  // namespace agx
