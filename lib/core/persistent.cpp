// Persistent all-gather (agx::Plan): everything but the data movement is done once.
//
// At planning: the algorithm is chosen, the schedule planned, the communicator
// duplicated (the plan's messages can never match another call's, whatever runs at the
// same time), and the round engine (executor.hpp) made persistent on it: its post loop
// runs once, cutting every transfer into messages (the context's compiled descriptors,
// descriptors.hpp, shared with the blocking calls of the same shape and held by the
// plan; planned with their own hindexed datatypes when the cache is off) and making one
// MPI persistent request (MPI_Send_init/MPI_Recv_init) per message, grouped by round.
// A start copies the own block into place and MPI_Startall's round 0; test() completes
// a round and starts the next one. One tag (0) serves every round and start: MPI's
// non-overtaking order between a pair of ranks matches the pieces in schedule order.
// Device buffers and the node paths are lib/api's dispatch (api/dispatch.cpp): a plan
// of those paths makes no PersistentRounds.
// The engine's checks are the plan's (docs/reliability.md): receive sizes
// (MPI_ERR_TRUNCATE), AGX_INTEGRITY's persistent checksum message after each transfer's
// data pieces, AGX_TIMEOUT's polling and diagnosis. A failed start or test abandons the
// running round and leaves the plan failed: later starts throw MPI_ERR_REQUEST, the
// destructor frees the rest but keeps the communicator allocated (free_comm in
// core/executor.hpp).

#include "core/persistent.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/integrity.hpp"
#include "core/mpi_check.hpp"

namespace agx::detail {

PersistentRounds::PersistentRounds(CommContext& ctx, const AlgorithmChoice& a,
                                   const Buffers& buffers, const Layout& layout)
    : comm_state_(ctx.share()) {
  const Schedule& schedule = ctx.schedule(a);
  const std::size_t max_bytes = config().max_message_bytes;
  check_mpi(MPI_Comm_dup(comm_state_->comm(), &comm_), "MPI_Comm_dup");
  try {
    execution_.emplace(schedule, buffers, layout, comm_, 0, max_bytes, Checks::of(a.id));
    execution_->make_persistent(
        comm_state_->compiled(schedule, layout, buffers.in_place, max_bytes));
  } catch (...) {
    execution_.reset();
    free_comm(comm_);
    throw;
  }
}

PersistentRounds::~PersistentRounds() {
  execution_.reset();  // frees the requests and datatypes
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) free_comm(comm_);  // kept allocated after a failed start (executor.hpp)
}

void PersistentRounds::check_usable() const {
  if (execution_->failed())
    throw Error(MPI_ERR_REQUEST,
                "agx: start() on a plan whose earlier start failed; make a new plan");
}

void PersistentRounds::start() {
  check_usable();
  execution_->start();
}

}  // namespace agx::detail
