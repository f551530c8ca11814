// agx-info: what agx sees of the machine and the job, as every rank reports it.
//
//   mpirun -np 4 agx-info [--call BYTES]
//
// Prints, per node (from its first rank): the nodes and their ranks (after any
// virtual-node setting), the machine as hwloc sees it (packages, NUMA domains,
// cores, caches), each local rank's binding and last core, the leaders, whether
// single copy works, and the state of the shared-memory segment. With --call, one
// hierarchical all-gather of BYTES per rank runs first, so the segment shows in use.

#include <agx/agx.hpp>

#include "hier/hier.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::size_t call_bytes = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--call") call_bytes = std::strtoull(argv[i + 1], nullptr, 10);
  int rc = 0;
  try {
    if (call_bytes > 0) {
      std::vector<std::byte> send(call_bytes), recv(call_bytes * static_cast<std::size_t>(n));
      agx::allgather_bytes(MPI_COMM_WORLD, {send.data(), recv.data(), false},
                           agx::Layout::uniform(n, call_bytes), agx::Options{agx::Algorithm::hierarchical});
    }
    std::string text = agx::hier::describe(MPI_COMM_WORLD);
    // Only the first rank of each node reports; rank 0 prints everything in rank order.
    if (text.find("(local 0 of") == std::string::npos) text.clear();
    const int len = static_cast<int>(text.size());
    std::vector<int> lens(static_cast<std::size_t>(n)), displs(lens.size());
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int i = 0; i < n; ++i) { displs[static_cast<std::size_t>(i)] = total; total += lens[static_cast<std::size_t>(i)]; }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) std::fputs(all.c_str(), stdout);
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "agx-info (rank %d): %s\n", rank, e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
