// The smallest agx program: every rank contributes its rank number three times.
//   mpirun -np 4 build/examples/hello_allgather

#include <agx/agx.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::vector<int> mine(3, rank);
  std::vector<int> all(3 * static_cast<std::size_t>(size));
  try {
    agx::Allgather<int> gather(MPI_COMM_WORLD);
    const agx::Algorithm used = gather(mine, all);
    if (rank == 0) {
      std::printf("algorithm %s:", std::string(agx::to_string(used)).c_str());
      for (int v : all) std::printf(" %d", v);
      std::printf("\n");
    }
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, e.error_class());
  }
  MPI_Finalize();
  return 0;
}
