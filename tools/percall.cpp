// agx-percall: the program scripts/percall.sh counts instructions in under callgrind.
//   agx-percall <bytes per rank> <calls> <path> [time]    path: mpi (MPI_Allgather: the
//   MPI library's own, or the interposer's when it is preloaded) or cxx (agx::Allgather)
// It makes 50 untimed calls (set-up, the deferred first call, the segment), then zeroes
// callgrind's counts, makes <calls> calls and dumps them: the dump holds only repeated
// calls of one shape, whatever the set-up's collectives spun.
// With `time` (run without valgrind) it then times 9 batches of <calls> calls and
// prints rank 0's median nanoseconds per call: on one rank, where the call moves only
// the own block, the difference between the interposer and the C++ API is the
// interposer's own per-call cost.
#include <agx/agx.hpp>
#include <mpi.h>
#include <valgrind/callgrind.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4 && !(argc == 5 && std::string_view(argv[4]) == "time")) {
    std::fprintf(stderr, "usage: agx-percall <bytes per rank> <calls> mpi|cxx [time]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int m = std::atoi(argv[1]), calls = std::atoi(argv[2]);
  const bool cxx = std::string_view(argv[3]) == "cxx";
  std::vector<std::uint8_t> send(static_cast<std::size_t>(m), 1),
      recv(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
  const agx::Allgather<std::uint8_t> gather(MPI_COMM_WORLD);
  const auto call = [&] {
    if (cxx) gather(std::span<const std::uint8_t>(send), std::span<std::uint8_t>(recv));
    else MPI_Allgather(send.data(), m, MPI_BYTE, recv.data(), m, MPI_BYTE, MPI_COMM_WORLD);
  };
  for (int i = 0; i < 50; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < calls; ++i) call();
  CALLGRIND_DUMP_STATS;
  if (argc == 5) {
    std::vector<double> ns;
    for (int batch = 0; batch < 9; ++batch) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < calls; ++i) call();
      ns.push_back((MPI_Wtime() - t0) * 1e9 / calls);
    }
    std::sort(ns.begin(), ns.end());
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::printf("%.1f\n", ns[ns.size() / 2]);
  }
  MPI_Finalize();
  return 0;
}
