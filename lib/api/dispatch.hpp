#pragma once
// The one place where a call's path is decided, above lib/core, lib/hier and lib/cuda
// (which know nothing of each other's paths; docs/algorithms.md, "Layering"):
//
//   device buffers                 lib/cuda's device path, settled first (the ranks agree
//                                  on memory kinds), run whole
//   shared_memory, hierarchical    lib/hier: the node schedule (core/node_planner.cpp)
//                                  on lib/core's round engine with lib/hier's segment; a
//                                  blocking call runs it to the end on this thread
//                                  (hier/node_call.hpp, run_node_schedule: on one node its
//                                  copies staged, in the flag lines or by single copy;
//                                  where every receive buffer is agx's memory, a direct
//                                  write instead), a nonblocking or persistent one is
//                                  advanced by test()
//   every other algorithm          lib/core's round engine: an Execution per call, or a
//                                  plan's, made persistent once (core/persistent.hpp)

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include "core/comm_context.hpp"
#include "core/executor.hpp"
#include "core/persistent.hpp"
#include "cuda/device_path.hpp"
#include "hier/hier.hpp"

#include <optional>

namespace agx {

/// Runs `a` (a choice of select_algorithm for this call) on checked buffers and layout:
/// the blocking call once its algorithm is chosen (also the interposer's repeated calls,
/// pmpi/fast_call.cpp).
/// Returns the algorithm that ran (device buffers may run another, lib/cuda).
Algorithm run_selected(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                       const Layout& layout);

/// Whether `options` leave the choice to agx (no forced algorithm, nor AGX_ALGO where
/// the environment counts).
bool is_automatic(const Options& options);

/// The algorithm of a blocking call: select_algorithm's, except that the first blocking
/// call on a communicator for which `auto` picks a node path runs the best point-to-point
/// algorithm instead, so that a communicator used once never makes the node's segment
/// (its creation, mapping and probe cost many times an MPI_Comm_dup); the next such call makes it. The
/// same on every rank: blocking calls come in the same order everywhere
/// (docs/interposer.md, "The first call on a new communicator"). `mark`: the call runs
/// now (false: only asked, agx::choose_algorithm). `deferred`, where given, says whether
/// this call took the point-to-point algorithm instead.
AlgorithmChoice select_blocking(CommContext& ctx, const Layout& layout, const Options& options,
                                bool in_place, bool mark = true, bool* deferred = nullptr);

/// The algorithm of a nonblocking or persistent call: select_blocking's choice, first-call
/// rule included (a nonblocking call counts as a call; its node set-up never blocks,
/// hier/node_call.cpp). `persistent`: a plan, which keeps a node path at its first call.
AlgorithmChoice select_nonblocking(CommContext& ctx, const Layout& layout, const Options& options,
                                   bool in_place, bool persistent = false);

/// One start of a nonblocking or persistent call on its path, advanced by test().
class StartedCall {
 public:
  /// Starts `a`. `rounds`: a plan's persistent engine (point-to-point algorithms; null
  /// for a single call, whose schedule runs in a new Execution with its own tag).
  /// `ctx`, `layout` and `rounds` must outlive the StartedCall (the operation owns them).
  StartedCall(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
              const Layout& layout, detail::PersistentRounds* rounds);
  StartedCall(const StartedCall&) = delete;
  StartedCall& operator=(const StartedCall&) = delete;

  /// Advances without blocking; true once the call is complete on this rank.
  bool test();

 private:
  void start_host();

  CommContext& ctx_;
  AlgorithmChoice choice_;
  Buffers buffers_;
  const Layout& layout_;
  hier::NodeCallPtr node_;
  std::optional<Execution> execution_;
  detail::PersistentRounds* rounds_ = nullptr;
  std::optional<cuda::DeviceCall> device_;  // destroyed first: it may run a path on buffers_
};

}  // namespace agx
