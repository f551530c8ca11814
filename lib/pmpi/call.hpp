#pragma once
// One intercepted all-gather, C or Fortran, blocking or not: decides whether agx
// takes it, checks it as MPI would, turns datatypes into byte layouts (packing
// what is not contiguous), picks the algorithm and runs libagx.

#include <mpi.h>

namespace agx::pmpi {

/// The arguments of MPI_Allgather (recvcount) or MPI_Allgatherv (recvcounts, displs).
struct GatherCall {
  const char* function = "MPI_Allgather";
  const void* sendbuf = nullptr;
  int sendcount = 0;
  MPI_Datatype sendtype = MPI_DATATYPE_NULL;
  void* recvbuf = nullptr;
  MPI_Datatype recvtype = MPI_DATATYPE_NULL;
  int recvcount = 0;                ///< MPI_Allgather
  bool is_v = false;                ///< MPI_Allgatherv: recvcounts and displs below
  const int* recvcounts = nullptr;
  const int* displs = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
};

/// Whether agx serves `function` on `comm`: AGX_DISABLE unset, MPI initialized and
/// not finalized, and `comm` a valid intra-communicator. The answer is the same on
/// every rank of `comm`, so all of them take the same path. Counts and (with
/// AGX_VERBOSE) reports the calls it declines.
bool agx_serves(MPI_Comm comm, const char* function);

/// Runs a call agx serves. Returns MPI_SUCCESS or an MPI error class that has
/// already gone through the communicator's error handler. Never throws.
int run_gather(const GatherCall& call) noexcept;

}  // namespace agx::pmpi
