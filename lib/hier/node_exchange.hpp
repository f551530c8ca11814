#pragma once
// The two exchanges a node makes while it sets up a shared segment (shm_segment.hpp):
// a record from local rank 0 to every local rank, then the maximum of one int over the
// node. Both run without blocking: start one, then test() until it is complete.
//
// Two transports: the node communicator's nonblocking collectives (MPI_Ibcast,
// MPI_Iallreduce), which blocking calls use, and point-to-point messages among the
// node's members on the communicator itself with one tag, which the round engine's
// calls use: those need no node communicator, whose making (MPI_Comm_split) would block
// on every rank of the communicator (docs/hierarchy.md, "Set-up").

#include <mpi.h>

#include <memory>
#include <vector>

namespace agx::hier {

class NodeExchange {
 public:
  virtual ~NodeExchange() = default;
  /// This rank's index among the node's ranks (0 makes the segment).
  virtual int local() const = 0;
  /// Local rank 0's `bytes` at `data` to every local rank's `data`.
  virtual void start_bcast(void* data, int bytes) = 0;
  /// The maximum of every local rank's `*in` into `*out` (both stay valid until complete).
  virtual void start_max(const int* in, int* out) = 0;
  /// Advances the exchange in flight; true once it is complete on this rank.
  virtual bool test() = 0;
  /// Blocks until the exchange in flight is complete on this rank.
  virtual void wait() = 0;
};

/// Collectives on `node_comm` (not owned).
std::unique_ptr<NodeExchange> collective_exchange(MPI_Comm node_comm);
/// Point-to-point on `comm` among `members` (its ranks of this node, local rank order),
/// `local` being this rank's index in it; every message carries `tag`.
std::unique_ptr<NodeExchange> p2p_exchange(MPI_Comm comm, std::vector<int> members, int local,
                                           int tag);

}  // namespace agx::hier
