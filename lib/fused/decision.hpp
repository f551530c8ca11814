#pragma once
// Whether and how to fuse a group (docs/fused.md, "Fuse or not"): a pure function of the
// members' block sizes, the selector (placement, tuning, node stage) and the settings,
// all of which every rank holds identically, so every rank takes the same decision.
//
// Priced with the cost model (core/cost_model.hpp), every member as out of place:
//   a member alone:  the algorithm its own call would run (Selector::choose), priced
//                    for its layout;
//   a fused call:    over every algorithm that can serve it, the prediction for the
//                    fused layout (in place) plus its copies at the copy rate: the own
//                    pieces (every way); staged (any path under AGX_INTEGRITY or
//                    AGX_TEST_FLIP) every piece out of the staging buffer; segmented on
//                    a point-to-point schedule (or a node path with one rank per node)
//                    the MPI library's packing of messages of several pieces (twice the
//                    bytes a rank receives); segmented on a node stage (shared_memory,
//                    hierarchical) nothing more, its copies through the segment gather
//                    and scatter the pieces; the cheapest.
// Candidates: all members as one call; every member alone; and, members ordered by size,
// for each size class boundary: the smaller ones fused and the larger ones fused, the
// smaller fused and the larger alone, the smaller alone and the larger fused. The
// cheapest wins (ties: the earlier in that order), so a decision never costs more than
// the separate calls as the model prices them.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include <cstddef>
#include <functional>
#include <vector>

namespace agx {

class Selector;

/// One call of a decision: its members (indices into the group, ascending) and how it
/// was priced. A call of one member is that member's own call.
struct FusionCall {
  std::vector<std::size_t> members;
  AlgorithmChoice algorithm;  ///< the algorithm priced (and forced for a fused call)
  bool staged = false;        ///< priced with the staging buffer's copies (AGX_INTEGRITY)
  double predicted_s = 0;
};

struct FusionDecision {
  std::vector<FusionCall> calls;  ///< ordered by their first member
  double predicted_s = 0;         ///< the calls together
  double one_call_s = 0;          ///< every member in one fused call (its cheapest path)
  double separate_s = 0;          ///< every member its own call
};

struct FusionSettings {
  /// Point-to-point paths run a fused call segmented (false under AGX_INTEGRITY or
  /// AGX_TEST_FLIP: every fused call is staged then).
  bool segments = true;
  /// Node paths may run a fused call (false for a nonblocking group whose node segment
  /// is not set up or too small: a member alone then runs point-to-point too).
  bool node_paths = true;
};

/// The decision for members whose block sizes per rank are `member_bytes[m][rank]`
/// (no MPI; `selector`'s cache of automatic choices fills in).
FusionDecision decide_fusion(Selector& selector,
                             const std::vector<std::vector<std::size_t>>& member_bytes,
                             const FusionSettings& settings = {});

}  // namespace agx
