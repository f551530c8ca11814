// The C entry points: MPI_Allgather, MPI_Allgatherv, MPI_Iallgather,
// MPI_Iallgatherv, the persistent MPI_Allgather(v)_init (MPI-4; Open MPI's MPIX_
// extension) and MPI_Finalize. What agx does not serve goes to the PMPI_ function
// untouched. The nonblocking and persistent calls return requests that agx
// completes (pending.hpp); the completion calls are in bindings_requests.cpp.

#include "pmpi/bindings.hpp"

#include "pmpi/call.hpp"
#include "pmpi/done_request.hpp"
#include "pmpi/fast_call.hpp"
#include "pmpi/pending.hpp"
#include "pmpi/raise.hpp"
#include "pmpi/report.hpp"

namespace agx::pmpi {
namespace {

/// Starts the call (C) or runs it to completion and hands out a complete request
/// (Fortran).
int run_nonblocking(const GatherCall& c, MPI_Request* request, bool completed) noexcept {
  if (!completed) return start_nonblocking(c, request);
  if (request == nullptr)
    return guarded(c.comm, c.function, []() -> int {
      throw Error(MPI_ERR_REQUEST, "agx: request pointer is NULL");
    });
  *request = MPI_REQUEST_NULL;
  const int rc = run_gather(c);
  if (rc != MPI_SUCCESS) return rc;
  return guarded(c.comm, c.function, [&] {
    make_done_request(request);
    return MPI_SUCCESS;
  });
}

}  // namespace

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) noexcept {
  if (int rc = 0; run_repeated(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, rc))
    return rc;
  if (!agx_serves(comm, "MPI_Allgather"))
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return run_gather(plain_call("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, comm));
}

int allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               const int recvcounts[], const int displs[], MPI_Datatype recvtype,
               MPI_Comm comm) noexcept {
  if (!agx_serves(comm, "MPI_Allgatherv"))
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm);
  return run_gather(varying_call("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                            displs, recvtype, comm));
}

int iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request,
               bool completed) noexcept {
  if (!agx_serves(comm, "MPI_Iallgather") ||
      (!completed && !ready_for_nonblocking(comm, "MPI_Iallgather")))
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           request);
  return run_nonblocking(plain_call("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm),
                         request, completed);
}

int iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                MPI_Request* request, bool completed) noexcept {
  if (!agx_serves(comm, "MPI_Iallgatherv") ||
      (!completed && !ready_for_nonblocking(comm, "MPI_Iallgatherv")))
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  return run_nonblocking(varying_call("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf,
                                 recvcounts, displs, recvtype, comm),
                         request, completed);
}

int finalize() noexcept {
  forget_shape();
  finish_requests();
  try {
    print_summary();
  } catch (...) {  // a summary must never stop MPI_Finalize
  }
  return PMPI_Finalize();
}

}  // namespace agx::pmpi

extern "C" {

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return agx::pmpi::allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  return agx::pmpi::allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                               recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return agx::pmpi::iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               request);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  return agx::pmpi::iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                recvtype, comm, request);
}

int MPI_Finalize(void) { return agx::pmpi::finalize(); }

}  // extern "C"
