// The simulator's progress model for lib's round engine (core/executor.hpp).
//
// The engine waits for a schedule with node operations by calling test() until it is done,
// and test() polls the round's requests with MPI_Testall. Under SMPI a failed MPI_Test
// sleeps 100 us of simulated time or more (smpi/test, growing with each failure: it keeps a
// polling loop from stalling the simulated clock), which would charge every such round
// for the polls, not for its messages. This definition replaces SMPI's weak MPI_Testall in
// agx-sim only: it returns when every request is complete, as MPI_Waitall. That is an ideal
// poller (it sees each completion at the instant it happens, for no CPU time), and since
// the simulator's node operations (sim_node.hpp) complete before test() reaches its
// MPI_Testall, the engine's test() runs exactly as a blocking round loop would.
// Point-to-point schedules never call it (their wait() is MPI_Waitall).

#include <mpi.h>

extern "C" int MPI_Testall(int count, MPI_Request* requests, int* flag, MPI_Status* statuses) {
  const int rc = PMPI_Waitall(count, requests, statuses);
  *flag = 1;
  return rc;
}

// lib's progress engine (core/nonblocking_progress.cpp) is not compiled into agx-sim: the
// driver runs one blocking call at a time, so a blocking call's wait (the AGX_INTEGRITY
// exchange, core/integrity.cpp) has no other agx operation to advance.
namespace agx::detail {
int progress_all() noexcept { return 0; }
}  // namespace agx::detail
