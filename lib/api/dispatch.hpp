#pragma once
// The paths of a call, above lib/core, lib/hier and lib/cuda (which know nothing of each
// other's paths; docs/algorithms.md, "Layering"). What runs is core/choose.hpp's choice,
// made here from what the communicator knows (choose_call); it names the algorithm and
// its path, and every entry point runs it the same way:
//
//   device      where some rank sees a GPU, lib/cuda settles the call first (the ranks
//               agree on memory kinds) and runs device buffers on its own path
//   own_copy    one rank: the own block's copy
//   direct write, then   a blocking `auto` call on one node with blocks of direct
//                        write's size tries it first (hier/direct_write.hpp)
//   node        shared_memory, hierarchical: the node schedule (core/planners/node_planner.cpp)
//               on lib/core's round engine with lib/hier's segment; a blocking call runs
//               it to the end on this thread (hier/node_call.hpp, run_node_schedule: on
//               one node its copies staged, in the flag lines or by single copy; where
//               every receive buffer is agx's memory, a direct write instead), a
//               nonblocking or persistent one is advanced by test()
//   point_to_point  lib/core's round engine: an Execution per call, or a plan's, made
//               persistent once (core/persistent.hpp)

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include "core/choose.hpp"
#include "core/comm_context.hpp"
#include "core/executor.hpp"
#include "core/persistent.hpp"
#include "cuda/device_path.hpp"
#include "hier/hier.hpp"

#include <optional>

namespace agx {

/// The choice for a call on ctx's communicator (core/choose.hpp) with the facts the
/// communicator holds. A call that is not a query and that the first-call rule defers
/// marks the communicator, so that the next such call makes the node state. The same
/// on every rank: collective calls come in the same order everywhere.
CallChoice choose_call(CommContext& ctx, const Layout& layout, const Options& options,
                       bool in_place, CallKind kind);

/// Runs a blocking call as `c` says, on checked buffers and layout (also the repeated
/// calls of the entry points and the interposer, which keep a shape's choice). Returns
/// the algorithm that ran: direct write runs as shared_memory, and device buffers may
/// run another (lib/cuda).
Algorithm run_blocking(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                       const Layout& layout);

/// A blocking call on `comm`: checks, set-up on first use, choice and run (the body of
/// agx::allgather_bytes). `choice`, where given, receives what was chosen.
Algorithm blocking_call(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                        const Options& options, CallChoice* choice = nullptr);

/// One start of a nonblocking or persistent call on its path, advanced by test().
class StartedCall {
 public:
  /// Starts `c`. `rounds`: a plan's persistent engine (point-to-point algorithms; null
  /// for a single call, whose schedule runs in a new Execution with its own tag).
  /// `ctx`, `layout` and `rounds` must outlive the StartedCall (the operation owns them).
  StartedCall(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
              const Layout& layout, detail::PersistentRounds* rounds);
  StartedCall(const StartedCall&) = delete;
  StartedCall& operator=(const StartedCall&) = delete;

  /// Advances without blocking; true once the call is complete on this rank.
  bool test();

 private:
  void start_host();

  CommContext& ctx_;
  CallChoice choice_;
  Buffers buffers_;
  const Layout& layout_;
  hier::NodeCallPtr node_;
  std::optional<Execution> execution_;
  detail::PersistentRounds* rounds_ = nullptr;
  std::optional<cuda::DeviceCall> device_;  // destroyed first: it may run a path on buffers_
};

}  // namespace agx
