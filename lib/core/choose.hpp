#pragma once
// The one chooser (docs/algorithms.md, "Choosing what runs"): what runs a call -- the
// algorithm, its parameters and the path -- for blocking, nonblocking, persistent,
// device and simulated calls alike. Pure, no MPI: the caller states the call's facts.
// lib/api/dispatch.cpp (choose_call) gathers them for a communicator and runs the
// choice (run_blocking, StartedCall); tools/sim states them for a simulated one.
//
//   1. the algorithm: Options::algorithm, then AGX_ALGO, then the selector (`auto`:
//      the tuning file's measured winner, else the model's argmin; select.hpp)
//   2. the path:
//      own_copy         one rank: the own block's copy, whatever the algorithm
//      node             shared_memory, hierarchical: the node schedule on the round
//                       engine, through the node's segment (lib/hier)
//      point_to_point   every other algorithm: its schedule of messages on the engine
//   3. the first-call rule: the first `auto` call on a communicator whose choice is a
//      node path, blocking or nonblocking, runs the best point-to-point algorithm
//      instead (`deferred`), so that a communicator used once never makes the node's
//      segment; the next call makes it. A persistent plan keeps its node path. A
//      caller that runs messages only (encoded phases, fused decisions before the
//      node's set-up) gets the same swap, forced node paths included.
//   4. direct write: a blocking `auto` call on one node whose mean block is of direct
//      write's size first tries writing straight into the peers' receive buffers
//      (lib/hier/direct_write.hpp; one flag round decides, the same on every rank); where
//      the buffers are not all shared the call runs `path`. A shared_memory choice tries
//      it inside its node path (the same round), so only other algorithms are marked.
//   5. device buffers: where some rank sees a GPU (`device`), lib/cuda settles the call
//      first (the ranks agree on memory kinds) and runs device buffers on its own
//      staged, IPC or CUDA-aware path with this algorithm; host buffers take `path`.
//   6. the rival: a blocking automatic call (or a query of one) on one node whose mean block is at least
//      AlgorithmTrials::min_bytes, whose choice the model made (no measured winner of a
//      tuning file) and that is neither deferred nor on a GPU node, names the rival of
//      its choice (the best point-to-point algorithm for the node path, shared_memory
//      for a point-to-point one); the blocking path times both on the first calls of
//      each size and keeps the rival only where it was faster (core/algorithm_trials.hpp).
//      A trial's first call runs the choice, so a communicator used once never makes
//      the node's segment for a rival either.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/options.hpp>

namespace agx {

class Selector;

/// Which entry point asks.
enum class CallKind : unsigned char {
  blocking,     ///< runs now
  nonblocking,  ///< started, advanced by test()
  persistent,   ///< a plan, started many times
  query,        ///< only asked what would run (agx::choose_algorithm, agx-info)
};

/// How the chosen algorithm runs.
enum class CallPath : unsigned char { own_copy, point_to_point, node };

/// The facts of a call the choice reads besides its layout and options.
struct CallFacts {
  CallKind kind = CallKind::blocking;
  bool in_place = false;
  /// The communicator's node set-up has begun, or a first call was already deferred
  /// (the first-call rule applies only before that).
  bool node_begun = true;
  /// Some rank of the communicator sees a GPU (lib/cuda settles every call).
  bool device = false;
  /// Direct write is enabled and the call's mean block is of its size, and no
  /// end-to-end check (AGX_INTEGRITY, AGX_TEST_FLIP) is asked for the node path.
  bool direct_write_size = false;
  /// The caller runs schedules of messages only (an encoded call's phases; a fused
  /// decision while the node is not set up): a node-path choice, forced or not, becomes
  /// the best point-to-point algorithm (`deferred`), as under the first-call rule.
  bool messages_only = false;
};

/// What runs a call.
struct CallChoice {
  AlgorithmChoice algorithm;
  CallPath path = CallPath::point_to_point;
  bool deferred = false;          ///< the first-call rule swapped a node path (3. above)
  bool try_direct_write = false;  ///< try direct write first (4. above)
  bool device = false;            ///< lib/cuda settles the call first (5. above)
  /// The rival that trials time against this choice (6. above); `rival.algorithm.id`
  /// automatic: none.
  struct Rival {
    AlgorithmChoice algorithm{Algorithm::automatic, 0};
    CallPath path = CallPath::point_to_point;
    bool try_direct_write = false;
  } rival;
};

/// The rival of `c` as a choice of its own (its algorithm, path and direct write).
CallChoice rival_choice(const CallChoice& c);
/// Which of `c` (0) and its rival (1) is the node path (AlgorithmTrials::pick's node_way).
inline int node_way(const CallChoice& c) { return c.path == CallPath::node ? 0 : 1; }

/// The mean block of a call, in bytes (what size classes are made of).
std::size_t mean_block(const Layout& layout);

/// Whether `a` runs through a node's shared segment (shared_memory, hierarchical): a
/// registered algorithm that is not a schedule of messages (the registry says which).
bool is_node_path(Algorithm a);

/// The choice for a call of `layout` with `options` on the communicator `selector`
/// serves. Errors (agx::Error, MPI_ERR_ARG): a bad radix or AGX_ALGO, a forced
/// algorithm that cannot serve the call. The same on every rank where the facts are.
CallChoice choose(Selector& selector, const Layout& layout, const Options& options,
                  const CallFacts& facts);

/// Whether `options` leave the choice to agx (no forced algorithm, nor AGX_ALGO where
/// the environment counts).
bool is_automatic(const Options& options);

}  // namespace agx
