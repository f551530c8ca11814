#pragma once
// The request MPI_Iallgather(v) returns. The interposer runs the collective to
// completion inside the call (docs/interposer.md, "Nonblocking calls"), so the
// request is a generalized request that is already complete: MPI_Wait, MPI_Test,
// MPI_Waitall, MPI_Testall, ... and MPI_Request_free all treat it as MPI defines.

#include <mpi.h>

namespace agx::pmpi {

/// Starts and completes a generalized request; throws agx::Error on failure.
void make_done_request(MPI_Request* request);

}  // namespace agx::pmpi
