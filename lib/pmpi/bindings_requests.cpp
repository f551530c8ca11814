// The C entry points of persistent all-gathers and of request completion.
//
// MPI_Allgather_init / MPI_Allgatherv_init exist from MPI-4 (MPICH 4); Open MPI 4.1
// offers them as MPIX_Allgather_init / MPIX_Allgatherv_init (mpi-ext.h, "pcollreq").
// Whichever the MPI library declares is replaced. An initialization call must not
// wait for the other ranks: on a communicator agx has not set up yet (no blocking
// all-gather on it so far) Open MPI's MPIX_ calls go to Open MPI; MPICH 4.0.2's own
// persistent all-gathers do not work (test/pmpi/nonblocking_c.c), so there agx sets
// the communicator up inside MPI_Allgather(v)_init, collectively.
//
// MPI_Wait, MPI_Test, their all/any/some forms and MPI_Request_get_status advance
// agx's running requests (pending.hpp) before they look at the user's; a wait then
// becomes test-and-advance in a loop (spinning briefly, then yielding the core, so
// that oversubscribed ranks do not starve each other). With no agx request running
// they are the MPI library's calls, untouched. MPI_Start(all) and MPI_Request_free
// recognise agx's persistent requests and hand all others to the MPI library.

#include "pmpi/bindings.hpp"
#include "pmpi/pending.hpp"

#include <sched.h>

#include <vector>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace agx::pmpi {
namespace {

/// Loops `test(flag)` (an MPI_Test-like call) until it sets `flag` or fails,
/// advancing agx's requests before each test; once no agx request runs any more,
/// finishes with `block()` (the MPI library's own wait).
template <class Test, class Block>
int wait_with_progress(Test test, Block block) {
  for (int round = 0; must_progress(); ++round) {
    progress_requests();
    int flag = 0;
    const int rc = test(flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (round >= 64) sched_yield();  // spin briefly, then give the core away
  }
  return block();
}

int with_request_error(int rc, MPI_Request request) {
  const int error = request_error(request);
  return rc == MPI_SUCCESS ? error : rc;
}

/// The handles a multiple-completion call is given, kept while agx requests run or
/// failed ones wait to be reported (the call sets completed ones to MPI_REQUEST_NULL).
struct Handles {
  Handles(int count, const MPI_Request* requests) {
    if (count > 0 && requests != nullptr &&
        (must_progress() || errors_pending() || persistent_requests()))
      copy.assign(requests, requests + count);
  }
  /// The agx request at `i` was completed by the call: a persistent one becomes
  /// inactive; a failed one is reported in `statuses[j]`.
  void report(int i, int j, MPI_Status* statuses, bool ignore, int& rc) const {
    if (copy.empty() || i < 0 || static_cast<std::size_t>(i) >= copy.size()) return;
    note_completed(copy[static_cast<std::size_t>(i)]);
    const int error = request_error(copy[static_cast<std::size_t>(i)]);
    if (error == MPI_SUCCESS) return;
    if (!ignore) statuses[j].MPI_ERROR = error;
    if (rc == MPI_SUCCESS) rc = MPI_ERR_IN_STATUS;
  }
  std::vector<MPI_Request> copy;
};

int allgather_init(const char* function, const void* sendbuf, int sendcount,
                   MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request* request) noexcept {
  return init_persistent(plain_call(function, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                    recvtype, comm),
                         request);
}

int allgatherv_init(const char* function, const void* sendbuf, int sendcount,
                    MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request) noexcept {
  return init_persistent(varying_call(function, sendbuf, sendcount, sendtype, recvbuf,
                                      recvcounts, displs, recvtype, comm),
                         request);
}

}  // namespace
}  // namespace agx::pmpi

using agx::pmpi::agx_serves;
using agx::pmpi::must_progress;
using agx::pmpi::progress_requests;
using agx::pmpi::wait_with_progress;

extern "C" {

#if MPI_VERSION >= 4
int MPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  if (!agx_serves(comm, "MPI_Allgather_init"))
    return PMPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               info, request);
  return agx::pmpi::allgather_init("MPI_Allgather_init", sendbuf, sendcount, sendtype, recvbuf,
                                   recvcount, recvtype, comm, request);
}

int MPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!agx_serves(comm, "MPI_Allgatherv_init"))
    return PMPI_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                recvtype, comm, info, request);
  return agx::pmpi::allgatherv_init("MPI_Allgatherv_init", sendbuf, sendcount, sendtype, recvbuf,
                                    recvcounts, displs, recvtype, comm, request);
}
#endif

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
int MPIX_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                        MPI_Request* request) {
  if (!agx_serves(comm, "MPIX_Allgather_init") ||
      !agx::pmpi::ready_for_nonblocking(comm, "MPIX_Allgather_init"))
    return PMPIX_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                info, request);
  return agx::pmpi::allgather_init("MPIX_Allgather_init", sendbuf, sendcount, sendtype, recvbuf,
                                   recvcount, recvtype, comm, request);
}

int MPIX_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                         MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!agx_serves(comm, "MPIX_Allgatherv_init") ||
      !agx::pmpi::ready_for_nonblocking(comm, "MPIX_Allgatherv_init"))
    return PMPIX_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                 recvtype, comm, info, request);
  return agx::pmpi::allgatherv_init("MPIX_Allgatherv_init", sendbuf, sendcount, sendtype,
                                    recvbuf, recvcounts, displs, recvtype, comm, request);
}
#endif

int MPI_Start(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  if (agx::pmpi::start_if_persistent(request, &rc)) return rc;
  return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[]) {
  if (count < 0 || requests == nullptr) return PMPI_Startall(count, requests);
  for (int i = 0; i < count; ++i) {  // one by one: agx's and the MPI library's may mix
    int rc = MPI_SUCCESS;
    if (!agx::pmpi::start_if_persistent(&requests[i], &rc)) rc = PMPI_Start(&requests[i]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  if (agx::pmpi::free_if_persistent(request, &rc)) return rc;
  if (agx::pmpi::free_if_running(request)) return MPI_SUCCESS;
  if (request != nullptr && agx::pmpi::errors_pending()) agx::pmpi::forget_error(*request);
  return PMPI_Request_free(request);
}

int MPI_Cancel(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  if (request != nullptr && agx::pmpi::cancel_refused(*request, &rc)) return rc;
  return PMPI_Cancel(request);
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  const MPI_Request handle = request != nullptr ? *request : MPI_REQUEST_NULL;
  const int rc = must_progress()
                     ? wait_with_progress([&](int& flag) { return PMPI_Test(request, &flag, status); },
                                          [&] { return PMPI_Wait(request, status); })
                     : PMPI_Wait(request, status);
  agx::pmpi::note_completed(handle);
  return agx::pmpi::with_request_error(rc, handle);
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const MPI_Request handle = request != nullptr ? *request : MPI_REQUEST_NULL;
  if (must_progress()) progress_requests();
  const int rc = PMPI_Test(request, flag, status);
  if (flag == nullptr || !*flag) return rc;
  agx::pmpi::note_completed(handle);
  return agx::pmpi::with_request_error(rc, handle);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  const agx::pmpi::Handles handles(count, requests);
  int rc = must_progress() ? wait_with_progress(
                                 [&](int& flag) {
                                   return PMPI_Testall(count, requests, &flag, statuses);
                                 },
                                 [&] { return PMPI_Waitall(count, requests, statuses); })
                           : PMPI_Waitall(count, requests, statuses);
  for (int i = 0; i < count; ++i)
    handles.report(i, i, statuses, statuses == MPI_STATUSES_IGNORE, rc);
  return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  const agx::pmpi::Handles handles(count, requests);
  if (must_progress()) progress_requests();
  int rc = PMPI_Testall(count, requests, flag, statuses);
  for (int i = 0; flag != nullptr && *flag && i < count; ++i)
    handles.report(i, i, statuses, statuses == MPI_STATUSES_IGNORE, rc);
  return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  const agx::pmpi::Handles handles(count, requests);
  int rc = must_progress()
               ? wait_with_progress(
                     [&](int& flag) { return PMPI_Testany(count, requests, index, &flag, status); },
                     [&] { return PMPI_Waitany(count, requests, index, status); })
               : PMPI_Waitany(count, requests, index, status);
  if (index != nullptr && *index != MPI_UNDEFINED) {
    int error = MPI_SUCCESS;
    handles.report(*index, 0, status, true, error);
    if (error != MPI_SUCCESS && rc == MPI_SUCCESS) rc = error;
  }
  return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  const agx::pmpi::Handles handles(count, requests);
  if (must_progress()) progress_requests();
  int rc = PMPI_Testany(count, requests, index, flag, status);
  if (flag != nullptr && *flag && index != nullptr && *index != MPI_UNDEFINED) {
    int error = MPI_SUCCESS;
    handles.report(*index, 0, status, true, error);
    if (error != MPI_SUCCESS && rc == MPI_SUCCESS) rc = error;
  }
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const agx::pmpi::Handles handles(incount, requests);
  int rc = must_progress()
               ? wait_with_progress(
                     [&](int& flag) {
                       const int r = PMPI_Testsome(incount, requests, outcount, indices, statuses);
                       flag = outcount != nullptr && *outcount != 0;  // MPI_UNDEFINED: none active
                       return r;
                     },
                     [&] { return PMPI_Waitsome(incount, requests, outcount, indices, statuses); })
               : PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  for (int j = 0; outcount != nullptr && *outcount != MPI_UNDEFINED && j < *outcount; ++j)
    handles.report(indices[j], j, statuses, statuses == MPI_STATUSES_IGNORE, rc);
  return rc;
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const agx::pmpi::Handles handles(incount, requests);
  if (must_progress()) progress_requests();
  int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  for (int j = 0; outcount != nullptr && *outcount != MPI_UNDEFINED && j < *outcount; ++j)
    handles.report(indices[j], j, statuses, statuses == MPI_STATUSES_IGNORE, rc);
  return rc;
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (must_progress()) progress_requests();
  return PMPI_Request_get_status(request, flag, status);
}

}  // extern "C"
