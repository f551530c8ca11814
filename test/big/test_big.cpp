// Real all-gathers above 2 GiB through the C++ API: every rank's block is
// 2^31 + 4096 bytes (more than INT_MAX), so at 2 ranks each rank receives more than
// 4 GiB. Two calls on MPI_COMM_WORLD, in place, each checked word by word with guards:
//   1. agx::Algorithm::ring: messages are split at AGX_MAX_MESSAGE_BYTES (1 GiB by
//      default), so one block travels as three messages;
//   2. agx::Algorithm::shared_memory: a segment of N blocks, chunked copy in and out
//      (forced: at N = 2, auto takes point-to-point for blocks this large).
// In place because fresh memory is what costs here (a 2 GiB send buffer per rank
// would add as much time as the call itself). Memory: N * 3 blocks at the peak (the
// receive buffers and the shared segment), checked against MemAvailable before
// anything is allocated: exit code 77 (skip) with the reason when the machine lacks it.
//   test_big [BLOCK_BYTES]      (a smaller block for a quick run of the same code)

#include <agx/agx.hpp>

#include "big_data.hpp"

#include <cstdio>
#include <span>
#include <string>

using namespace big_test;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t block = block_bytes_from(argc, argv), words = block / 8;
  const auto un = static_cast<std::size_t>(n);
  if (must_skip(3 * un * block + (std::size_t{1} << 30), un * block)) {
    MPI_Finalize();
    return 77;
  }
  int failures = 0;
  auto report = [&](const char* step, agx::Algorithm a, double call_s, const std::string& problem) {
    if (!problem.empty()) {
      ++failures;
      std::fprintf(stderr, "rank %d: FAIL %s: %s\n", rank, step, problem.c_str());
    }
    if (rank == 0)
      std::printf("%s: %d x %zu B blocks, %s, call %.2f s%s\n", step, n, block,
                  std::string(agx::to_string(a)).c_str(), call_s,
                  problem.empty() ? ", every word checked" : "");
    std::fflush(stdout);
  };

  Buffer recv(un * words);
  const std::span<std::uint64_t> all(recv.data(), recv.size());
  std::uint64_t* own = recv.data() + static_cast<std::size_t>(rank) * words;
  const agx::Algorithm steps[] = {agx::Algorithm::ring, agx::Algorithm::shared_memory};
  const char* names[] = {"ring, in place", "shared_memory, in place"};
  for (unsigned salt = 1; salt <= 2; ++salt) {
    const agx::Algorithm want = steps[salt - 1];
    fill(own, salt, rank, words);  // the other blocks still hold the last call's data
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    agx::Algorithm ran = want;
    std::string problem;
    try {
      ran = agx::Allgather<std::uint64_t>(MPI_COMM_WORLD, {want}).in_place(all);
    } catch (const agx::Error& e) {
      problem = std::string("threw: ") + e.what();
    }
    const double s = seconds_since(t0);
    if (problem.empty()) problem = verify(recv, salt, n, words);
    if (problem.empty() && ran != want)
      problem = "ran " + std::string(agx::to_string(ran)) + ", expected " + std::string(agx::to_string(want));
    report(names[salt - 1], ran, s, problem);
  }

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
