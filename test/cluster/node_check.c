/* What the MPI library sees on the cluster (test/cluster, docs/cluster.md): plain MPI,
 * no agx. Usage: node_check NODES [PLACEMENT]
 *   NODES      expected number of MPI_COMM_TYPE_SHARED communicators (one per node)
 *   PLACEMENT  optional, comma-separated node index of each rank in MPI_COMM_WORLD order,
 *              read from the host name's "-n<i>" suffix (cluster.sh names nodes NAME-n<i>)
 * Checks that ranks of one shared communicator report one processor name, that different
 * communicators report different names, and moves 1 MiB per rank with MPI_Allgather
 * (checked) so that the runner can see the traffic on every node's link. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) { fprintf(stderr, "node_check: %s failed (%d)\n", what, rc); MPI_Abort(MPI_COMM_WORLD, 2); }
  return rc;
}

int main(int argc, char** argv) {
  check(MPI_Init(&argc, &argv), "MPI_Init");
  int rank = 0, size = 0, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int want_nodes = argc > 1 ? atoi(argv[1]) : -1;
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  int leader = node_rank == 0, nodes = 0;
  check(MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  char name[MPI_MAX_PROCESSOR_NAME] = {0}, first[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  memcpy(first, name, sizeof first);
  check(MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, node), "MPI_Bcast");
  if (strcmp(first, name) != 0) { fprintf(stderr, "rank %d: FAIL on %s but its node's rank 0 is on %s\n", rank, name, first); ++failures; }
  char* all = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
  check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD), "MPI_Allgather");
  int distinct = 0;
  for (int i = 0; i < size; ++i) {
    int seen = 0;
    for (int j = 0; j < i && !seen; ++j) seen = strcmp(all + (size_t)i * MPI_MAX_PROCESSOR_NAME, all + (size_t)j * MPI_MAX_PROCESSOR_NAME) == 0;
    distinct += !seen;
  }
  if (want_nodes >= 0 && (nodes != want_nodes || distinct != want_nodes)) {
    if (rank == 0) fprintf(stderr, "FAIL: %d shared communicators, %d host names, expected %d nodes\n", nodes, distinct, want_nodes);
    ++failures;
  }
  if (argc > 2) {  /* the placement: node index per rank */
    const char* p = argv[2];
    for (int i = 0; i < size; ++i) {
      const int want = atoi(p);
      const char* h = strstr(all + (size_t)i * MPI_MAX_PROCESSOR_NAME, "-n");
      const int got = h ? atoi(h + 2) : -1;
      if (got != want && rank == 0) { fprintf(stderr, "FAIL: rank %d is on node %d, expected %d\n", i, got, want); ++failures; }
      p = strchr(p, ',');
      if (!p) { if (i + 1 != size && rank == 0) { fprintf(stderr, "FAIL: placement names %d ranks, %d run\n", i + 1, size); ++failures; } break; }
      ++p;
    }
  }
  const int block = 1 << 20;
  unsigned char* send = malloc((size_t)block);
  unsigned char* recv = malloc((size_t)block * (size_t)size);
  for (int i = 0; i < block; ++i) send[i] = (unsigned char)(rank * 131 + i * 7);
  check(MPI_Allgather(send, block, MPI_BYTE, recv, block, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < block; i += 4093)
      if (recv[(size_t)r * (size_t)block + (size_t)i] != (unsigned char)(r * 131 + i * 7)) { ++failures; break; }
  int total = 0;
  check(MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  printf("rank %d of %d on %s: node rank %d, %d nodes\n", rank, size, name, node_rank, nodes);
  if (rank == 0) printf(total ? "node_check: FAILED (%d)\n" : "node_check: ok (%d failures)\n", total);
  free(all); free(send); free(recv);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return total ? 1 : 0;
}
