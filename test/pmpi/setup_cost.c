/* Not a test: the cost of the first all-gather on a new communicator (issue 16).
 * An unmodified MPI program: cycles of MPI_Comm_dup + MPI_Comm_free (plain), of
 * dup + one MPI_Allgather + free (first call), and MPI_Allgather on one long-lived
 * communicator (the call itself), interleaved so that a shared CPU loads all three
 * alike. Prints per-cycle means and the ratio
 *   (first - call) / plain   -- what set-up adds, in units of a plain MPI_Comm_dup.
 *   setup_cost [cycles] [count] */

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int cycles = argc > 1 ? atoi(argv[1]) : 500;
  const int count = argc > 2 ? atoi(argv[2]) : 4;
  int* send = calloc((size_t)count, sizeof(int));
  int* recv = calloc((size_t)count * (size_t)n, sizeof(int));
  MPI_Comm steady;
  MPI_Comm_dup(MPI_COMM_WORLD, &steady);
  MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, steady);
  double plain = 0, first = 0, call = 0;
  for (int i = 0; i < cycles; ++i) {
    MPI_Comm c;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_free(&c);
    plain += MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, c);
    MPI_Comm_free(&c);
    first += MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, steady);
    call += MPI_Wtime() - t0;
  }
  double t[3] = {plain / cycles, first / cycles, call / cycles};
  MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0)
    printf("setup_cost: %d ranks, %d cycles, %d ints: dup+free %.1f us, dup+first call+free "
           "%.1f us, call %.1f us; set-up / dup = %.2f\n",
           n, cycles, count, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, (t[1] - t[2] - t[0]) / t[0]);
  MPI_Comm_free(&steady);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
