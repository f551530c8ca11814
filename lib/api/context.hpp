#pragma once
// A communicator's set-up: its context (core/comm_context.hpp) made at its first blocking
// call, plan or choose_algorithm, in as few collectives as the job allows
// (docs/hierarchy.md, "Set-up"). A nonblocking start before any of them either begins a
// set-up that waits for no rank (SetupInFlight below, where nonblocking_set_up_allowed)
// or runs as the MPI library's own call and sets nothing up (library_call.hpp).
// The blocking set-up:
//
//   1. MPI_Comm_create over the user's group: the private communicator (no user
//      attribute is copied, unlike MPI_Comm_dup)
//   2. MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) of it: this rank's shared-memory node
//   3. one allgather of a small record per rank: its node (the lowest rank of its
//      shared-memory node, found locally, and its virtual-node label), its CPU mask (so
//      every node knows the cores its ranks cover), and on rank 0 the length of its
//      tuning text
//   4. only where rank 0 has a tuning file (AGX_TUNING_FILE): one bcast of its text
//
// From those, every rank builds the placement, the tuning and the node stage (pure
// functions, the same on every rank) and so the selector, and lib/hier's node state.
// The node and leader communicators, the shared segment and the single-copy probe wait
// for the first call that runs a node schedule (hier::HierContext::prepare_node; a
// nonblocking call's set-up makes no node communicator and never blocks,
// hier/node_set_up.cpp).

#include <mpi.h>

#include <agx/bytes.hpp>

#include "core/comm_context.hpp"
#include "cuda/device_path.hpp"
#include "hier/topology.hpp"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace agx {

/// One rank's part of the set-up exchange (step 3).
struct SetupRecord {
  hier::NodeRecord node;
  std::uint64_t tuning_bytes = 0;  ///< rank 0's tuning text length (0: built-in defaults)
  cuda::SetupWord device;          ///< the communicator's device state (lib/cuda)
};

/// The context of an intra-communicator, set up on first use (collective then).
/// Throws agx::Error for null or inter-communicators.
CommContext& context(MPI_Comm user_comm);

/// The context of `user_comm` if it is set up already, else null: local, never
/// collective (a nonblocking start must not wait for the other ranks; api/library_call.hpp).
/// Throws agx::Error for null or inter-communicators, as context() does.
CommContext* existing_context(MPI_Comm user_comm);

/// A set-up begun by a nonblocking start, which must not wait for the other ranks
/// (docs/nonblocking.md, "The first call on a new communicator"). The same steps as the
/// blocking set-up, each a nonblocking collective that agx's progress tests:
///   1. MPI_Comm_idup of the user's communicator: the private communicator. It copies the
///      user's attributes, so it is used only where no attribute key with a copy
///      callback other than MPI_COMM_NULL_COPY_FN exists in the process (the interposer
///      sees every key made: nonblocking_set_up_allowed), so that no user callback runs;
///   2. MPI_Iallgather of the records on it; 3. MPI_Ibcast of rank 0's tuning text, if any.
/// Every rank begins it at the same call (the first start on the communicator: MPI
/// orders collectives), so the steps match. Calls started meanwhile wait for it and then
/// start in the order they were made (on_ready); a blocking call on the communicator, or
/// a plan, waits for it (context()). When the user frees the communicator first, the
/// context is made all the same, for the calls waiting, and attached to nothing.
class SetupInFlight {
 public:
  SetupInFlight(MPI_Comm user_comm, int rank, int size);
  ~SetupInFlight();
  SetupInFlight(const SetupInFlight&) = delete;
  SetupInFlight& operator=(const SetupInFlight&) = delete;

  /// Advances without waiting; true once the context is made (the calls waiting for it
  /// are started first, in order). Rethrows the set-up's failure.
  bool advance();
  /// `launch(context)` once the context is made, after the calls registered before it.
  void on_ready(std::function<void(CommContext&)> launch);
  /// The user's communicator was freed (its attribute's delete callback).
  void orphan();

 private:
  void step();  // one stage further, under mutex_, once its request completed
  // Recursive: MPICH frees the user's communicator (and calls orphan()) only once the
  // idup that holds it ends, which is inside advance()'s own MPI_Test.
  mutable std::recursive_mutex mutex_;
  bool testing_ = false;  // advance() is inside MPI_Test (under mutex_)
  MPI_Comm user_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int stage_ = 0;  // 0 idup, 1 records, 2 tuning, 3 done
  int rank_ = 0, size_ = 0;
  SetupRecord mine_;
  std::vector<SetupRecord> all_;
  std::string setting_, bad_setting_, tuning_own_, tuning_text_;
  std::shared_ptr<CommContext> ctx_;
  std::exception_ptr failure_;
  std::vector<std::function<void(CommContext&)>> waiting_;
  bool launching_ = false;  // advance() is starting the waiting calls
};

/// Whether a nonblocking start may set its communicator up with SetupInFlight: false
/// unless the interposer allows it (it sees every attribute key the program makes; the
/// C++ API cannot), and never under AGX_CHECK or AGX_NODE_DETECT=mpi (their steps block).
bool nonblocking_set_up_allowed();
void allow_nonblocking_set_up(bool allow);

/// The set-up in flight of `user_comm`: the one begun earlier, else (when `begin`, the
/// communicator has no context and nonblocking_set_up_allowed) a new one; else null.
/// Local: never waits for another rank.
std::shared_ptr<SetupInFlight> set_up_in_flight(MPI_Comm user_comm, bool begin);

/// The context of `comm` after the checks every byte-level call makes (layout against
/// the communicator, null buffers with bytes to move).
CommContext& checked_context(MPI_Comm comm, const Buffers& buffers, const Layout& layout);

/// Those checks for a communicator of `size` ranks on rank `rank`, without a context.
void check_call(int size, int rank, const Buffers& buffers, const Layout& layout);

/// The buffer half of those checks: no null receive buffer where any block has bytes, no
/// null send buffer where this rank's block has bytes (out of place).
void check_buffers(const Buffers& buffers, bool any_bytes, std::size_t own_bytes);

}  // namespace agx
