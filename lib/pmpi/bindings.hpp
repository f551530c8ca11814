#pragma once
// The intercepted all-gathers as plain functions, shared by the C entry points and
// the Fortran ones (which translate handles and sentinels first). The nonblocking
// ones return a running request (C) or run to completion first (`completed`, for
// Fortran: its MPI_WAIT calls PMPI_Wait, which would never advance agx).

#include <mpi.h>

namespace agx::pmpi {

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) noexcept;
int allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               const int recvcounts[], const int displs[], MPI_Datatype recvtype,
               MPI_Comm comm) noexcept;
int iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request,
               bool completed = false) noexcept;
int iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                MPI_Request* request, bool completed = false) noexcept;
/// Prints the AGX_SUMMARY table, then PMPI_Finalize.
int finalize() noexcept;

}  // namespace agx::pmpi
