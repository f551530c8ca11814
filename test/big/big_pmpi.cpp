// A real all-gather above 2 GiB through the interposer: a plain MPI program (no agx
// headers, no agx library) run under LD_PRELOAD=libagx_pmpi.so. The receive type is a
// contiguous datatype of 4096 bytes, so the count of one block (524289 for the default
// 2^31 + 4096 bytes) fits an int while its bytes exceed INT_MAX. MPI_Allgather in
// place on MPI_COMM_WORLD, checked word by word with guards; the interposer's counter
// (agx_pmpi_calls, read with dlsym) must show that agx served the call with the
// algorithm named by AGX_ALGO (the test runs it with ring: the shared-memory path at
// this size is test_big's; a second 4 GiB segment would double the run time).
// Memory: N * 2 blocks (the receive buffers), checked first: exit code 77 (skip) when
// the machine lacks it.
//   AGX_ALGO=ring big_pmpi [BLOCK_BYTES]      (a multiple of 4096)

#include <mpi.h>

#include "big_data.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace big_test;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t block = block_bytes_from(argc, argv), words = block / 8;
  const auto un = static_cast<std::size_t>(n);
  if (must_skip(2 * un * block + (std::size_t{1} << 30), un * block)) {
    MPI_Finalize();
    return 77;
  }
  using calls_fn = unsigned long long (*)(const char*);
  const auto calls = reinterpret_cast<calls_fn>(dlsym(RTLD_DEFAULT, "agx_pmpi_calls"));
  const char* algo = std::getenv("AGX_ALGO");
  const std::string want = algo != nullptr && *algo != '\0' ? algo : "ring";

  constexpr int page = 4096;
  MPI_Datatype page_type = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(page, MPI_BYTE, &page_type);
  MPI_Type_commit(&page_type);
  const int count = static_cast<int>(block / page);

  Buffer recv(un * words);
  fill(recv.data() + static_cast<std::size_t>(rank) * words, 3, rank, words);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv.data(), count, page_type,
                               MPI_COMM_WORLD);
  const double s = seconds_since(t0);
  std::string problem;
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    problem = "MPI_Allgather returned " + std::to_string(rc) + ": " + std::string(text, len);
  }
  if (problem.empty()) problem = verify(recv, 3, n, words);
  if (problem.empty() && (calls == nullptr || calls(want.c_str()) != 1))
    problem = calls == nullptr ? "libagx_pmpi.so is not preloaded (no agx_pmpi_calls)"
                               : "agx_pmpi_calls(\"" + want + "\") is " +
                                     std::to_string(calls(want.c_str())) + ", expected 1";
  int failures = problem.empty() ? 0 : 1;
  if (!problem.empty()) std::fprintf(stderr, "rank %d: FAIL MPI_Allgather: %s\n", rank, problem.c_str());
  if (rank == 0)
    std::printf("interposer MPI_Allgather, in place: %d x %d elements of %d B (%zu B blocks), "
                "%s, call %.2f s%s\n",
                n, count, page, block, want.c_str(), s,
                problem.empty() ? ", every word checked" : "");
  MPI_Type_free(&page_type);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
