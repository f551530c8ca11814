/* Nonblocking and persistent all-gathers in a program that never makes a blocking one,
 * under libagx_pmpi.so: every call must be agx's from the first (the interposer's
 * counters: agx_pmpi_passthrough_calls stays 0), on MPI_COMM_WORLD, MPI_COMM_SELF and
 * communicators from MPI_Comm_dup, _split, _split_type, _create, _create_group and
 * _idup (api/context.hpp, SetupInFlight). Cases, each on communicators of its own:
 *   loop      MPI_Iallgather + MPI_Wait 200 times on each communicator, alternating
 *   v         MPI_Iallgatherv with uneven and empty blocks, in place every other call
 *   two       two starts (one on each of two new communicators, one more on the first)
 *             before any wait; MPI_Waitall completes them out of order
 *   ssend     rank 0 starts, then MPI_Ssend's to rank 1, which receives before its own
 *             start (a start that waited for the others would deadlock)
 *   free      MPI_Comm_free right after the first start, then MPI_Wait
 *   blocking  a blocking MPI_Allgather right after the first start, then MPI_Wait
 *   persistent  MPI_Allgather_init (MPIX_ under Open MPI 4.1) on a new communicator,
 *             then 50 MPI_Start + MPI_Wait
 * Every result is checked. `keyval` first makes an attribute key with a copy callback:
 * then a first nonblocking call must go to the MPI library (no idup may copy it), and
 * the program expects passed calls instead. Exit status 0 on success. */
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION >= 4
#define ALLGATHER_INIT MPI_Allgather_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define ALLGATHER_INIT MPIX_Allgather_init
#endif

static int me, n, failures, copy_key;
static unsigned long long (*passed)(void);
static unsigned long long (*served)(const char*);

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond) && failures++ < 20) {                                     \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", me, __func__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
    }                                                                     \
  } while (0)

static int value(int rank, int k, int i) { return rank * 100000 + k * 100 + i + 1; }

/* One MPI_Iallgather of c ints on comm (started, waited, checked). */
static void one(MPI_Comm comm, int k, int c) {
  int size, rank;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  int* send = malloc(sizeof(int) * (size_t)c + 1);
  int* recv = malloc(sizeof(int) * (size_t)c * (size_t)size + 1);
  for (int i = 0; i < c; ++i) send[i] = value(rank, k, i);
  MPI_Request r;
  CHECK(MPI_Iallgather(send, c, MPI_INT, recv, c, MPI_INT, comm, &r) == MPI_SUCCESS, "start");
  CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
  for (int q = 0; q < size; ++q)
    for (int i = 0; i < c; ++i)
      if (recv[q * c + i] != value(q, k, i)) {
        CHECK(0, "call %d: wrong data from rank %d", k, q);
        q = size;
        break;
      }
  free(send);
  free(recv);
}

static void case_loop(void) {
  MPI_Comm comms[8];
  int count = 0;
  comms[count++] = MPI_COMM_WORLD;
  comms[count++] = MPI_COMM_SELF;
  MPI_Comm_dup(MPI_COMM_WORLD, &comms[count++]);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, n - me, &comms[count++]); /* reversed order */
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comms[count++]);
  MPI_Group world, evens;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int range[1][3] = {{0, n - 1, 2}};
  MPI_Group_range_incl(world, 1, range, &evens);
  MPI_Comm created, grouped = MPI_COMM_NULL;
  MPI_Comm_create(MPI_COMM_WORLD, world, &created);
  comms[count++] = created;
  if (me % 2 == 0) {
    MPI_Comm_create_group(MPI_COMM_WORLD, evens, 5, &grouped);
    comms[count++] = grouped;
  }
  MPI_Request r;
  MPI_Comm idup;
  MPI_Comm_idup(MPI_COMM_WORLD, &idup, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  comms[count++] = idup;
  for (int k = 0; k < 200; ++k)
    for (int c = 0; c < count; ++c) one(comms[c], k, 1 + (k % 7) * 3);
  for (int c = 2; c < count; ++c) MPI_Comm_free(&comms[c]);
  MPI_Group_free(&world);
  MPI_Group_free(&evens);
}

static void case_v(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int* counts = malloc(sizeof(int) * (size_t)n);
  int* displs = malloc(sizeof(int) * (size_t)n);
  int total = 0;
  for (int q = n - 1; q >= 0; --q) { /* reversed, every third empty, gaps of 3 */
    counts[q] = q % 3 == 1 ? 0 : 5 * q + 2;
    displs[q] = total + 3;
    total += counts[q] + 3;
  }
  int* recv = malloc(sizeof(int) * (size_t)total + 1);
  int* send = malloc(sizeof(int) * (size_t)counts[me] + 1);
  for (int k = 0; k < 60; ++k) {
    const int in_place = k % 2;
    for (int i = 0; i < total; ++i) recv[i] = -5;
    for (int i = 0; i < counts[me]; ++i) send[i] = value(me, k, i);
    if (in_place) memcpy(recv + displs[me], send, sizeof(int) * (size_t)counts[me]);
    MPI_Request r;
    MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send, counts[me], MPI_INT, recv, counts, displs,
                    MPI_INT, comm, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < counts[q]; ++i)
        if (recv[displs[q] + i] != value(q, k, i)) {
          CHECK(0, "call %d: wrong data from rank %d", k, q);
          q = n;
          break;
        }
    for (int q = 0; q < n; ++q) CHECK(recv[displs[q] - 1] == -5, "call %d: a gap was written", k);
  }
  free(counts), free(displs), free(recv), free(send);
  MPI_Comm_free(&comm);
}

static void case_two(void) {
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  int s[3][2], *r[3];
  MPI_Request req[3];
  MPI_Comm on[3] = {a, b, a};
  for (int j = 0; j < 3; ++j) {
    s[j][0] = value(me, j, 0), s[j][1] = value(me, j, 1);
    r[j] = malloc(sizeof(int) * 2 * (size_t)n);
    MPI_Iallgather(s[j], 2, MPI_INT, r[j], 2, MPI_INT, on[j], &req[j]);
  }
  MPI_Request backwards[3] = {req[2], req[1], req[0]};
  MPI_Status statuses[3]; /* (not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's) */
  MPI_Waitall(3, backwards, statuses);
  for (int j = 0; j < 3; ++j)
    for (int q = 0; q < n; ++q)
      CHECK(r[j][2 * q] == value(q, j, 0) && r[j][2 * q + 1] == value(q, j, 1), "call %d: wrong data", j);
  for (int j = 0; j < 3; ++j) free(r[j]);
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
}

static void case_ssend(void) {
  for (int round = 0; round < 3; ++round) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int token = 1, send = value(me, round, 0), *recv = malloc(sizeof(int) * (size_t)n);
    MPI_Request r;
    if (n >= 2 && me == 1) MPI_Recv(&token, 1, MPI_INT, 0, 7, comm, MPI_STATUS_IGNORE);
    MPI_Iallgather(&send, 1, MPI_INT, recv, 1, MPI_INT, comm, &r);
    if (n >= 2 && me == 0) MPI_Ssend(&token, 1, MPI_INT, 1, 7, comm);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int q = 0; q < n; ++q) CHECK(recv[q] == value(q, round, 0), "round %d: wrong data", round);
    free(recv);
    MPI_Comm_free(&comm);
  }
}

static void case_free(void) {
  for (int round = 0; round < 3; ++round) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int send = value(me, round, 0), *recv = malloc(sizeof(int) * (size_t)n);
    MPI_Request r;
    MPI_Iallgather(&send, 1, MPI_INT, recv, 1, MPI_INT, comm, &r);
    MPI_Comm_free(&comm); /* pending calls complete after MPI_Comm_free (MPI allows it) */
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int q = 0; q < n; ++q) CHECK(recv[q] == value(q, round, 0), "round %d: wrong data", round);
    free(recv);
  }
}

static void case_blocking(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int send = value(me, 1, 0), *recv = malloc(sizeof(int) * (size_t)n), *recv2 = malloc(sizeof(int) * (size_t)n);
  MPI_Request r;
  MPI_Iallgather(&send, 1, MPI_INT, recv, 1, MPI_INT, comm, &r);
  int send2 = value(me, 2, 0);
  MPI_Allgather(&send2, 1, MPI_INT, recv2, 1, MPI_INT, comm);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int q = 0; q < n; ++q) {
    CHECK(recv[q] == value(q, 1, 0), "nonblocking: wrong data");
    CHECK(recv2[q] == value(q, 2, 0), "blocking: wrong data");
  }
  free(recv), free(recv2);
  MPI_Comm_free(&comm);
}

static void case_persistent(void) {
#ifdef ALLGATHER_INIT
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int send[3], *recv = malloc(sizeof(int) * 3 * (size_t)n);
  MPI_Request r;
  CHECK(ALLGATHER_INIT(send, 3, MPI_INT, recv, 3, MPI_INT, comm, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
  for (int k = 0; k < 50; ++k) {
    for (int i = 0; i < 3; ++i) send[i] = value(me, k, i);
    MPI_Start(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 3; ++i) CHECK(recv[3 * q + i] == value(q, k, i), "start %d: wrong data", k);
  }
  MPI_Request_free(&r);
  free(recv);
  MPI_Comm_free(&comm);
#else
  if (me == 0) printf("persistent: no persistent all-gather in this MPI library\n");
#endif
}

static int copy_fn(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c, (void)k, (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  passed = (unsigned long long (*)(void))(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_passthrough_calls");
  served = (unsigned long long (*)(const char*))(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_calls");
  CHECK(passed && served, "the interposer's counters are missing (not preloaded?)");
  const char* which = argc > 1 ? argv[1] : "all";
  const int keyval = strcmp(which, "keyval") == 0;
  if (keyval) MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &copy_key, NULL);
  const int all = strcmp(which, "all") == 0 || keyval;
  const unsigned long long passed0 = passed ? passed() : 0, served0 = served ? served(NULL) : 0;
  if (all || !strcmp(which, "loop")) case_loop();
  if (all || !strcmp(which, "v")) case_v();
  if (all || !strcmp(which, "two")) case_two();
  if (all || !strcmp(which, "ssend")) case_ssend();
  if (all || !strcmp(which, "free")) case_free();
  if (all || !strcmp(which, "blocking")) case_blocking();
  if (all || !strcmp(which, "persistent")) case_persistent();
  if (passed && served) {
    const unsigned long long p = passed() - passed0, s = served(NULL) - served0;
    if (keyval) CHECK(p > 0, "a copy callback exists, yet no first call went to the MPI library");
    else CHECK(p == 0, "%llu calls passed to the MPI library (%llu served by agx), expected none", p, s);
    printf("rank %d: %llu calls by agx, %llu passed to the MPI library\n", me, s, p);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAIL" : "OK", total, n);
  if (keyval) MPI_Comm_free_keyval(&copy_key);
  MPI_Finalize();
  return total ? 1 : 0;
}
