// Checking mode (run with AGX_CHECK=1): calls that differ between ranks — counts, the
// algorithm, in-place use; blocking calls, nonblocking starts and plans — must fail with MPI_ERR_ARG on every rank, naming the ranks,
// instead of hanging or gathering garbage; afterwards the communicator still works.
// Needs at least 3 ranks.

#include <agx/agx.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int rank = 0, n = 0, failed = 0, passed = 0;

template <class Call>
void expect_error(const char* what, const char* must_contain, Call call) {
  try {
    call();
    std::fprintf(stderr, "FAIL rank %d: %s was accepted\n", rank, what);
    ++failed;
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG || std::strstr(e.what(), must_contain) == nullptr) {
      std::fprintf(stderr, "FAIL rank %d: %s: class %d, '%s' (wanted '%s')\n", rank, what,
                   e.error_class(), e.what(), must_contain);
      ++failed;
    } else {
      ++passed;
    }
  }
}

void expect_correct(const char* what) {
  std::vector<int> send(4, rank), recv(4 * static_cast<std::size_t>(n), -1);
  agx::allgather<int>(MPI_COMM_WORLD, send, recv);
  for (std::size_t i = 0; i < recv.size(); ++i)
    if (recv[i] != static_cast<int>(i / 4)) {
      std::fprintf(stderr, "FAIL rank %d: %s: wrong result at %zu\n", rank, what, i);
      ++failed;
      return;
    }
  ++passed;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto un = static_cast<std::size_t>(n);
  expect_correct("consistent call");

  // Rank 1 contributes 5 elements where the others contribute 4.
  std::vector<int> recv(8 * un);
  std::vector<int> send(rank == 1 ? 5 : 4, rank);
  expect_error("different counts", "rank 1 expects 20 bytes", [&] {
    agx::allgather<int>(MPI_COMM_WORLD, send, std::span<int>(recv).first(send.size() * un));
  });
  // Rank 2 forces ring, the others Bruck.
  std::vector<int> four(4, rank);
  expect_error("different algorithms", "rank 2 runs algorithm 'ring'", [&] {
    agx::allgather<int>(MPI_COMM_WORLD, four, std::span<int>(recv).first(4 * un),
                        {rank == 2 ? agx::Algorithm::ring : agx::Algorithm::bruck});
  });
  // Rank 0 calls in place, the others do not.
  expect_error("in place on some ranks only", "in place must be used by all ranks or none", [&] {
    agx::Allgather<int> gather(MPI_COMM_WORLD);
    if (rank == 0) gather.in_place(std::span<int>(recv).first(4 * un));
    else gather(four, std::span<int>(recv).first(4 * un));
  });
  // The same checks at a nonblocking start and at planning a persistent call.
  expect_error("different counts, nonblocking", "rank 1 expects 20 bytes", [&] {
    agx::Allgather<int> gather(MPI_COMM_WORLD);
    gather.start(send, std::span<int>(recv).first(send.size() * un)).wait();
  });
  expect_error("different algorithms, persistent", "rank 2 runs algorithm 'ring'", [&] {
    agx::Allgather<int> gather(MPI_COMM_WORLD,
                               {rank == 2 ? agx::Algorithm::ring : agx::Algorithm::bruck});
    agx::Plan plan = gather.plan(four, std::span<int>(recv).first(4 * un));
    plan.start();
    plan.wait();
  });
  expect_correct("consistent call after the errors");

  int totals[2] = {passed, failed}, sums[2] = {0, 0};
  MPI_Reduce(totals, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("N=%d: %d passed, %d failed\n", n, sums[0], sums[1]);
  MPI_Finalize();
  return failed == 0 && (rank != 0 || sums[1] == 0) ? 0 : 1;
}
