#pragma once
// A communicator's set-up: its context (core/comm_context.hpp) made at its first blocking
// call, plan or choose_algorithm (a nonblocking start before any of them runs as the MPI
// library's own call and sets nothing up: library_call.hpp), in as few collectives as
// the job allows (docs/hierarchy.md, "Set-up"):
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

/// The context of `comm` after the checks every byte-level call makes (layout against
/// the communicator, null buffers with bytes to move).
CommContext& checked_context(MPI_Comm comm, const Buffers& buffers, const Layout& layout);

/// Those checks for a communicator of `size` ranks on rank `rank`, without a context.
void check_call(int size, int rank, const Buffers& buffers, const Layout& layout);

/// The buffer half of those checks: no null receive buffer where any block has bytes, no
/// null send buffer where this rank's block has bytes (out of place).
void check_buffers(const Buffers& buffers, bool any_bytes, std::size_t own_bytes);

}  // namespace agx
