/* Failure paths of the interposer: an unmodified MPI program run with
 * LD_PRELOAD="libfault.so libagx_pmpi.so" and AGX_ALGO naming a point-to-point algorithm
 * whose ranks all make the same calls (ring, bruck, or recursive_doubling at a power of
 * two). One MPI call that agx makes fails on purpose, on every rank at the same call,
 * inside MPI_Allgather, MPI_Allgatherv or MPI_Iallgather + MPI_Wait on a communicator
 * with MPI_ERRORS_RETURN. Then:
 *   - the call (or the wait) returns an error code of the injected class;
 *   - no request agx made is left in flight and no datatype unfreed (the fault
 *     library counts them);
 *   - a clean MPI_Allgather on the same communicator gathers the right data.
 * The fault library's functions are found with dlsym; exit status 0 on success. */

#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void (*arm_fn)(const char*, long, int);
typedef void (*void_fn)(void);
typedef long (*long_fn)(void);
static arm_fn fault_arm;
static void_fn fault_disarm;
static long_fn fault_injected, fault_live_requests, fault_live_types;

static int rank, nranks, failures, checked;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond) && failures++ < 20) {                               \
      fprintf(stderr, "rank %d: FAIL %s: ", rank, what);            \
      fprintf(stderr, __VA_ARGS__);                                 \
      fprintf(stderr, "\n");                                        \
    }                                                               \
  } while (0)

enum { COUNT = 300, MAXRANKS = 64 };
static int sendbuf[COUNT], recvbuf[COUNT * MAXRANKS];

static int value(int r, int i, int salt) { return salt * 1000003 + r * 10007 + i + 1; }

static void fill(int salt) {
  for (int i = 0; i < COUNT; ++i) sendbuf[i] = value(rank, i, salt);
  for (int i = 0; i < COUNT * nranks; ++i) recvbuf[i] = -1;
}

static int class_of(int rc) {
  int c = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
  return c;
}

/* After a fault: the right class, nothing left behind, and a clean call that works. */
static void after(const char* what, int rc, int want_class, long injected_before, MPI_Comm comm,
                  int salt) {
  CHECK(fault_injected() == injected_before + 1, "the fault was not injected");
  CHECK(class_of(rc) == want_class, "returned class %d, injected %d", class_of(rc), want_class);
  CHECK(fault_live_requests() == 0, "%ld requests left in flight", fault_live_requests());
  CHECK(fault_live_types() == 0, "%ld datatypes left unfreed", fault_live_types());
  fill(salt);
  rc = MPI_Allgather(sendbuf, COUNT, MPI_INT, recvbuf, COUNT, MPI_INT, comm);
  CHECK(rc == MPI_SUCCESS, "the clean call after the fault returned %d", rc);
  int wrong = 0;
  for (int r = 0; r < nranks; ++r)
    for (int i = 0; i < COUNT; ++i) wrong += recvbuf[r * COUNT + i] != value(r, i, salt);
  CHECK(wrong == 0, "the clean call after the fault gathered %d wrong elements", wrong);
  ++checked;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const char* what = "setup";
  fault_arm = (arm_fn)(size_t)dlsym(RTLD_DEFAULT, "fault_arm");
  fault_disarm = (void_fn)(size_t)dlsym(RTLD_DEFAULT, "fault_disarm");
  fault_injected = (long_fn)(size_t)dlsym(RTLD_DEFAULT, "fault_injected");
  fault_live_requests = (long_fn)(size_t)dlsym(RTLD_DEFAULT, "fault_live_requests");
  fault_live_types = (long_fn)(size_t)dlsym(RTLD_DEFAULT, "fault_live_types");
  if (!fault_arm || !fault_disarm || !fault_injected || !fault_live_requests ||
      !fault_live_types || !dlsym(RTLD_DEFAULT, "agx_pmpi_calls") || nranks > MAXRANKS) {
    if (rank == 0) fprintf(stderr, "pmpi_faults: needs libfault.so and libagx_pmpi.so preloaded\n");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  fill(1);
  MPI_Allgather(sendbuf, COUNT, MPI_INT, recvbuf, COUNT, MPI_INT, comm); /* first use: setup */

  static const struct {
    const char* call;
    long at;
    int error_class;
  } faults[] = {{"MPI_Irecv", 1, MPI_ERR_OTHER}, {"MPI_Isend", 1, MPI_ERR_INTERN},
                {"MPI_Waitall", 1, MPI_ERR_OTHER}, {"MPI_Isend", 2, MPI_ERR_OTHER}};
  int salt = 2;
  for (size_t k = 0; k < sizeof faults / sizeof faults[0]; ++k) {
    char name[128];
    long before = fault_injected();
    int counts[MAXRANKS], displs[MAXRANKS];
    for (int r = 0; r < nranks; ++r) counts[r] = COUNT, displs[r] = r * COUNT;
    MPI_Request req = MPI_REQUEST_NULL;

    snprintf(name, sizeof name, "MPI_Allgather, %s #%ld", faults[k].call, faults[k].at);
    what = name;
    fill(salt);
    fault_arm(faults[k].call, faults[k].at, faults[k].error_class);
    int rc = MPI_Allgather(sendbuf, COUNT, MPI_INT, recvbuf, COUNT, MPI_INT, comm);
    fault_disarm();
    after(what, rc, faults[k].error_class, before, comm, salt++);

    snprintf(name, sizeof name, "MPI_Allgatherv in place, %s #%ld", faults[k].call, faults[k].at);
    before = fault_injected();
    fill(salt);
    fault_arm(faults[k].call, faults[k].at, faults[k].error_class);
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, counts, displs, MPI_INT, comm);
    fault_disarm();
    after(what, rc, faults[k].error_class, before, comm, salt++);

    /* A started call moves its data in MPI_Wait, testing where a blocking one waits:
     * the fault surfaces either from MPI_Iallgather (no request) or from MPI_Wait. */
    const char* nb_call = strcmp(faults[k].call, "MPI_Waitall") == 0 ? "MPI_Testall"
                                                                     : faults[k].call;
    snprintf(name, sizeof name, "MPI_Iallgather + MPI_Wait, %s #%ld", nb_call, faults[k].at);
    before = fault_injected();
    fill(salt);
    fault_arm(nb_call, faults[k].at, faults[k].error_class);
    rc = MPI_Iallgather(sendbuf, COUNT, MPI_INT, recvbuf, COUNT, MPI_INT, comm, &req);
    if (rc != MPI_SUCCESS) {
      CHECK(req == MPI_REQUEST_NULL, "a failed MPI_Iallgather handed out a request");
    } else {
      rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
      CHECK(req == MPI_REQUEST_NULL, "MPI_Wait left the request set");
    }
    fault_disarm();
    after(what, rc, faults[k].error_class, before, comm, salt++);
  }
  MPI_Comm_free(&comm);

  int totals[2] = {failures, checked}, sums[2] = {0, 0};
  MPI_Reduce(totals, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("pmpi_faults N=%d: %d faults returned and cleaned up, %d failures\n", nranks,
           sums[1] / nranks, sums[0]);
  MPI_Finalize();
  return sums[0] == 0 ? 0 : 1;
}
