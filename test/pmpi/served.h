/* Whether agx served what it should: a test program counts the all-gathers it makes and
 * those that completed with MPI_SUCCESS, then compares them with the interposer's
 * counters (agx_pmpi_calls, agx_pmpi_passthrough_calls; docs/interposer.md, "Counters
 * for tools and tests"), read with dlsym so that the program needs no agx header or
 * library (link with -ldl).
 *
 *   rc = served_blocking(MPI_Allgather(...));   a blocking all-gather: made; served when
 *                                               it returns MPI_SUCCESS
 *   rc = served_started(MPI_Iallgather(...));   a start or an init: made (served once a
 *   rc = served_completed(MPI_Wait(...));       completion of it returns MPI_SUCCESS)
 *   served_add(k);                              k more served (requests the program freed
 *                                               and saw complete by their data)
 *   bad = served_check(rank, "program");        after MPI_Finalize (every agx request has
 *                                               completed by then): 0 when the counters
 *                                               agree, else 1, each mismatch printed
 *
 * agx counts a call when it completes without error, and a call it hands to the MPI
 * library when it is made. Without AGX_TEST_EXPECT=mpi: every successful call was agx's,
 * none went to the MPI library, and under a forced AGX_ALGO (other than auto) every call
 * ran that algorithm at its radix. With AGX_TEST_EXPECT=mpi (run_pmpi.py --expect-mpi,
 * AGX_DISABLE=1): agx ran none and every call made went to the MPI library. */
#pragma once

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long served_made, served_ok;

static inline int served_blocking(int rc) {
  ++served_made;
  if (rc == 0) ++served_ok; /* MPI_SUCCESS */
  return rc;
}
static inline int served_started(int rc) {
  ++served_made;
  return rc;
}
static inline int served_completed(int rc) {
  if (rc == 0) ++served_ok;
  return rc;
}
static inline void served_add(unsigned long long k) { served_ok += k; }

static inline int served_check(int rank, const char* program) {
  typedef unsigned long long (*calls_fn)(const char*);
  typedef unsigned long long (*count_fn)(void);
  const calls_fn calls = (calls_fn)(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_calls");
  const count_fn passed = (count_fn)(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_passthrough_calls");
  const char* expect = getenv("AGX_TEST_EXPECT");
  const int expect_mpi = expect != NULL && strcmp(expect, "mpi") == 0;
  int bad = 0;
  if (calls == NULL || passed == NULL) {
    if (expect_mpi) return 0; /* no interposer: the MPI library served everything */
    fprintf(stderr, "rank %d: FAIL %s: the interposer's counters are missing (not preloaded?)\n",
            rank, program);
    return 1;
  }
  const unsigned long long agx = calls(NULL), mpi = passed();
  if (expect_mpi) {
    if (agx != 0 || mpi != served_made) {
      fprintf(stderr, "rank %d: FAIL %s: agx served %llu calls and passed %llu to MPI; expected "
              "none served, all %llu passed\n", rank, program, agx, mpi, served_made);
      bad = 1;
    }
    return bad;
  }
  if (agx != served_ok || mpi != 0) {
    fprintf(stderr, "rank %d: FAIL %s: agx served %llu calls and passed %llu to MPI; the "
            "program made %llu, %llu of them completed: all of those agx's, none passed\n",
            rank, program, agx, mpi, served_made, served_ok);
    bad = 1;
  }
  const char* algo = getenv("AGX_ALGO");
  if (algo != NULL && algo[0] != '\0' && strcmp(algo, "auto") != 0 && calls(algo) != agx) {
    fprintf(stderr, "rank %d: FAIL %s: only %llu of the %llu calls agx served ran AGX_ALGO=%s\n",
            rank, program, calls(algo), agx, algo);
    bad = 1;
  }
  if (rank == 0 && !bad)
    printf("%s: agx served %llu calls on rank 0, none passed to MPI\n", program, agx);
  return bad;
}
