#pragma once
// Staged or single copy: which copies a blocking call on one node takes for blocks too
// large for the flag lines (node_copies.hpp has both).
//
// Which is faster depends on the machine and on more than the two copies' speeds: on
// one machine the kernel's process_vm_readv ran at a third of memcpy's speed and staging
// won by 7-24x, on another single copy took half of staging's time although a local
// memcpy was twice as fast as the kernel copy (staging's reader copies lines its peer has
// just written, at the speed of moving them between cores). So agx times both on the
// calls themselves, per size class (the power of two at or below the mean block, from
// 4 KiB, just above a flag line, up: on the Intel Xeon machine single copy took
// 0.50-0.65x staging's time from 8 to 32 KiB, docs/results.md):
//
//   calls 1-6 of a class   alternate staged and single copy; each rank keeps its best
//                          time of each
//   end of call 6 (gen g)  each rank publishes both times and g in its slot
//   a call at gen >= g + 2 every rank reads every local rank's times (published before
//                          that rank's call g + 1, whose flags this rank has read) and
//                          takes, for good, the copies whose slowest rank was faster;
//                          calls between g and g + 2 stage
//
// Every rank takes the same copies in every call: the trial calls follow from the count
// of the class's calls, the same everywhere, and the decision from the same published
// words. AGX_CMA=0 (or a probe that finds process_vm_readv not working) means staged,
// AGX_CMA_MIN_BYTES=b single copy from b and staged below, without trials.

#include "hier/trials.hpp"

#include <cstddef>
#include <cstdint>

namespace agx::hier {

class HierContext;

/// Size classes with trials: class c holds mean blocks in [2^(12+c), 2^(13+c)).
inline constexpr int copy_classes = 32;
inline constexpr std::size_t trial_min_bytes = std::size_t{4} * 1024;

/// The class of a mean block of `mean` >= trial_min_bytes bytes.
int copy_class_of(std::size_t mean);

/// What a rank keeps per size class (HierContext::copy_trials; trials.hpp).
using CopyTrials = TimedTrials;

/// Way 1: single copy, way 0: staged (trials.hpp).
using LargeCopies = TrialPick;

/// Before a blocking one-node call of block ranges whose mean block is `mean` bytes and
/// whose largest block does not fit a flag line.
LargeCopies choose_large_copies(HierContext& h, std::size_t mean);

/// After a trial call ran without error on this rank: its time.
void record_trial(HierContext& h, const LargeCopies& c, double seconds);

/// The copies decided for calls whose mean block is `mean` bytes (1: the kernel's, 0:
/// staged), as choose_large_copies takes them, without a call of the trials (direct
/// write's push from a point-to-point choice, direct_write.hpp); -1 while the size class
/// is undecided. The same on every rank at every call: only picks decide.
int decided_large_copies(const HierContext& h, std::size_t mean);

}  // namespace agx::hier
