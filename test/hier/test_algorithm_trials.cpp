// MPI test of `auto` against its rival on one node (lib/core/algorithm_trials.hpp): for
// blocking automatic calls of 1 MiB and 2 MiB per rank (two size classes), in turn, each
// with new data checked in full, the model's choice and its rival (the best
// point-to-point algorithm against the node path) are timed on 6 calls of each class,
// after the communicator's first (which defers the node path) and the node path's own
// first 10 (its copy and wait trials), then one is kept; 64 calls after that decision
// the trials run again. Every rank must then have
// made 6 trial calls in each class, decided, timed again once, with the same slowest
// times and decision as every other rank, and every call must have run the same
// algorithm on every rank. Usage:
//   test_algorithm_trials trials   the default
//   test_algorithm_trials forced   AGX_ALGO is set: no rival, no trial

#include <agx/agx.hpp>

#include "api/context.hpp"
#include "core/algorithm_trials.hpp"
#include "core/comm_context.hpp"

#include "../mpi/pattern.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "trials";
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t sizes[] = {std::size_t{1} << 20, std::size_t{2} << 20};
  const int calls = 90;  // 1 deferred + 10 node path first + 6 trials + 1 agreeing + 64 decided + 6 trials again + 1, and more
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  unsigned salt = 1;
  int ran_differs = 0;
  for (int k = 0; k < calls; ++k)
    for (const std::size_t m : sizes) {
      std::vector<unsigned char> send(m);
      agx_test::fill(reinterpret_cast<std::byte*>(send.data()), salt, rank, m, 1);
      agx_test::Guarded recv(m * static_cast<std::size_t>(n));
      const agx::Algorithm ran =
          g(std::span<const unsigned char>(send),
            std::span<unsigned char>(reinterpret_cast<unsigned char*>(recv.data()), recv.size()));
      const std::string call = "call " + std::to_string(k) + " of " + std::to_string(m) + " B";
      long where = 0;
      if (!recv.guards_intact(where)) fail(rank, call + ": written outside the receive buffer at " + std::to_string(where));
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < m; ++i)
          if (static_cast<unsigned char>(recv.data()[static_cast<std::size_t>(r) * m + i]) !=
              agx_test::pattern(salt, r, i, 0)) {
            fail(rank, call + ": block " + std::to_string(r) + " wrong at byte " + std::to_string(i));
            r = n;
            break;
          }
      int id[2] = {static_cast<int>(ran), -static_cast<int>(ran)}, range[2] = {0, 0};
      PMPI_Allreduce(id, range, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      ran_differs += range[0] != -range[1];
      ++salt;
    }
  if (ran_differs > 0) fail(rank, std::to_string(ran_differs) + " calls ran different algorithms on different ranks");
  const agx::AlgorithmTrials& trials = agx::context(MPI_COMM_WORLD).algorithm_trials();
  for (const std::size_t m : sizes) {
    const agx::AlgorithmTrials::Class& t = trials.at(agx::AlgorithmTrials::class_of(m));
    const std::string what = std::to_string(m) + " B: " + std::to_string(t.calls) + " trial calls, decision " +
                             std::to_string(t.decided) + ", timed again " + std::to_string(t.retrials) + "x";
    if (mode == "trials" && n > 1 &&
        (t.node_calls != agx::AlgorithmTrials::node_warmup || t.calls != 6 || t.decided < 0 || t.retrials != 1))
      fail(rank, what + ", " + std::to_string(t.node_calls) +
                     " untimed calls of the node path first (expected 10 of the node path, 6, decided, timed again once)");
    if ((mode != "trials" || n == 1) && (t.calls != 0 || t.decided != -1)) fail(rank, what + " (expected none)");
    // The decision and the times it was made from are the same on every rank.
    double mine[3] = {t.slowest[0], t.slowest[1], static_cast<double>(t.decided)}, lo[3], hi[3];
    PMPI_Allreduce(mine, lo, 3, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(mine, hi, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < 3; ++i)
      if (lo[i] != hi[i]) fail(rank, what + ": the ranks decided from different times or decided differently");
    if (rank == 0)
      std::printf("test_algorithm_trials %s N=%d, %zu B: %s (slowest rank's best: %.1f us model, %.1f us rival)\n",
                  mode.c_str(), n, m, t.decided == 1 ? "rival kept" : t.decided == 0 ? "model kept" : "no trials",
                  t.slowest[0] * 1e6, t.slowest[1] * 1e6);
  }
  int worst = failures;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("test_algorithm_trials %s N=%d: %s\n", mode.c_str(), n, worst ? "FAIL" : "ok");
  MPI_Finalize();
  return worst ? 1 : 0;
}
