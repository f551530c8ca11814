#pragma once
// The four intercepted calls as plain functions, shared by the C entry points and
// the Fortran ones (which translate handles and sentinels first).

#include <mpi.h>

namespace agx::pmpi {

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) noexcept;
int allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               const int recvcounts[], const int displs[], MPI_Datatype recvtype,
               MPI_Comm comm) noexcept;
int iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
               MPI_Request* request) noexcept;
int iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                MPI_Request* request) noexcept;
/// Prints the AGX_SUMMARY table, then PMPI_Finalize.
int finalize() noexcept;

}  // namespace agx::pmpi
