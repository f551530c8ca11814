// MPI test of the choice between staged and single copy by timing the first calls of
// each size class (lib/hier/copy_choice.hpp), and on an oversubscribed node of the
// choice between yielding and sleeping (lib/hier/wait_choice.hpp) that runs beside it.
//
// On one communicator: 12 blocking shared_memory calls of each of 8 KiB, 16 KiB, 64 KiB,
// 256 KiB and 1 MiB per rank, in turn (so the classes' trials interleave), each with new data that
// is checked in full. Then every rank must have decided every class, and the same way
// as every other rank (gathered with PMPI_Allgather), its staged and single-copy call
// counts must add up to the calls made, and no call may have taken the other copies
// than the rank's peers (the counts are equal everywhere). Where the node is
// oversubscribed with AGX_WAIT=auto, every size's wait class must likewise have made its
// 8 trial calls and decided, the same way on every rank; elsewhere (a core per rank,
// AGX_WAIT=yield or sleep) no wait trial may have run. Usage:
//   test_copy_choice trials     the default: every class decided after its trials
//   test_copy_choice forced     AGX_CMA_MIN_BYTES is set: no trials, nothing decided
//   test_copy_choice staged     AGX_CMA=0: no trials, every call staged
//   test_copy_choice retrial    1100 calls of 8 KiB and 64 KiB each, in turn: 256 calls
//                               after its decision each copy class times both ways
//                               again, 1024 calls after it each wait class (trials.hpp,
//                               TrialPlan::retrial_after), the same way on every rank;
//                               the data of every call checked

#include <agx/agx.hpp>

#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "hier/copy_choice.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  ++failures;
}

unsigned char pattern(unsigned salt, int rank, std::size_t i) {
  return static_cast<unsigned char>(salt * 131u + static_cast<unsigned>(rank) * 17u + i * 7u + (i >> 12));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "trials";
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const bool retrial = mode == "retrial";
  std::vector<std::size_t> sizes{8 * 1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024};
  if (retrial) sizes = {8 * 1024, 64 * 1024};
  const std::size_t nsizes = sizes.size();
  const int calls = retrial ? 1100 : 12;
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD, {agx::Algorithm::shared_memory});
  unsigned salt = 1;
  for (int k = 0; k < calls; ++k)
    for (const std::size_t m : sizes) {
      std::vector<unsigned char> send(m), recv(m * static_cast<std::size_t>(n), 0);
      for (std::size_t i = 0; i < m; ++i) send[i] = pattern(salt, rank, i);
      g(std::span<const unsigned char>(send), std::span<unsigned char>(recv));
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < m; ++i)
          if (recv[static_cast<std::size_t>(r) * m + i] != pattern(salt, r, i)) {
            fail(rank, "call " + std::to_string(k) + " of " + std::to_string(m) + " B: block " +
                           std::to_string(r) + " wrong at byte " + std::to_string(i));
            r = n;
            break;
          }
      ++salt;
    }
  agx::hier::HierContext& h = agx::hier::hier_context(agx::context(MPI_COMM_WORLD));
  // What this rank saw, per size: trial calls, the decision; then its call counts.
  std::vector<long> mine;
  for (const std::size_t m : sizes) {
    const int c = agx::hier::copy_class_of(m);
    const agx::hier::CopyTrials& t = h.copy_trials[static_cast<std::size_t>(c)];
    mine.push_back(t.calls);
    mine.push_back(t.decided);
    mine.push_back(t.retrials);
  }
  for (const std::size_t m : sizes) {
    const agx::hier::TimedTrials& w = h.wait_trials[static_cast<std::size_t>(agx::hier::wait_class_of(m))];
    mine.push_back(w.calls);
    mine.push_back(w.decided);
    mine.push_back(w.retrials);
  }
  mine.push_back(static_cast<long>(h.staged_calls));
  mine.push_back(static_cast<long>(h.single_copy_calls));
  std::vector<long> all(mine.size() * static_cast<std::size_t>(n));
  PMPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_LONG, all.data(),
                 static_cast<int>(mine.size()), MPI_LONG, MPI_COMM_WORLD);
  for (int r = 1; r < n; ++r)
    if (!std::equal(mine.begin(), mine.end(), all.begin() + static_cast<long>(r * mine.size())))
      fail(rank, "rank " + std::to_string(r) + " saw other trials, decisions or call counts than rank 0");
  const long made = calls * static_cast<long>(nsizes);
  if (n > 1 && mine[6 * nsizes] + mine[6 * nsizes + 1] != made)
    fail(rank, "staged " + std::to_string(mine[6 * nsizes]) + " + single copy " + std::to_string(mine[6 * nsizes + 1]) +
                   " calls, not " + std::to_string(made));
  // Re-trials: the first 256 calls after a copy class's decision (1024 for a wait class;
  // trial calls 6 or 8, and 2 until the decision, as trials.hpp says) take the decided way,
  // the next call starts the trials again; by the 1100th call they are over and decided
  // again, and the next ones (4x as many calls later) not begun.
  const long retrials_expected = retrial ? 1 : 0;
  const bool timed = mode == "trials" || retrial;
  for (std::size_t s = 0; s < nsizes && n > 1; ++s) {
    const long trials = mine[3 * s], decided = mine[3 * s + 1], again = mine[3 * s + 2];
    const std::string what = std::to_string(sizes[s]) + " B: " + std::to_string(trials) +
                             " trial calls, decision " + std::to_string(decided) + ", timed again " +
                             std::to_string(again) + "x";
    if (timed && h.cma && (trials != 6 || decided < 0 || again != retrials_expected))
      fail(rank, what + " (expected 6, decided, timed again " + std::to_string(retrials_expected) + "x)");
    if (!timed && (trials != 0 || decided != -1)) fail(rank, what + " (expected none)");
  }
  const bool wait_trials = h.oversubscribed && !h.sleep_forced;
  for (std::size_t s = 0; s < nsizes && n > 1; ++s) {
    const long trials = mine[3 * nsizes + 3 * s], decided = mine[3 * nsizes + 3 * s + 1],
               again = mine[3 * nsizes + 3 * s + 2];
    const std::string what = std::to_string(sizes[s]) + " B: " + std::to_string(trials) +
                             " wait trial calls, decision " + std::to_string(decided) + ", timed again " +
                             std::to_string(again) + "x";
    if (wait_trials && (trials != 8 || decided < 0 || again != retrials_expected))
      fail(rank, what + " (expected 8, decided, timed again " + std::to_string(retrials_expected) + "x)");
    if (!wait_trials && (trials != 0 || decided != -1)) fail(rank, what + " (expected none)");
  }
  if (mode == "staged" && n > 1 && mine[6 * nsizes + 1] != 0) fail(rank, "single copy with AGX_CMA=0");
  if (mode == "forced" && n > 1 && mine[6 * nsizes] != 0) fail(rank, "staged calls with AGX_CMA_MIN_BYTES=0");
  if (rank == 0)
    std::printf("test_copy_choice %s N=%d: %s (single copy %s; staged %ld, single copy %ld calls; waits %s)\n",
                mode.c_str(), n, failures ? "FAIL" : "ok", h.cma ? "works" : "unavailable", mine[6 * nsizes],
                mine[6 * nsizes + 1], wait_trials ? "timed" : "fixed");
  int worst = failures;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst ? 1 : 0;
}
