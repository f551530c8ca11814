/* An unmodified MPI program (plain C, mpi.h only) for the MPI semantics of the
 * interposer (docs/interposer.md, "MPI semantics"): one case per run, named by the
 * first argument. Every case runs on a fresh duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN (so that errors come back as classes), prints what each rank got,
 * and exits 0 when the behaviour is the one agx promises:
 *
 *   alias          MPI_Allgather(buf, c, t, buf, c, t) without MPI_IN_PLACE:
 *                  MPI_ERR_BUFFER on every rank (none treats it as in place)
 *   start-active   MPI_Start on an active persistent all-gather: MPI_ERR_REQUEST on
 *                  every rank, decided locally; the request still completes
 *   cancel         MPI_Cancel on a running MPI_Iallgather: MPI_ERR_REQUEST (collective
 *                  requests cannot be cancelled); the request still completes
 *   free-running   MPI_Request_free on running MPI_Iallgather's: the data still arrives,
 *                  later calls work
 *   type-freed     a datatype handle used after MPI_Type_free: MPI_ERR_TYPE
 *   type-uncommitted  a datatype never committed: MPI_ERR_TYPE
 *   counts         rank 0 gives smaller counts than the others: no rank returns
 *                  success; the ranks that receive more than rank 0 wrote get
 *                  MPI_ERR_TRUNCATE
 *   counts-grow    the same where one side's call must grow the node's shared segment
 *                  and the other's not: every rank returns MPI_ERR_TRUNCATE, none hangs
 *   truncate       a receive block smaller than what its sender sends: MPI_ERR_TRUNCATE
 *                  (never MPI_ERR_IN_STATUS from a single-request call)
 *   attributes     a user attribute whose copy callback fails and whose delete callback
 *                  counts: MPI_Allgather works, the callbacks run as without agx
 *   first-nonblocking  the first call on a new communicator is MPI_Iallgather: rank 0
 *                  starts it, then MPI_Ssend's to rank 1, which receives before its own
 *                  start (deadlocks when the start waits for the others)
 *   repeat         many calls of one shape with new buffers, then in place, another type,
 *                  errors, and a new communicator of another size: right data, right
 *                  classes (the interposer's repeated-call path)
 * Every case also checks that agx served each call that completed and passed none to the
 * MPI library (served.h, with the interposer's counters; AGX_TEST_EXPECT=mpi: the other
 * way round), and under a forced AGX_ALGO that each ran it.
 * Exit status 0 on success, 1 on a wrong answer; a hang is caught by the runner. */

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "served.h"

#if MPI_VERSION >= 4
#define ALLGATHER_INIT MPI_Allgather_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define ALLGATHER_INIT MPIX_Allgather_init
#endif

static int me, n, failures;

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond) && failures++ < 20) {                                         \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", me, __func__, __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                                           \
      fprintf(stderr, "\n");                                                  \
    }                                                                         \
  } while (0)

static int value(int rank, int i) { return rank * 1000 + i + 1; }

static int class_of(int rc) {
  int c = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
  return c;
}

static const char* class_name(int c) {
  switch (c) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    default: return "another class";
  }
}

static void report(const char* what, int rc) {
  const int c = class_of(rc);
  printf("rank %d: %s: %s (%d)\n", me, what, class_name(c), c);
  fflush(stdout);
}

/* The class every rank got must be `want` (MPI_SUCCESS included). */
static void expect_everywhere(const char* what, int rc, int want, MPI_Comm comm) {
  report(what, rc);
  const int c = class_of(rc);
  CHECK(c == want, "%s: %s, expected %s", what, class_name(c), class_name(want));
  int lo = c, hi = c;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, comm);
  CHECK(lo == hi, "%s: the ranks got different classes", what);
}

static int* ints(size_t count) {
  int* p = malloc((count == 0 ? 1 : count) * sizeof(int));
  if (p == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t i = 0; i < count; ++i) p[i] = -77;
  return p;
}

static void fill(int* send, int c) {
  for (int i = 0; i < c; ++i) send[i] = value(me, i);
}

static int gathered(const int* recv, int c) {
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < c; ++i)
      if (recv[r * c + i] != value(r, i)) return 0;
  return 1;
}

static MPI_Comm fresh_comm(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

/* A fresh communicator that has had one blocking all-gather: under agx its nonblocking
 * and persistent calls then run through agx (before, they go to the MPI library). */
static MPI_Comm used_comm(void) {
  MPI_Comm comm = fresh_comm();
  int one = me, *all = ints((size_t)n);
  served_blocking(MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, comm));
  free(all);
  return comm;
}

static void case_alias(void) {
  MPI_Comm comm = fresh_comm();
  const int c = 16;
  int* buf = ints((size_t)n * c);
  fill(buf, c);
  /* Same buffer for both, no MPI_IN_PLACE: erroneous. Rank 0's send data is exactly
   * its own block; the other ranks' overlaps block 0. */
  const int rc = served_blocking(MPI_Allgather(buf, c, MPI_INT, buf, c, MPI_INT, comm));
  expect_everywhere("MPI_Allgather(buf, buf)", rc, MPI_ERR_BUFFER, comm);
  /* the communicator still works */
  int* send = ints(c);
  fill(send, c);
  expect_everywhere("MPI_Allgather afterwards",
                    served_blocking(MPI_Allgather(send, c, MPI_INT, buf, c, MPI_INT, comm)),
                    MPI_SUCCESS, comm);
  CHECK(gathered(buf, c), "wrong data afterwards");
  free(send);
  free(buf);
  MPI_Comm_free(&comm);
}

static void case_start_active(void) {
#ifdef ALLGATHER_INIT
  MPI_Comm comm = used_comm();
  const int c = 3; /* small: agx may finish a start inside MPI_Start on some ranks */
  int* send = ints(c);
  int* recv = ints((size_t)n * c);
  fill(send, c);
  MPI_Request req;
  int rc = served_started(
      ALLGATHER_INIT(send, c, MPI_INT, recv, c, MPI_INT, comm, MPI_INFO_NULL, &req));
  expect_everywhere("MPI_Allgather_init", rc, MPI_SUCCESS, comm);
  for (int round = 0; round < 20; ++round) {
    rc = MPI_Start(&req);
    CHECK(rc == MPI_SUCCESS, "round %d: first MPI_Start: %s", round, class_name(class_of(rc)));
    if (round % 2 == 1) { /* let it finish on this rank first */
      struct timespec ms = {0, 2000000};
      nanosleep(&ms, NULL);
    }
    rc = MPI_Start(&req); /* erroneous: the request is active */
    if (round == 0) report("MPI_Start on an active request", rc);
    CHECK(class_of(rc) == MPI_ERR_REQUEST, "round %d: second MPI_Start: %s, expected "
          "MPI_ERR_REQUEST", round, class_name(class_of(rc)));
    rc = served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(rc == MPI_SUCCESS, "round %d: MPI_Wait: %s", round, class_name(class_of(rc)));
    CHECK(gathered(recv, c), "round %d: wrong data", round);
    for (int i = 0; i < n * c; ++i) recv[i] = -77;
  }
  MPI_Request_free(&req);
  free(send);
  free(recv);
  MPI_Comm_free(&comm);
#else
  if (me == 0) printf("start-active: no persistent all-gather in this MPI library\n");
#endif
}

static void case_cancel(void) {
  MPI_Comm comm = used_comm();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int c = 1000;
  int* send = ints(c);
  int* recv = ints((size_t)n * c);
  fill(send, c);
  MPI_Request req;
  int rc = served_started(MPI_Iallgather(send, c, MPI_INT, recv, c, MPI_INT, comm, &req));
  CHECK(rc == MPI_SUCCESS, "MPI_Iallgather: %s", class_name(class_of(rc)));
  rc = MPI_Cancel(&req);
  expect_everywhere("MPI_Cancel on a running MPI_Iallgather", rc, MPI_ERR_REQUEST, comm);
  MPI_Status status;
  rc = served_completed(MPI_Wait(&req, &status));
  CHECK(rc == MPI_SUCCESS, "MPI_Wait: %s", class_name(class_of(rc)));
  int cancelled = 1;
  MPI_Test_cancelled(&status, &cancelled);
  CHECK(!cancelled, "the status says cancelled");
  CHECK(gathered(recv, c), "wrong data after the cancel");
  free(send);
  free(recv);
  MPI_Comm_free(&comm);
}

static void case_free_running(void) {
  MPI_Comm comm = used_comm();
  enum { rounds = 20, c = 500 };
  int* send = ints(c);
  fill(send, c);
  int* recv[rounds];
  for (int k = 0; k < rounds; ++k) {
    recv[k] = ints((size_t)n * c);
    MPI_Request req;
    int rc =
        served_started(MPI_Iallgather(send, c, MPI_INT, recv[k], c, MPI_INT, comm, &req));
    CHECK(rc == MPI_SUCCESS, "MPI_Iallgather %d: %s", k, class_name(class_of(rc)));
    rc = MPI_Request_free(&req);
    CHECK(rc == MPI_SUCCESS && req == MPI_REQUEST_NULL, "MPI_Request_free %d: %s", k,
          class_name(class_of(rc)));
  }
  /* Other requests meanwhile (handles may be reused). */
  int* other = ints((size_t)n * c);
  MPI_Request req;
  served_started(MPI_Iallgather(send, c, MPI_INT, other, c, MPI_INT, comm, &req));
  int rc = served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(rc == MPI_SUCCESS && gathered(other, c), "a later MPI_Iallgather: %s",
        class_name(class_of(rc)));
  /* The freed ones complete: poll MPI (which lets agx progress) until the data is there. */
  const double t0 = MPI_Wtime();
  int arrived = 0;
  while (!arrived && MPI_Wtime() - t0 < 30) {
    int flag = 0;
    MPI_Request_get_status(MPI_REQUEST_NULL, &flag, MPI_STATUS_IGNORE);
    arrived = 1;
    for (int k = 0; k < rounds && arrived; ++k) arrived = gathered(recv[k], c);
  }
  CHECK(arrived, "the data of freed requests did not arrive within 30 s");
  if (arrived) served_add(rounds); /* completed: agx counts them (by MPI_Finalize) */
  rc = served_blocking(MPI_Allgather(send, c, MPI_INT, other, c, MPI_INT, comm));
  CHECK(rc == MPI_SUCCESS && gathered(other, c), "a later MPI_Allgather: %s",
        class_name(class_of(rc)));
  printf("rank %d: %d freed running requests completed: %s\n", me, rounds, arrived ? "yes" : "no");
  /* Freed requests may still be moving data on other ranks: wait for everybody. */
  MPI_Barrier(comm);
  for (int k = 0; k < rounds; ++k) free(recv[k]);
  free(other);
  free(send);
  MPI_Comm_free(&comm);
}

static void case_type(int freed) {
  MPI_Comm comm = fresh_comm();
  int* send = ints(4);
  int* recv = ints((size_t)n * 4);
  fill(send, 4);
  MPI_Datatype pair, stale;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  if (freed) {
    MPI_Type_commit(&pair);
    stale = pair;
    MPI_Type_free(&pair); /* `stale` now names nothing */
  } else {
    stale = pair; /* never committed */
  }
  const int rc = served_blocking(MPI_Allgather(send, 1, stale, recv, 1, stale, comm));
  expect_everywhere(freed ? "MPI_Allgather with a freed datatype"
                          : "MPI_Allgather with an uncommitted datatype",
                    rc, MPI_ERR_TYPE, comm);
  if (!freed) MPI_Type_free(&pair);
  free(send);
  free(recv);
  MPI_Comm_free(&comm);
}

/* Rank 0 gives count c - 1 for every block, the others c: rank 0 expects less than
 * they send (truncation there); they expect more from rank 0 than it writes. On one
 * node 4 and 100 ints travel in the flag lines; at 1007 rank 0's blocks (4024 B) fit a
 * flag line and the others' (4028 B) do not, so the ranks take different copies of one
 * call and must each find that out from the other's flags (the shared segment grown
 * first by an agreeing call, so that no rank needs to grow it in this one). */
/* An agreeing call of 16384 ints per rank: the node's shared segment grows for it. */
static void grow_segment(MPI_Comm comm) {
  const int big = 16384;
  int* s = ints((size_t)big);
  int* r = ints((size_t)n * big);
  fill(s, big);
  CHECK(served_blocking(MPI_Allgather(s, big, MPI_INT, r, big, MPI_INT, comm)) == MPI_SUCCESS,
        "an agreeing call of %d ints failed", big);
  free(s);
  free(r);
}

/* Disagreeing counts where one side's call must grow the node's shared segment and the
 * other's need not (growing is collective over the node): on a fresh communicator rank 0
 * gives 1006 ints (4024 B: its blocks fit the flag lines) and the others 1007 (4028 B:
 * staged, which first makes the segment); then, the segment grown by an agreeing call of
 * 16384 ints, rank 0 gives 16000 (its call fits that segment) and the others 17000 (theirs
 * grows it). Every rank must return an error (MPI_ERR_TRUNCATE where agx's own paths find
 * it), none may wait forever for a growth the others never join. */
static void case_counts_grow(void) {
  if (n < 2) return;
  for (int k = 0; k < 2; ++k) {
    MPI_Comm comm = fresh_comm();
    if (k == 1) grow_segment(comm);
    const int mine = k == 0 ? (me == 0 ? 1006 : 1007) : (me == 0 ? 16000 : 17000);
    int* send = ints((size_t)mine);
    int* recv = ints((size_t)n * mine);
    fill(send, mine);
    const int rc =
        served_blocking(MPI_Allgather(send, mine, MPI_INT, recv, mine, MPI_INT, comm));
    char what[80];
    snprintf(what, sizeof what, "counts %d here, %s", mine, k == 0 ? "fresh" : "grown");
    report(what, rc);
    CHECK(rc != MPI_SUCCESS, "%s: success with disagreeing counts", what);
    CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "%s: %s, expected MPI_ERR_TRUNCATE", what,
          class_name(class_of(rc)));
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

static void case_counts(void) {
  MPI_Comm comm = fresh_comm();
  if (n < 2) {
    MPI_Comm_free(&comm);
    return;
  }
  int sizes[] = {4, 100, 1007, 3000, 50000};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    const int c = sizes[k];
    if (c == 1007) grow_segment(comm);
    const int mine = me == 0 ? c - 1 : c;
    int* send = ints((size_t)mine);
    int* recv = ints((size_t)n * c);
    fill(send, mine);
    const int rc =
        served_blocking(MPI_Allgather(send, mine, MPI_INT, recv, mine, MPI_INT, comm));
    char what[80];
    snprintf(what, sizeof what, "counts %d / %d", c - 1, c);
    report(what, rc);
    CHECK(rc != MPI_SUCCESS, "%s: success with disagreeing counts", what);
    CHECK(class_of(rc) != MPI_ERR_IN_STATUS, "%s: MPI_ERR_IN_STATUS from MPI_Allgather", what);
    if (me != 0)
      CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "%s: %s, expected MPI_ERR_TRUNCATE", what,
            class_name(class_of(rc)));
    /* Not freed: after a failed call agx releases its sends to MPI rather than cancel
     * them (MPI need not cancel sends), so a large one may still read `send` here. */
    /* the ranks that failed early may have left the others mid-call: resynchronise on
     * a fresh communicator for the next size */
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    comm = fresh_comm();
  }
  MPI_Comm_free(&comm);
}

/* Every rank sends c ints; rank 0's receive blocks hold c - 1. */
static void case_truncate(void) {
  MPI_Comm comm = fresh_comm();
  if (n < 2) {
    MPI_Comm_free(&comm);
    return;
  }
  const int c = 64;
  int* send = ints(c);
  int* recv = ints((size_t)n * c);
  fill(send, c);
  int* counts = ints((size_t)n);
  int* displs = ints((size_t)n);
  for (int r = 0; r < n; ++r) counts[r] = me == 0 && r != 0 ? c - 1 : c, displs[r] = r * c;
  const int rc =
      served_blocking(MPI_Allgatherv(send, c, MPI_INT, recv, counts, displs, MPI_INT, comm));
  report("MPI_Allgatherv into short blocks", rc);
  CHECK(class_of(rc) != MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS from MPI_Allgatherv");
  if (me == 0)
    CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "%s, expected MPI_ERR_TRUNCATE",
          class_name(class_of(rc)));
  free(counts);
  free(displs);
  free(send);
  free(recv);
  MPI_Comm_free(&comm);
  MPI_Barrier(MPI_COMM_WORLD);
}

static int copies, deletes;
static int failing_copy(MPI_Comm old, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)old, (void)keyval, (void)extra, (void)in, (void)out, (void)flag;
  ++copies;
  return MPI_ERR_OTHER; /* this library refuses to be duplicated */
}
static int counting_delete(MPI_Comm comm, int keyval, void* attr, void* extra) {
  (void)comm, (void)keyval, (void)attr, (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

static void case_attributes(void) {
  MPI_Comm comm = fresh_comm();
  int keyval;
  MPI_Comm_create_keyval(failing_copy, counting_delete, &keyval, NULL);
  MPI_Comm_set_attr(comm, keyval, &copies);
  const int c = 10;
  int* send = ints(c);
  int* recv = ints((size_t)n * c);
  fill(send, c);
  for (int k = 0; k < 3; ++k) {
    const int rc = served_blocking(MPI_Allgather(send, c, MPI_INT, recv, c, MPI_INT, comm));
    expect_everywhere("MPI_Allgather on a communicator with a user attribute", rc, MPI_SUCCESS,
                      comm);
    CHECK(gathered(recv, c), "wrong data");
  }
  MPI_Request req;
  served_started(MPI_Iallgather(send, c, MPI_INT, recv, c, MPI_INT, comm, &req));
  served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(gathered(recv, c), "wrong data (nonblocking)");
  CHECK(copies == 0, "the copy callback ran %d times (the program never duplicated)", copies);
  CHECK(deletes == 0, "the delete callback ran %d times before MPI_Comm_free", deletes);
  MPI_Comm_free(&comm);
  CHECK(deletes == 1, "the delete callback ran %d times at MPI_Comm_free, expected once", deletes);
  printf("rank %d: attribute callbacks: %d copies, %d deletes\n", me, copies, deletes);
  MPI_Comm_free_keyval(&keyval);
  free(send);
  free(recv);
}

static void case_first_nonblocking(void) {
  for (int round = 0; round < 3; ++round) {
    MPI_Comm comm = fresh_comm(); /* never used before: no set-up yet */
    const int c = 64 << (3 * round);  /* 64, 512 and 4096 ints */
    int* send = ints((size_t)c);
    int* recv = ints((size_t)n * c);
    fill(send, c);
    MPI_Request req;
    int token = 42;
    if (n >= 2 && me == 1) MPI_Recv(&token, 1, MPI_INT, 0, 7, comm, MPI_STATUS_IGNORE);
    int rc = served_started(MPI_Iallgather(send, c, MPI_INT, recv, c, MPI_INT, comm, &req));
    CHECK(rc == MPI_SUCCESS, "MPI_Iallgather: %s", class_name(class_of(rc)));
    if (n >= 2 && me == 0) MPI_Ssend(&token, 1, MPI_INT, 1, 7, comm);
    rc = served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(rc == MPI_SUCCESS && gathered(recv, c), "round %d: MPI_Wait: %s or wrong data", round,
          class_name(class_of(rc)));
    /* then blocking calls on the same communicator, and nonblocking ones again */
    for (int i = 0; i < n * c; ++i) recv[i] = -77;
    rc = served_blocking(MPI_Allgather(send, c, MPI_INT, recv, c, MPI_INT, comm));
    CHECK(rc == MPI_SUCCESS && gathered(recv, c), "round %d: MPI_Allgather after", round);
    for (int i = 0; i < n * c; ++i) recv[i] = -77;
    if (n >= 2 && me == 1) MPI_Recv(&token, 1, MPI_INT, 0, 8, comm, MPI_STATUS_IGNORE);
    served_started(MPI_Iallgather(send, c, MPI_INT, recv, c, MPI_INT, comm, &req));
    if (n >= 2 && me == 0) MPI_Ssend(&token, 1, MPI_INT, 1, 8, comm);
    served_completed(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(gathered(recv, c), "round %d: MPI_Iallgather after", round);
    free(send);
    free(recv);
    MPI_Comm_free(&comm);
  }
  if (me == 0) printf("first-nonblocking: no deadlock\n");
}

/* Repeated calls of one shape (the interposer's repeated-call path, fast_call.cpp):
 * new buffers every call, in place after out of place, another type with the same
 * bytes, then errors after the shape has been seen (alias, NULL receive buffer), then
 * a freed communicator whose handle may come back for one of another size. */
static void case_repeat(void) {
  MPI_Comm comm = fresh_comm();
  const int c = 8;
  int* recv[2] = {ints((size_t)n * c), ints((size_t)n * c)};
  int* send[2] = {ints(c), ints(c)};
  for (int k = 0; k < 40; ++k) {
    int* s = send[k % 2];
    int* r = recv[(k / 2) % 2];
    for (int i = 0; i < n * c; ++i) r[i] = -77;
    for (int i = 0; i < c; ++i) s[i] = value(me, i) + k;
    CHECK(served_blocking(MPI_Allgather(s, c, MPI_INT, r, c, MPI_INT, comm)) == MPI_SUCCESS,
          "call %d failed", k);
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < c; ++i)
        CHECK(r[q * c + i] == value(q, i) + k, "call %d: block %d element %d is %d", k, q, i,
              r[q * c + i]);
  }
  /* in place, same counts */
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < n * c; ++i) recv[0][i] = -77;
    fill(recv[0] + me * c, c);
    expect_everywhere("in place after repeats",
                      served_blocking(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv[0],
                                                    c, MPI_INT, comm)),
                      MPI_SUCCESS, comm);
    CHECK(gathered(recv[0], c), "in place: wrong data");
  }
  /* the same bytes as MPI_BYTE */
  fill(send[0], c);
  expect_everywhere("bytes after ints",
                    served_blocking(MPI_Allgather(send[0], c * (int)sizeof(int), MPI_BYTE,
                                                  recv[1], c * (int)sizeof(int), MPI_BYTE, comm)),
                    MPI_SUCCESS, comm);
  CHECK(gathered(recv[1], c), "bytes: wrong data");
  fill(send[0], c);
  expect_everywhere("ints again",
                    served_blocking(MPI_Allgather(send[0], c, MPI_INT, recv[1], c, MPI_INT, comm)),
                    MPI_SUCCESS, comm);
  /* errors once the shape is known */
  fill(recv[0], c);
  expect_everywhere("alias after repeats",
                    served_blocking(MPI_Allgather(recv[0], c, MPI_INT, recv[0], c, MPI_INT, comm)),
                    MPI_ERR_BUFFER, comm);
  expect_everywhere("NULL receive buffer after repeats",
                    served_blocking(MPI_Allgather(send[0], c, MPI_INT, NULL, c, MPI_INT, comm)),
                    MPI_ERR_BUFFER, comm);
  MPI_Comm_free(&comm);
  /* a new communicator of another size, perhaps under the freed handle */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
  int hn = 0, hme = 0;
  MPI_Comm_size(half, &hn);
  MPI_Comm_rank(half, &hme);
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < n * c; ++i) recv[0][i] = -77;
    for (int i = 0; i < c; ++i) send[0][i] = hme * 100 + i;
    CHECK(served_blocking(MPI_Allgather(send[0], c, MPI_INT, recv[0], c, MPI_INT, half)) ==
              MPI_SUCCESS,
          "half: call failed");
    for (int q = 0; q < hn; ++q)
      for (int i = 0; i < c; ++i)
        CHECK(recv[0][q * c + i] == q * 100 + i, "half: block %d element %d", q, i);
    CHECK(hn == n || recv[0][hn * c] == -77, "half: wrote past its %d blocks", hn);
  }
  MPI_Comm_free(&half);
  free(recv[0]);
  free(recv[1]);
  free(send[0]);
  free(send[1]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* name = argc > 1 ? argv[1] : "";
  if (strcmp(name, "alias") == 0) case_alias();
  else if (strcmp(name, "start-active") == 0) case_start_active();
  else if (strcmp(name, "cancel") == 0) case_cancel();
  else if (strcmp(name, "free-running") == 0) case_free_running();
  else if (strcmp(name, "type-freed") == 0) case_type(1);
  else if (strcmp(name, "type-uncommitted") == 0) case_type(0);
  else if (strcmp(name, "counts") == 0) case_counts();
  else if (strcmp(name, "counts-grow") == 0) case_counts_grow();
  else if (strcmp(name, "truncate") == 0) case_truncate();
  else if (strcmp(name, "attributes") == 0) case_attributes();
  else if (strcmp(name, "first-nonblocking") == 0) case_first_nonblocking();
  else if (strcmp(name, "repeat") == 0) case_repeat();
  else {
    if (me == 0) fprintf(stderr, "semantics_c: unknown case '%s'\n", name);
    failures = 1;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) printf("semantics_c %s: %d ranks: %s\n", name, n, all == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  char program[64];
  snprintf(program, sizeof program, "semantics_c %s", name);
  const int unserved = served_check(me, program); /* after MPI_Finalize: all complete */
  return all == 0 && !unserved ? 0 : 1;
}
