// The program of cluster-node-loss (test/cluster/meson.build, docs/cluster.md): ring
// all-gathers of 4 KiB per rank on MPI_COMM_WORLD, back to back and checked, until one
// fails. On a healthy cluster it never ends by itself (the test's time limit fails it);
// when a node is lost, AGX_TIMEOUT (with AGX_TIMEOUT_ACTION=error) makes the waiting ranks
// report the peer they wait for and throw; each such rank prints the error and goes on to
// MPI_Finalize, where it stays until the launcher ends the job. Every MPI call of the loop
// is agx's, so a lost peer is always met inside agx's waits.
//   node_loss [ITERATIONS]   (default: effectively unbounded)

#include <agx/agx.hpp>

#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long iterations = argc > 1 ? std::atol(argv[1]) : 1L << 40;
  constexpr std::size_t block = 4096;
  std::vector<unsigned char> send(block), recv(block * static_cast<std::size_t>(size));
  const agx::Allgather<unsigned char> gather(MPI_COMM_WORLD, agx::Options{agx::Algorithm::ring});
  int status = 0;
  long i = 0;
  for (; i < iterations && status == 0; ++i) {
    for (std::size_t b = 0; b < block; ++b) send[b] = static_cast<unsigned char>(rank * 31 + i + b);
    try {
      gather(send, recv);
    } catch (const agx::Error& e) {
      std::fprintf(stderr, "node_loss: world rank %d, iteration %ld: error class %d: %s\n", rank, i,
                   e.error_class(), e.what());
      status = 1;
      break;
    }
    for (int r = 0; r < size && status == 0; ++r)
      for (std::size_t b = 0; b < block; b += 511)
        if (recv[static_cast<std::size_t>(r) * block + b] != static_cast<unsigned char>(r * 31 + i + b)) {
          std::fprintf(stderr, "node_loss: world rank %d, iteration %ld: wrong byte from rank %d\n", rank, i, r);
          status = 2;
          break;
        }
    if (rank == 0 && i == 100) std::printf("node_loss: %d ranks, 100 calls done\n", size);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return status;
}
