#pragma once
// The request Fortran's MPI_IALLGATHER(V) returns. Those run to completion inside
// the call (Fortran's MPI_WAIT calls PMPI_Wait, which never advances agx; see
// docs/interposer.md, "Nonblocking and persistent calls"), so the request is a
// generalized request that is already complete: MPI_Wait, MPI_Test,
// MPI_Waitall, MPI_Testall, ... and MPI_Request_free all treat it as MPI defines.

#include <mpi.h>

namespace agx::pmpi {

/// Starts and completes a generalized request; throws agx::Error on failure.
void make_done_request(MPI_Request* request);

}  // namespace agx::pmpi
