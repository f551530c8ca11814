/* An unmodified MPI program whose all-gathers grow agx's shared segment (run with
 * AGX_ALGO=shared_memory): counts 16, 1024, 16384 and 131072 ints per rank, each a
 * larger segment. Prints "pid <rank> <pid>" first, so that run_segment_kill.py can
 * look for segments left behind by this job's processes.
 *   segment_c [--die RANK CALL]   RANK raises SIGKILL just before call CALL (1-based),
 *                                 while the other ranks are inside it, growing. */

#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int die_rank = -1, die_call = -1;
  if (argc > 3 && strcmp(argv[1], "--die") == 0) die_rank = atoi(argv[2]), die_call = atoi(argv[3]);
  printf("pid %d %d\n", me, (int)getpid());
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  static const int counts[] = {16, 1024, 16384, 131072};
  int failures = 0;
  for (int k = 0; k < 4; ++k) {
    const int c = counts[k];
    int* send = malloc((size_t)c * sizeof(int));
    int* recv = malloc((size_t)c * (size_t)n * sizeof(int));
    for (int i = 0; i < c; ++i) send[i] = me * 7 + i;
    if (me == die_rank && k + 1 == die_call) raise(SIGKILL);
    MPI_Allgather(send, c, MPI_INT, recv, c, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < n; ++r)
      if (recv[(size_t)r * c + (size_t)c - 1] != r * 7 + c - 1) ++failures;
    free(send);
    free(recv);
  }
  if (me == 0) printf("segment_c: %d ranks: %s\n", n, failures == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
