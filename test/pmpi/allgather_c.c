/* An unmodified MPI program (plain C, mpi.h only) that checks MPI_Allgather,
 * MPI_Allgatherv, MPI_Iallgather and MPI_Iallgatherv against analytic patterns:
 * counts 0..1000, in place, derived datatypes (vector, resized, struct), ranks mixing
 * contiguous and derived types, allgatherv with zero counts and reversed, gapped
 * displacements, world / split / reversed / duplicated communicators, an
 * inter-communicator (passed to MPI), and MPI_ERRORS_RETURN error classes.
 * Guard values around and between receive blocks must stay untouched.
 *
 * When libagx_pmpi.so is preloaded it also proves the calls went through agx: it
 * reads the interposer's counters with dlsym and compares them with the number of
 * calls it made. AGX_TEST_EXPECT=agx (default) requires the interposer,
 * AGX_TEST_EXPECT=mpi requires every call to pass through to MPI (AGX_DISABLE=1).
 * Exit status 0 on success; failures are printed with the rank. */

#include <mpi.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD (-77)
#define MAX_COUNT 1000

static int world_rank, world_size, failures;
static unsigned long long agx_calls_made, mpi_calls_made; /* what the counters should say */
static int expect_agx = 1;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      if (failures++ < 20) {                                        \
        fprintf(stderr, "rank %d: FAIL %s:%d: ", world_rank, __func__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                               \
        fprintf(stderr, "\n");                                      \
      }                                                             \
    }                                                               \
  } while (0)

static int value(int rank, int i) { return rank * 100003 + i * 7 + 1; }

static int* alloc_ints(size_t n) {
  int* p = malloc((n == 0 ? 1 : n) * sizeof(int));
  if (p == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t i = 0; i < n; ++i) p[i] = GUARD;
  return p;
}

static void ok(int rc, const char* what) {
  CHECK(rc == MPI_SUCCESS, "%s returned %d", what, rc);
  if (rc == MPI_SUCCESS) ++agx_calls_made;
}

/* The interposer's count of encoded calls (AGX_COMPRESS), 0 when it is not loaded. */
static unsigned long long encoded_calls(void) {
  typedef unsigned long long (*count_fn)(void);
  count_fn f = (count_fn)(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_encoded_calls");
  return f != NULL ? f() : 0;
}

/* Whether every blocking call with bytes should run encoded: AGX_COMPRESS=lz4 or zstd
   with AGX_COMPRESS_MIN_BYTES=1, through agx. */
static int expect_compressed(void) {
  const char* c = getenv("AGX_COMPRESS");
  const char* m = getenv("AGX_COMPRESS_MIN_BYTES");
  return expect_agx && c != NULL && (strcmp(c, "lz4") == 0 || strcmp(c, "zstd") == 0) &&
         m != NULL && strcmp(m, "1") == 0;
}

/* MPI_Allgather of MPI_INT, out of place and in place, with guards at both ends. */
static void test_uniform(MPI_Comm comm) {
  static const int counts[] = {0, 1, 7, MAX_COUNT};
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    const int c = counts[k];
    for (int in_place = 0; in_place < 2; ++in_place) {
      int* send = alloc_ints((size_t)c);
      int* recv = alloc_ints((size_t)n * c + 2);
      for (int i = 0; i < c; ++i) send[i] = value(r, i);
      if (in_place) {
        for (int i = 0; i < c; ++i) recv[1 + r * c + i] = value(r, i);
        ok(MPI_Allgather(MPI_IN_PLACE, -5, MPI_DATATYPE_NULL, recv + 1, c, MPI_INT, comm),
           "MPI_Allgather in place");
      } else {
        ok(MPI_Allgather(send, c, MPI_INT, recv + 1, c, MPI_INT, comm), "MPI_Allgather");
      }
      CHECK(recv[0] == GUARD && recv[1 + n * c] == GUARD, "guard overwritten (count %d)", c);
      for (int b = 0; b < n; ++b)
        for (int i = 0; i < c; ++i)
          CHECK(recv[1 + b * c + i] == value(b, i), "count %d in_place %d block %d elem %d: %d",
                c, in_place, b, i, recv[1 + b * c + i]);
      /* The same shape again (the interposer's repeated-call path): under AGX_COMPRESS
         (pmpi-c-compress-*) each call still runs encoded, not only the first. */
      if (!in_place && c > 0) {
        const unsigned long long encoded_before = encoded_calls();
        for (int rep = 0; rep < 3; ++rep)
          ok(MPI_Allgather(send, c, MPI_INT, recv + 1, c, MPI_INT, comm), "MPI_Allgather again");
        if (expect_compressed())
          CHECK(encoded_calls() == encoded_before + 3, "repeated MPI_Allgather of count %d ran "
                "encoded %llu times of 3 under AGX_COMPRESS", c, encoded_calls() - encoded_before);
        for (int b = 0; b < n; ++b)
          for (int i = 0; i < c; ++i)
            CHECK(recv[1 + b * c + i] == value(b, i), "repeated: count %d block %d elem %d: %d",
                  c, b, i, recv[1 + b * c + i]);
      }
      free(send);
      free(recv);
    }
  }
}

/* MPI_Allgatherv with zero counts and blocks in reverse rank order, gaps between. */
static int mpich_single_rank_v_bug(int n) {
  /* MPICH 4.0.2 (Debian 12) ignores displs[0] of MPI_Allgatherv on a one-rank
     communicator; when every call passes through to MPI that is not agx's to test. */
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  return !expect_agx && n == 1 && strstr(version, "MPICH") != NULL;
}

static void test_varying(MPI_Comm comm, int nonblocking) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  if (mpich_single_rank_v_bug(n)) return;
  int* counts = malloc(sizeof(int) * (size_t)n);
  int* displs = malloc(sizeof(int) * (size_t)n);
  int at = 1;
  for (int b = n - 1; b >= 0; --b) {
    counts[b] = b % 3 == 1 ? 0 : 3 * b + 2;
    displs[b] = at;
    at += counts[b] + 2; /* two guard elements between blocks */
  }
  for (int in_place = 0; in_place < 2; ++in_place) {
    int* send = alloc_ints((size_t)counts[r]);
    int* recv = alloc_ints((size_t)at + 1);
    for (int i = 0; i < counts[r]; ++i) send[i] = value(r, i);
    if (in_place)
      for (int i = 0; i < counts[r]; ++i) recv[displs[r] + i] = value(r, i);
    const void* sb = in_place ? MPI_IN_PLACE : (const void*)send;
    if (nonblocking) {
      const unsigned long long encoded_before = encoded_calls();
      MPI_Request req = MPI_REQUEST_NULL;
      ok(MPI_Iallgatherv(sb, counts[r], MPI_INT, recv, counts, displs, MPI_INT, comm, &req),
         "MPI_Iallgatherv");
      int flag = 0;
      MPI_Status st;
      while (!flag) MPI_Test(&req, &flag, &st);
      CHECK(req == MPI_REQUEST_NULL, "MPI_Test left the request active");
      /* ... and MPI_Iallgatherv too, in place and out of place, zero blocks among them. */
      if (expect_compressed() && at > 1 + 2 * n)
        CHECK(encoded_calls() == encoded_before + 1, "MPI_Iallgatherv did not run encoded "
              "under AGX_COMPRESS (%llu encoded calls before, %llu after)", encoded_before,
              encoded_calls());
    } else {
      const unsigned long long encoded_before = encoded_calls();
      ok(MPI_Allgatherv(sb, counts[r], MPI_INT, recv, counts, displs, MPI_INT, comm),
         "MPI_Allgatherv");
      /* AGX_COMPRESS with AGX_COMPRESS_MIN_BYTES=1 (pmpi-c-compress-*): every blocking
         call with a non-empty block runs encoded, MPI_Allgatherv too. */
      if (expect_compressed() && at > 1 + 2 * n)
        CHECK(encoded_calls() == encoded_before + 1, "MPI_Allgatherv did not run encoded "
              "under AGX_COMPRESS (%llu encoded calls before, %llu after)", encoded_before,
              encoded_calls());
    }
    int expect_guard = 0;
    for (int p = 0; p <= at; ++p) {
      int owner = -1;
      for (int b = 0; b < n; ++b)
        if (p >= displs[b] && p < displs[b] + counts[b]) owner = b;
      if (owner < 0)
        expect_guard += recv[p] != GUARD;
      else
        CHECK(recv[p] == value(owner, p - displs[owner]), "in_place %d pos %d block %d: %d",
              in_place, p, owner, recv[p]);
    }
    CHECK(expect_guard == 0, "%d guard elements overwritten", expect_guard);
    free(send);
    free(recv);
  }
  free(counts);
  free(displs);
}

/* Non-contiguous datatypes on either side, mixed by rank parity. */
static void test_derived(MPI_Comm comm) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  const int c = 5;
  MPI_Datatype every_other, wide_int;
  MPI_Type_vector(c, 1, 2, MPI_INT, &every_other); /* c ints, stride 2 */
  MPI_Type_commit(&every_other);
  MPI_Type_create_resized(MPI_INT, 0, 3 * (MPI_Aint)sizeof(int), &wide_int); /* int in 3 slots */
  MPI_Type_commit(&wide_int);
  for (int mode = 0; mode < 4; ++mode) {
    /* mode 0: vector send, int recv; 1: int send, wide recv; 2: both derived;
       3: rank parity decides each side */
    int vec_send = mode == 0 || mode == 2 || (mode == 3 && r % 2 == 0);
    int wide_recv = mode == 1 || mode == 2 || (mode == 3 && r % 2 == 1);
    int* send = alloc_ints(2 * (size_t)c);
    for (int i = 0; i < c; ++i) send[vec_send ? 2 * i : i] = value(r, i);
    const size_t slots = wide_recv ? 3 : 1;
    int* recv = alloc_ints((size_t)n * c * slots + 1);
    int rc = vec_send ? MPI_Allgather(send, 1, every_other, recv, c, wide_recv ? wide_int : MPI_INT, comm)
                      : MPI_Allgather(send, c, MPI_INT, recv, c, wide_recv ? wide_int : MPI_INT, comm);
    ok(rc, "MPI_Allgather derived");
    for (size_t p = 0; p < (size_t)n * c * slots + 1; ++p) {
      const size_t e = p / slots; /* element index over all blocks */
      if (p % slots == 0 && e < (size_t)n * c)
        CHECK(recv[p] == value((int)e / c, (int)e % c), "mode %d pos %zu: %d", mode, p, recv[p]);
      else
        CHECK(recv[p] == GUARD, "mode %d gap %zu overwritten: %d", mode, p, recv[p]);
    }
    free(send);
    free(recv);
  }
  /* In place with the wide receive type. */
  int* recv = alloc_ints((size_t)n * c * 3);
  for (int i = 0; i < c; ++i) recv[3 * (r * c + i)] = value(r, i);
  ok(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, wide_int, comm),
     "MPI_Allgather in place wide");
  for (int p = 0; p < n * c * 3; ++p)
    CHECK(recv[p] == (p % 3 == 0 ? value(p / 3 / c, p / 3 % c) : GUARD), "in-place wide %d: %d",
          p, recv[p]);
  free(recv);
  MPI_Type_free(&every_other);
  MPI_Type_free(&wide_int);
}

/* A struct datatype {int, double} with padding, and struct-vs-basic signatures. */
struct pair {
  int i;
  double d;
};

static void test_struct(MPI_Comm comm) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  const int c = 3;
  int blocklens[2] = {1, 1};
  MPI_Aint disps[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
  MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, tmp, pair_type;
  MPI_Type_create_struct(2, blocklens, disps, types, &tmp);
  MPI_Type_create_resized(tmp, 0, sizeof(struct pair), &pair_type);
  MPI_Type_commit(&pair_type);
  MPI_Type_free(&tmp);
  struct pair send[3];
  struct pair* recv = malloc(sizeof(struct pair) * (size_t)(n * c));
  memset(recv, 0xA5, sizeof(struct pair) * (size_t)(n * c));
  for (int k = 0; k < c; ++k) send[k].i = value(r, k), send[k].d = 0.5 * value(r, k);
  ok(MPI_Allgather(send, c, pair_type, recv, c, pair_type, comm), "MPI_Allgather struct");
  for (int e = 0; e < n * c; ++e)
    CHECK(recv[e].i == value(e / c, e % c) && recv[e].d == 0.5 * value(e / c, e % c),
          "struct elem %d: %d %g", e, recv[e].i, recv[e].d);
  free(recv);
  MPI_Type_free(&pair_type);
}

/* Nonblocking: MPI_Wait, MPI_Waitall over two (more in nonblocking_c.c). */
static void test_nonblocking(MPI_Comm comm) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  const int c = 4;
  int send[4];
  for (int i = 0; i < c; ++i) send[i] = value(r, i);
  int* a = alloc_ints((size_t)n * c);
  int* b = alloc_ints((size_t)n * c);
  MPI_Request reqs[2];
  const unsigned long long encoded_before = encoded_calls();
  ok(MPI_Iallgather(send, c, MPI_INT, a, c, MPI_INT, comm, &reqs[0]), "MPI_Iallgather");
  MPI_Status st;
  MPI_Wait(&reqs[0], &st);
  CHECK(reqs[0] == MPI_REQUEST_NULL, "MPI_Wait left the request active");
  for (int e = 0; e < n * c; ++e) CHECK(a[e] == value(e / c, e % c), "wait elem %d: %d", e, a[e]);
  for (int e = 0; e < n * c; ++e) a[e] = b[e] = GUARD;
  ok(MPI_Iallgather(send, c, MPI_INT, a, c, MPI_INT, comm, &reqs[0]), "MPI_Iallgather 1");
  ok(MPI_Iallgather(send, c, MPI_INT, b, c, MPI_INT, comm, &reqs[1]), "MPI_Iallgather 2");
  MPI_Status statuses[2];
  MPI_Waitall(2, reqs, statuses);
  for (int e = 0; e < n * c; ++e)
    CHECK(a[e] == value(e / c, e % c) && b[e] == value(e / c, e % c), "waitall elem %d", e);
  /* AGX_COMPRESS (pmpi-c-compress-*): the three calls ran encoded, two of them outstanding
     together; an in-place one, then one of zero-size blocks, which is not encoded. */
  if (expect_compressed())
    CHECK(encoded_calls() == encoded_before + 3, "MPI_Iallgather did not run encoded under "
          "AGX_COMPRESS (%llu encoded calls before, %llu after)", encoded_before, encoded_calls());
  for (int e = 0; e < n * c; ++e) a[e] = e / c == r ? value(r, e % c) : GUARD;
  ok(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, c, MPI_INT, comm, &reqs[0]),
     "MPI_Iallgather in place");
  ok(MPI_Iallgather(send, 0, MPI_INT, b, 0, MPI_INT, comm, &reqs[1]), "MPI_Iallgather 0 ints");
  MPI_Waitall(2, reqs, statuses);
  for (int e = 0; e < n * c; ++e) CHECK(a[e] == value(e / c, e % c), "in place elem %d: %d", e, a[e]);
  if (expect_compressed())
    CHECK(encoded_calls() == encoded_before + 4, "MPI_Iallgather in place did not run encoded "
          "(or the zero-size one did): %llu encoded calls before, %llu after", encoded_before,
          encoded_calls());
  free(a);
  free(b);
}

static void test_all(MPI_Comm comm) {
  test_uniform(comm);
  test_varying(comm, 0);
  test_varying(comm, 1);
  test_derived(comm);
  test_struct(comm);
  test_nonblocking(comm);
}

/* An inter-communicator between the even and odd world ranks: agx passes it to MPI. */
static void test_intercomm(void) {
  if (world_size < 2) return;
  MPI_Comm half, inter;
  const int color = world_rank % 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 99, &inter);
  int remote = 0;
  MPI_Comm_remote_size(inter, &remote);
  int* recv = alloc_ints((size_t)remote);
  CHECK(MPI_Allgather(&world_rank, 1, MPI_INT, recv, 1, MPI_INT, inter) == MPI_SUCCESS,
        "intercomm allgather");
  ++mpi_calls_made;
  for (int i = 0; i < remote; ++i)
    CHECK(recv[i] == 2 * i + (1 - color), "intercomm elem %d: %d", i, recv[i]);
  free(recv);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

static int last_handled_class = MPI_SUCCESS, handler_calls = 0;

static void count_errors(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  MPI_Error_class(*code, &last_handled_class);
  ++handler_calls;
}

static int error_class_of(int rc) {
  int c = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
  return c;
}

/* Bad arguments on a communicator with MPI_ERRORS_RETURN and with a user handler. */
static void test_errors(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int send[2] = {1, 2}, recv[2 * 64], counts[64], displs[64];
  for (int i = 0; i < 64; ++i) counts[i] = 1, displs[i] = i;
  CHECK(error_class_of(MPI_Allgather(send, -1, MPI_INT, recv, 1, MPI_INT, comm)) == MPI_ERR_COUNT,
        "negative sendcount");
  CHECK(error_class_of(MPI_Allgather(send, 1, MPI_INT, recv, -1, MPI_INT, comm)) == MPI_ERR_COUNT,
        "negative recvcount");
  CHECK(error_class_of(MPI_Allgather(send, 1, MPI_INT, recv, 1, MPI_DATATYPE_NULL, comm)) ==
            MPI_ERR_TYPE,
        "null recvtype");
  CHECK(error_class_of(MPI_Allgather(send, 1, MPI_INT, NULL, 1, MPI_INT, comm)) == MPI_ERR_BUFFER,
        "null recvbuf");
  CHECK(error_class_of(MPI_Allgather(send, 2, MPI_INT, recv, 1, MPI_INT, comm)) ==
            MPI_ERR_TRUNCATE,
        "send larger than receive block");
  counts[0] = -3;
  CHECK(error_class_of(MPI_Allgatherv(send, world_rank == 0 ? -3 : 1, MPI_INT, recv, counts,
                                      displs, MPI_INT, comm)) == MPI_ERR_COUNT,
        "negative recvcounts[0]");
  /* Sizes that overflow, through a 2^40-byte contiguous type (counts fit an int, bytes
   * do not fit anything): MPI_ERR_COUNT, never a wrapped size. Nothing is touched. */
  MPI_Datatype mib, tib;
  MPI_Type_contiguous(1 << 20, MPI_BYTE, &mib);
  MPI_Type_contiguous(1 << 20, mib, &tib);
  MPI_Type_commit(&tib);
  CHECK(error_class_of(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1 << 23, tib,
                                     comm)) == MPI_ERR_COUNT,
        "a 2^63-byte block");
  if (world_size > 1)
    CHECK(error_class_of(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1 << 22, tib,
                                       comm)) == MPI_ERR_COUNT,
          "2^62-byte blocks adding up to 2^63 bytes or more");
  for (int i = 0; i < 64; ++i) counts[i] = 0, displs[i] = 0;
  counts[0] = 2;
  displs[0] = (1 << 23) - 1; /* starts below 2^63, ends past it */
  CHECK(error_class_of(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts, displs,
                                      tib, comm)) == MPI_ERR_COUNT,
        "displacement + count past the address space");
  for (int i = 0; i < 64; ++i) counts[i] = 1, displs[i] = i;
  MPI_Type_free(&tib);
  MPI_Type_free(&mib);
  MPI_Request req = MPI_REQUEST_NULL;
  CHECK(error_class_of(MPI_Iallgather(send, -1, MPI_INT, recv, 1, MPI_INT, comm, &req)) ==
            MPI_ERR_COUNT,
        "negative count, nonblocking");
  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(count_errors, &handler);
  MPI_Comm_set_errhandler(comm, handler);
  MPI_Errhandler_free(&handler);
  const int rc = MPI_Allgather(send, 1, MPI_INT, recv, -7, MPI_INT, comm);
  CHECK(handler_calls == 1 && last_handled_class == MPI_ERR_COUNT,
        "user error handler: %d calls, class %d", handler_calls, last_handled_class);
  CHECK(error_class_of(rc) == MPI_ERR_COUNT, "user handler return code %d", rc);
  MPI_Comm_free(&comm);
}

/* The interposer's counters, read with dlsym (absent when it is not preloaded). */
static void check_counters(const char* algo) {
  typedef unsigned long long (*calls_fn)(const char*);
  typedef unsigned long long (*pass_fn)(void);
  calls_fn calls = (calls_fn)(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_calls");
  pass_fn passed = (pass_fn)(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_passthrough_calls");
  if (!expect_agx) {
    if (calls != NULL) {
      CHECK(calls(NULL) == 0, "AGX_DISABLE set but %llu calls went through agx", calls(NULL));
      CHECK(passed() == agx_calls_made + mpi_calls_made, "passed %llu, expected %llu", passed(),
            agx_calls_made + mpi_calls_made);
    }
    return;
  }
  CHECK(calls != NULL && passed != NULL, "libagx_pmpi.so is not loaded (LD_PRELOAD?)");
  if (calls == NULL || passed == NULL) return;
  CHECK(calls(NULL) == agx_calls_made, "agx ran %llu calls, the test made %llu", calls(NULL),
        agx_calls_made);
  CHECK(passed() == mpi_calls_made, "%llu calls passed to MPI, expected %llu", passed(),
        mpi_calls_made);
  /* A forced algorithm (AGX_ALGO other than auto) serves every call, at its radix: the
     counter takes AGX_ALGO's text as is ("bruck:k=4" counts that radix only, "bruck" every
     radix of bruck). An invalid name (AGX_TEST_ALGO_INVALID=1, set by run_pmpi.py for the
     runs that test one) counts no calls: agx uses the automatic choice. */
  const char* invalid = getenv("AGX_TEST_ALGO_INVALID");
  if (algo != NULL && algo[0] != '\0' && strcmp(algo, "auto") != 0 &&
      !(invalid != NULL && strcmp(invalid, "1") == 0))
    CHECK(calls(algo) == calls(NULL), "only %llu of %llu calls ran %s", calls(algo), calls(NULL),
          algo);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const char* expect = getenv("AGX_TEST_EXPECT");
  expect_agx = expect == NULL || strcmp(expect, "mpi") != 0;

  test_all(MPI_COMM_WORLD);
  MPI_Comm split, reversed;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &split);
  test_all(split);
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &reversed);
  test_uniform(reversed);
  test_varying(reversed, 0);
  test_derived(reversed);
  MPI_Comm_free(&split);
  MPI_Comm_free(&reversed);
  test_intercomm();
  if (expect_agx) test_errors();
  check_counters(getenv("AGX_ALGO"));

  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("allgather_c: %d ranks, %llu calls checked: %s\n", world_size, agx_calls_made,
           all_failures == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
