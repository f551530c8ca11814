/* The collectives agx issues to set up a new communicator (issue 16): an unmodified MPI
 * program that counts, through its own MPI_/PMPI_ wrappers of every collective libagx
 * and the interposer call, what happens inside its first MPI_Allgather on a new
 * communicator and inside a repeated one. Built with -rdynamic, so that libagx's calls
 * bind to these wrappers; each wrapper forwards to the MPI library's PMPI_ entry point.
 *
 *   setup_count_c MAX_FIRST [MAX_SECOND]
 *       fails when the first call issues more than MAX_FIRST collectives, the second more
 *       than MAX_SECOND (default 0; `auto` makes the node state there, docs/hierarchy.md),
 *       or the third any
 * Prints one line per rank 0: "setup collectives: first call N (...), second call M (...),
 * repeated call K (...)". */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { max_kinds = 32 };
static const char* names[max_kinds];
static int counts[max_kinds];
static int kinds = 0;
static int counting = 0;

static void count(const char* name) {
  if (!counting) return;
  for (int i = 0; i < kinds; ++i)
    if (strcmp(names[i], name) == 0) {
      ++counts[i];
      return;
    }
  if (kinds < max_kinds) names[kinds] = name, counts[kinds++] = 1;
}

static int total(void) {
  int t = 0;
  for (int i = 0; i < kinds; ++i) t += counts[i];
  return t;
}

static void list(char* out, size_t size) {
  out[0] = '\0';
  for (int i = 0; i < kinds; ++i) {
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s %d", i ? ", " : "", names[i], counts[i]);
  }
}

static void reset(void) { kinds = 0; }

int MPI_Comm_create(MPI_Comm c, MPI_Group g, MPI_Comm* n) { count("Comm_create"); return PMPI_Comm_create(c, g, n); }
int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int t, MPI_Comm* n) { count("Comm_create_group"); return PMPI_Comm_create_group(c, g, t, n); }
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm* n) { count("Comm_split"); return PMPI_Comm_split(c, color, key, n); }
int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm* n) { count("Comm_split_type"); return PMPI_Comm_split_type(c, type, key, info, n); }
int MPI_Comm_dup(MPI_Comm c, MPI_Comm* n) { count("Comm_dup"); return PMPI_Comm_dup(c, n); }
int MPI_Comm_idup(MPI_Comm c, MPI_Comm* n, MPI_Request* r) { count("Comm_idup"); return PMPI_Comm_idup(c, n, r); }
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) { return PMPI_Allreduce(s, r, n, t, o, c); }
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request* q) { count("Iallreduce"); return PMPI_Iallreduce(s, r, n, t, o, c, q); }
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) { count("Bcast"); return PMPI_Bcast(b, n, t, root, c); }
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) { count("Ibcast"); return PMPI_Ibcast(b, n, t, root, c, q); }
int MPI_Barrier(MPI_Comm c) { return PMPI_Barrier(c); }
int MPI_Ibarrier(MPI_Comm c, MPI_Request* q) { count("Ibarrier"); return PMPI_Ibarrier(c, q); }
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c) { count("Reduce"); return PMPI_Reduce(s, r, n, t, o, root, c); }
int MPI_Win_allocate_shared(MPI_Aint b, int u, MPI_Info i, MPI_Comm c, void* p, MPI_Win* w) { count("Win_allocate_shared"); return PMPI_Win_allocate_shared(b, u, i, c, p, w); }

/* libagx and the interposer call these PMPI_ forms themselves (an MPI_ call would
 * re-enter the interposer): counted here (MPI_Allreduce and MPI_Barrier above come here
 * too), forwarded to the MPI library's own. */
typedef int (*allgather_fn)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
typedef int (*allreduce_fn)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*barrier_fn)(MPI_Comm);
int PMPI_Allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
  static allgather_fn next = NULL;
  if (!next) *(void**)&next = dlsym(RTLD_NEXT, "PMPI_Allgather");  /* POSIX: dlsym's result as a function */
  count("Allgather");
  return next(s, sc, st, r, rc, rt, c);
}
int PMPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
  static allreduce_fn next = NULL;
  if (!next) *(void**)&next = dlsym(RTLD_NEXT, "PMPI_Allreduce");  /* POSIX: dlsym's result as a function */
  count("Allreduce");
  return next(s, r, n, t, o, c);
}
int PMPI_Barrier(MPI_Comm c) {
  static barrier_fn next = NULL;
  if (!next) *(void**)&next = dlsym(RTLD_NEXT, "PMPI_Barrier");  /* POSIX: dlsym's result as a function */
  count("Barrier");
  return next(c);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int max_first = argc > 1 ? atoi(argv[1]) : 0;
  const int max_second = argc > 2 ? atoi(argv[2]) : 0;
  int send[4] = {me, me + 1, me + 2, me + 3};
  int* recv = calloc(4 * (size_t)n, sizeof(int));
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);

  char lists[3][512];
  int issued[3];
  int bad = 0;
  for (int call = 0; call < 3; ++call) {
    reset();
    counting = 1;
    MPI_Allgather(send, 4, MPI_INT, recv, 4, MPI_INT, c);
    counting = 0;
    issued[call] = total();
    list(lists[call], sizeof lists[call]);
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < 4; ++k) bad |= recv[4 * r + k] != r + k;
    memset(recv, 0, 4 * (size_t)n * sizeof(int));
  }

  int worst[4] = {issued[0], issued[1], issued[2], bad}, all[4];
  PMPI_Allreduce(worst, all, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0)
    printf("setup collectives: first call %d (%s), second call %d (%s), repeated call %d (%s)\n",
           issued[0], lists[0], issued[1], lists[1], issued[2], lists[2]);
  int rc = 0;
  if (me == 0 && all[3]) fprintf(stderr, "setup_count: wrong data\n"), rc = 1;
  if (me == 0 && all[0] > max_first)
    fprintf(stderr, "setup_count: a first call issued %d collectives, more than %d\n", all[0],
            max_first), rc = 1;
  if (me == 0 && all[1] > max_second)
    fprintf(stderr, "setup_count: a second call issued %d collectives, more than %d\n", all[1],
            max_second), rc = 1;
  if (me == 0 && all[2] > 0)
    fprintf(stderr, "setup_count: a repeated call issued %d collectives\n", all[2]), rc = 1;
  MPI_Comm_free(&c);
  free(recv);
  MPI_Finalize();
  return rc;
}
