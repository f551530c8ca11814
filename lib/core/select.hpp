#pragma once
// Choosing the algorithm of a call (docs/tuning.md):
//   1. an explicit Options::algorithm; 2. AGX_ALGO; 3. `auto`:
//   the measured winner from the tuning file for this (ranks, ranks per node, size class)
//   when the file has one, else the argmin of the cost model's prediction over every
//   registered algorithm (at each of its radices) that can serve the call.
// The choice is cached per communicator and size class, and is the same on every rank:
// it depends only on the layout, the placement and the tuning, which every rank takes
// from rank 0 (lib/api/context.cpp makes the selector of a communicator at its set-up).

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/cost_model.hpp"
#include "core/tuning.hpp"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace agx {

class CommContext;

/// One communicator's selection state (owned by its CommContext).
class Selector {
 public:
  /// What the process has computed for selectors alike (same placement, tuning and node
  /// stage): for uniform layouts, keyed by the exact block size, so a pure function of
  /// the call and the same on every rank whatever other communicators it served first.
  /// A new communicator of a known placement (a dup, a split per step) then prices no
  /// schedule at its first call.
  struct Memo;

  /// Pure (no MPI): the choice for a placement, a tuning and the node stage that runs
  /// (the simulator and tests build it directly). Groups from the tuning are applied here.
  Selector(Placement placement, Tuning tuning, NodeStageParams stage);

  /// The automatic choice for this call. `engine`: a nonblocking or persistent call,
  /// whose node path runs on the round engine with the staged node schedule only (lib/hier's
  /// single copy serves blocking calls): shared_memory is priced without single copy there.
  AlgorithmChoice choose(const Layout& layout, bool in_place, bool engine = false);
  /// The point-to-point algorithm (no node path) predicted fastest for this call.
  AlgorithmChoice best_point_to_point(const Layout& layout, bool in_place);

  /// Every algorithm variant that can serve the call, with its predicted seconds.
  std::vector<std::pair<AlgorithmChoice, double>> predictions(const Layout& layout,
                                                              bool in_place) const;

  /// The candidate of least predicted time (ties: the first in table order), among those
  /// that can serve the call and pass `keep`: the one predictions() would give, found by
  /// branch and bound (every candidate's cheap lower bound first, then full predictions
  /// in the order of those bounds, each bounded by the best so far: cost_model.hpp,
  /// at_most). std::nullopt when none is kept.
  std::optional<std::pair<AlgorithmChoice, double>> cheapest(
      const Layout& layout, bool in_place, bool (*keep)(const AlgorithmChoice&),
      bool engine = false) const;

  /// Why the automatic choice is what it is ("measured", "predicted").
  std::string reason(const Layout& layout, bool in_place) const;
  /// The tuning file's measured winner for this call's shape and size class;
  /// `automatic` when the file has none.
  AlgorithmChoice measured(const Layout& layout) const;

  const Placement& placement() const { return placement_; }
  const Tuning& tuning() const { return tuning_; }
  int ranks_per_node() const { return ranks_per_node_; }
  const NodeStageParams& stage() const { return stage_; }
  /// The node stage that runs a call: `engine` (nonblocking, persistent) never reads by
  /// single copy.
  const NodeStageParams& stage(bool engine) const { return engine ? engine_stage_ : stage_; }

 private:
  Placement placement_;
  Tuning tuning_;
  int ranks_per_node_ = 1;
  NodeStageParams stage_;
  NodeStageParams engine_stage_;  // stage_ without single copy or direct write
  // (size class, in place, uniform, engine)
  std::map<std::tuple<int, bool, bool, bool>, AlgorithmChoice> cache_;
  Memo* memo_ = nullptr;  // process-wide, never freed (bounded, select.cpp)
};

/// A readable table for agx-info: the tuning in use, then per size (bytes per rank,
/// uniform blocks, out of place) the predicted time of every algorithm that can serve
/// the call, the automatic choice marked with '*' and why.
std::string describe_selection(CommContext& ctx, const std::vector<std::size_t>& sizes);

/// The algorithm of a call: option, then AGX_ALGO, then ctx's selector. Parameters are
/// checked and defaults filled in (a bad radix is an agx::Error, MPI_ERR_ARG).
AlgorithmChoice select_algorithm(CommContext& ctx, const Layout& layout, const Options& options,
                           bool in_place);
/// The same on a selector (the simulator's, core/choose.hpp).
AlgorithmChoice select_algorithm(Selector& selector, const Layout& layout, const Options& options,
                                 bool in_place, bool engine = false);

/// What select_algorithm checks without a communicator: the option, then AGX_ALGO, with
/// parameters checked and defaults filled in; `automatic` where the selector chooses. A
/// forced point-to-point algorithm that cannot serve `nranks` ranks is an agx::Error too
/// (MPI_ERR_ARG). For calls on a communicator agx has not set up (api/library_call.hpp).
AlgorithmChoice forced_choice(const Options& options, int nranks);

}  // namespace agx
