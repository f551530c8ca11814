/* MPI_Alloc_mem as Global Arrays (ARMCI over MPI, NWChem) uses it, under libagx_pmpi.so:
 * many allocations and frees of many sizes, some held at once, windows created over
 * them (lib/pmpi/alloc_mem.cpp, lib/hier/shared_alloc.hpp). Checks, none of them timed:
 *  - a fresh 64 MiB allocation has no page in memory before the program writes one
 *    (mincore), as with the MPI library's own MPI_Alloc_mem;
 *  - 3,000 allocations of 64 B to 4 MiB, up to 16 held at once, each filled with its own
 *    pattern and checked before it is freed (no two overlap), page-aligned from 1 MiB,
 *    make at most 4 memory files in all (one per served call before);
 *  - from 2 ranks, 40 cycles of MPI_Alloc_mem, MPI_Win_create, fence, MPI_Put to the next rank, fence,
 *    the value checked, MPI_Win_free, MPI_Free_mem;
 *  - afterwards an all-gather into such memory still runs by direct write, and when
 *    everything is freed the arena holds no allocation.
 * Reads the interposer's counters (agx_pmpi_*) with dlsym: without the interposer the
 * program fails. */
#include <mpi.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, size, failures;

static void fail(const char* what, const char* detail) {
  if (failures++ < 8) fprintf(stderr, "rank %d: FAIL %s: %s\n", rank, what, detail);
}

static unsigned long long counter(const char* name) {
  unsigned long long (*f)(void) = (unsigned long long (*)(void))(size_t)dlsym(RTLD_DEFAULT, name);
  if (!f) {
    fail("setup", name);
    return 0;
  }
  return f();
}

static unsigned char pattern(unsigned salt, size_t i) {
  unsigned x = salt * 2654435761u ^ (unsigned)i * 2246822519u;
  return (unsigned char)(x ^ x >> 13);
}

/* Resident pages of [p, p + bytes). */
static size_t resident(void* p, size_t bytes) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (bytes + page - 1) / page;
  unsigned char* v = malloc(pages);
  size_t n = 0;
  if (mincore(p, bytes, v) != 0) fail("mincore", "failed");
  else
    for (size_t i = 0; i < pages; ++i) n += v[i] & 1;
  free(v);
  return n;
}

struct Held {
  unsigned char* p;
  size_t bytes;
  unsigned salt;
};

static void fill(struct Held* h) {
  /* every 61st byte and both ends: enough to see an overlap, cheap at 4 MiB */
  for (size_t i = 0; i < h->bytes; i += 61) h->p[i] = pattern(h->salt, i);
  h->p[h->bytes - 1] = pattern(h->salt, h->bytes - 1);
}

static void check_and_free(struct Held* h) {
  for (size_t i = 0; i < h->bytes; i += 61)
    if (h->p[i] != pattern(h->salt, i)) {
      fail("churn", "an allocation was overwritten (two allocations overlap)");
      break;
    }
  if (h->p[h->bytes - 1] != pattern(h->salt, h->bytes - 1)) fail("churn", "last byte overwritten");
  MPI_Free_mem(h->p);
  h->p = NULL;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const unsigned long long files_before = counter("agx_pmpi_memory_files_made");

  /* No page touched before the program touches it. */
  {
    const size_t bytes = (size_t)64 << 20;
    unsigned char* p = NULL;
    if (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &p) != MPI_SUCCESS || !p) fail("64 MiB", "failed");
    else {
      const size_t n = resident(p, bytes);
      if (n > 0) {
        char text[96];
        snprintf(text, sizeof text, "%zu of %zu pages in memory before any was written", n, bytes / 4096);
        fail("64 MiB fresh", text);
      }
      p[0] = 1, p[bytes - 1] = 2;
      if (p[0] != 1 || p[bytes - 1] != 2) fail("64 MiB", "not writable");
      MPI_Free_mem(p);
    }
  }

  /* Churn: sizes 64 B .. 4 MiB, up to 16 held at once, freed in a scrambled order. */
  {
    struct Held held[16];
    memset(held, 0, sizeof held);
    unsigned state = 12345u + (unsigned)rank;
    for (int k = 0; k < 3000; ++k) {
      state = state * 1103515245u + 12345u;
      struct Held* h = &held[(state >> 8) % 16];
      if (h->p) check_and_free(h);
      state = state * 1103515245u + 12345u;
      const size_t bytes = (size_t)64 << ((state >> 10) % 17); /* 64 B .. 4 MiB */
      h->bytes = bytes - (state >> 4) % 64;
      h->salt = (unsigned)k + 1;
      if (MPI_Alloc_mem((MPI_Aint)h->bytes, MPI_INFO_NULL, &h->p) != MPI_SUCCESS || !h->p) {
        fail("churn", "MPI_Alloc_mem failed");
        h->p = NULL;
        continue;
      }
      /* (from 1 MiB always agx's memory: whole pages; smaller ones may be the library's) */
      if (h->bytes >= ((size_t)1 << 20) && (uintptr_t)h->p % 4096 != 0) fail("churn", "allocation not page-aligned");
      fill(h);
    }
    for (int i = 0; i < 16; ++i)
      if (held[i].p) check_and_free(&held[i]);
  }
  const unsigned long long files = counter("agx_pmpi_memory_files_made") - files_before;
  if (files > 4) {
    char text[96];
    snprintf(text, sizeof text, "%llu memory files made for 3,001 allocations (at most 4)", files);
    fail("churn", text);
  }

  /* Windows over MPI_Alloc_mem memory, as ARMCI makes them (from 2 ranks: Open MPI 4.1
   * makes no window on one rank, MPI_ERR_WIN, with or without agx). */
  for (int k = 0; k < (size > 1 ? 40 : 0); ++k) {
    const MPI_Aint bytes = (MPI_Aint)1 << 20;
    double* p = NULL;
    MPI_Alloc_mem(bytes, MPI_INFO_NULL, &p);
    p[0] = -1;
    MPI_Win win;
    MPI_Win_create(p, bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    const double v = rank * 1000 + k;
    MPI_Put(&v, 1, MPI_DOUBLE, (rank + 1) % size, 0, 1, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    if (p[0] != ((rank + size - 1) % size) * 1000 + k) fail("window", "the put did not land");
    MPI_Win_free(&win);
    MPI_Free_mem(p);
  }

  /* An all-gather into such memory after all that: direct write, right answer. */
  {
    const int block = 256 * 1024;
    unsigned char *buf = NULL, *send = malloc((size_t)block);
    MPI_Alloc_mem((MPI_Aint)block * size, MPI_INFO_NULL, &buf);
    for (int i = 0; i < block; ++i) send[i] = pattern((unsigned)rank + 7u, (size_t)i);
    const unsigned long long before = counter("agx_pmpi_direct_write_calls");
    for (int k = 0; k < 3; ++k)  /* (the first call on the communicator is point-to-point) */
      MPI_Allgather(send, block, MPI_BYTE, buf, block, MPI_BYTE, MPI_COMM_WORLD);
    if (size > 1 && counter("agx_pmpi_direct_write_calls") == before) fail("all-gather", "no call ran by direct write");
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < block; i += 97)
        if (buf[(size_t)r * block + (size_t)i] != pattern((unsigned)r + 7u, (size_t)i)) {
          fail("all-gather", "wrong bytes");
          r = size;
          break;
        }
    MPI_Free_mem(buf);
    free(send);
  }
  if (counter("agx_pmpi_arena_allocations") != 0) fail("end", "the arena still holds allocations");

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAIL" : "OK", total, size);
  MPI_Finalize();
  return total ? 1 : 0;
}
