/* Calls that outlive their communicator (MPI-4.0 section 6.4.3: MPI_Comm_free marks the
 * communicator for deallocation; pending operations complete normally, and a persistent
 * request stays usable). Plain mpi.h, run under the interposer by run_pmpi.py:
 *   1. MPI_Iallgather on a duplicate, MPI_Comm_free, MPI_Wait: the data is there;
 *   2. the same with four requests in flight, freed before any wait, waited in reverse;
 *   3. MPI_Allgather_init, MPI_Comm_free, then three MPI_Start/MPI_Wait: the data of
 *      every start is there; MPI_Request_free at the end.
 * Every rank's block is a pattern of (start, rank, index); guard words after the
 * receive region must stay untouched. Every call that completed must be agx's, none passed
 * to the MPI library (served.h: the interposer's counters; AGX_TEST_EXPECT=mpi: the other
 * way round). Exit 1 on the first wrong word or a call agx did not serve. */
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "served.h"

#if MPI_VERSION >= 4
#define ALLGATHER_INIT MPI_Allgather_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define ALLGATHER_INIT MPIX_Allgather_init
#endif

enum { count = 3000, guard = 16 };

static int value(int start, int rank, int i) { return start * 1000003 + rank * 7919 + i; }

static int check(const int* recv, int n, int start, const char* what) {
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < count; ++i)
      if (recv[r * count + i] != value(start, r, i)) {
        fprintf(stderr, "%s: block %d word %d is %d, expected %d\n", what, r, i,
                recv[r * count + i], value(start, r, i));
        return 1;
      }
  for (int g = 0; g < guard; ++g)
    if (recv[n * count + g] != -7) {
      fprintf(stderr, "%s: guard word %d overwritten\n", what, g);
      return 1;
    }
  return 0;
}

/* A duplicate that agx has set up: the first call on a new communicator must be a
 * blocking one for agx to serve its nonblocking calls (docs/interposer.md, "MPI
 * semantics"; before that they go to the MPI library). */
static void dup_set_up(MPI_Comm* c) {
  MPI_Comm_dup(MPI_COMM_WORLD, c);
  int n = 0, one = 1;
  MPI_Comm_size(*c, &n);
  int* all = malloc(sizeof(int) * (size_t)n);
  served_blocking(MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, *c));
  free(all);
}

static int* fresh_recv(int n) {
  int* recv = malloc(sizeof(int) * (size_t)(n * count + guard));
  for (int i = 0; i < n * count + guard; ++i) recv[i] = -7;
  return recv;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int send[count];
  /* argv[1]: which cases to run, e.g. "13" (default all) */
  const char* cases = argc > 1 ? argv[1] : "123";
#define CASE(k) if (strchr(cases, k))

  /* 1: one request */
  CASE('1') {
    MPI_Comm c;
    dup_set_up(&c);
    int* recv = fresh_recv(n);
    for (int i = 0; i < count; ++i) send[i] = value(1, rank, i);
    MPI_Request req;
    served_started(MPI_Iallgather(send, count, MPI_INT, recv, count, MPI_INT, c, &req));
    MPI_Comm_free(&c);
    if (c != MPI_COMM_NULL) bad = 1;
    served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
    bad |= check(recv, n, 1, "iallgather after MPI_Comm_free");
    free(recv);
  }
  /* 2: four requests on four freed communicators, waited in reverse */
  CASE('2') {
    enum { k = 4 };
    MPI_Comm c[k];
    MPI_Request req[k];
    int* recv[k];
    int sends[k][count];
    for (int j = 0; j < k; ++j) {
      dup_set_up(&c[j]);
      recv[j] = fresh_recv(n);
      for (int i = 0; i < count; ++i) sends[j][i] = value(10 + j, rank, i);
      served_started(
          MPI_Iallgather(sends[j], count, MPI_INT, recv[j], count, MPI_INT, c[j], &req[j]));
    }
    for (int j = 0; j < k; ++j) MPI_Comm_free(&c[j]);
    for (int j = k - 1; j >= 0; --j) {
      served_completed(MPI_Wait(&req[j], MPI_STATUS_IGNORE));
      char what[64];
      snprintf(what, sizeof what, "request %d of %d after MPI_Comm_free", j, k);
      bad |= check(recv[j], n, 10 + j, what);
      free(recv[j]);
    }
  }
  /* 3: a persistent request started after its communicator was freed */
#ifdef ALLGATHER_INIT
  CASE('3') {
    MPI_Comm c;
    dup_set_up(&c);
    int* recv = fresh_recv(n);
    MPI_Request req;
    served_started(
        ALLGATHER_INIT(send, count, MPI_INT, recv, count, MPI_INT, c, MPI_INFO_NULL, &req));
    MPI_Comm_free(&c);
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < count; ++i) send[i] = value(100 + s, rank, i);
      MPI_Start(&req);
      served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
      bad |= check(recv, n, 100 + s, "persistent start after MPI_Comm_free");
    }
    MPI_Request_free(&req);
    free(recv);
  }
#endif
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("comm_free_c: %s at %d ranks\n", any ? "FAILED" : "ok", n);
  MPI_Finalize();
  const int unserved = served_check(rank, "comm_free_c"); /* after MPI_Finalize: all complete */
  return any || unserved ? 1 : 0;
}
