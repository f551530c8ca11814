/* MPI_Alloc_mem receive buffers under libagx_pmpi.so: blocking all-gathers whose every
 * receive buffer comes from MPI_Alloc_mem run by direct write (docs/interposer.md). Plain
 * MPI program; reads the interposer's counter agx_pmpi_direct_write_calls with dlsym.
 * Each case fills the buffer with a sentinel, runs one call and checks every block and
 * every byte outside the blocks, and whether the call ran by direct write. Cases:
 * MPI_Allgather out of place (three times: the repeated-call path too) and in place,
 * MPI_Allgatherv with zero blocks and gaps, buffers freed and allocated again between
 * calls, 256 KiB blocks after a call of that shape into malloc'd memory (and by
 * MPI_Allgatherv, which never takes the repeated-call path), an MPI_Info with keys agx does not know, a non-contiguous receive type (the
 * usual path), and the last rank receiving into malloc'd memory (the usual path for all).
 * Run with AGX_DIRECT_WRITE_MIN_BYTES=0. */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xA5
static int rank, size, failures;
static unsigned long long (*direct_calls)(void);

static unsigned char pattern(unsigned salt, int owner, size_t i) {
  unsigned x = salt * 2654435761u ^ (unsigned)owner * 40503u ^ (unsigned)i * 2246822519u;
  x ^= x >> 15;
  return (unsigned char)x == SENTINEL ? 0x5A : (unsigned char)x;
}

static void fail(const char* what, const char* detail) {
  if (failures++ < 8) fprintf(stderr, "rank %d: FAIL %s: %s\n", rank, what, detail);
}

static unsigned long long calls(void) { return direct_calls ? direct_calls() : 0; }

/* One call: MPI_Allgatherv over `counts` at `displs` (bytes), or MPI_Allgather of `block`
 * bytes when counts is NULL. `bytes`: the whole buffer, checked outside the blocks. */
static void run(const char* name, unsigned salt, unsigned char* buf, size_t bytes, int block,
                const int* counts, const int* displs, int in_place, int expect_direct) {
  memset(buf, SENTINEL, bytes);
  const int mine = counts ? counts[rank] : block;
  const int at = counts ? displs[rank] : rank * block;
  unsigned char* send = malloc((size_t)mine + 1);
  for (int i = 0; i < mine; ++i) send[i] = pattern(salt, rank, (size_t)i);
  if (in_place) memcpy(buf + at, send, (size_t)mine);
  const unsigned long long before = calls();
  int rc = counts ? MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, mine, MPI_BYTE, buf, counts,
                                   displs, MPI_BYTE, MPI_COMM_WORLD)
                  : MPI_Allgather(in_place ? MPI_IN_PLACE : send, mine, MPI_BYTE, buf, block,
                                  MPI_BYTE, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) fail(name, "the call failed");
  const int direct = calls() == before + 1;
  if (direct != (expect_direct && size > 1))
    fail(name, direct ? "ran by direct write" : "did not run by direct write");
  char* covered = calloc(bytes, 1);
  for (int r = 0; r < size; ++r) {
    const int n = counts ? counts[r] : block, d = counts ? displs[r] : r * block;
    for (int i = 0; i < n; ++i) {
      covered[d + i] = 1;
      if (buf[d + i] != pattern(salt, r, (size_t)i)) {
        fail(name, "a block holds wrong bytes");
        break;
      }
    }
  }
  for (size_t i = 0; i < bytes; ++i)
    if (!covered[i] && buf[i] != SENTINEL) {
      fail(name, "a byte outside the blocks was written");
      break;
    }
  free(covered);
  free(send);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  direct_calls = (unsigned long long (*)(void))(size_t)dlsym(RTLD_DEFAULT, "agx_pmpi_direct_write_calls");
  if (!direct_calls) fail("setup", "agx_pmpi_direct_write_calls not found (interposer not loaded?)");
  const int block = 3000;
  const size_t bytes = (size_t)block * (size_t)size + 512;
  unsigned salt = 1;
  unsigned char* buf = NULL;

  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "agx_no_such_key", "1");
  MPI_Info_set(info, "mpi_minimum_memory_alignment", "4096");
  if (MPI_Alloc_mem((MPI_Aint)bytes, info, &buf) != MPI_SUCCESS || !buf) fail("MPI_Alloc_mem", "failed");
  MPI_Info_free(&info);
  /* The first call on a communicator runs point-to-point and leaves the node state for
   * the second (docs/hierarchy.md, "Set-up of a communicator"): direct from call 2. */
  for (int k = 0; k < 3; ++k) run("MPI_Allgather", ++salt, buf, bytes, block, NULL, NULL, 0, k > 0);
  for (int k = 0; k < 2; ++k) run("MPI_Allgather in place", ++salt, buf, bytes, block, NULL, NULL, 1, 1);

  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int at = 0;
  for (int r = size - 1; r >= 0; --r) {  /* reversed, gaps of 40 bytes, every third empty */
    at += 40;
    counts[r] = r % 3 == 1 ? 0 : block - 100 * r;
    displs[r] = counts[r] ? at : 0;
    at += counts[r];
  }
  run("MPI_Allgatherv with zeros", ++salt, buf, bytes, 0, counts, displs, 0, 1);
  run("MPI_Allgatherv in place", ++salt, buf, bytes, 0, counts, displs, 1, 1);
  MPI_Free_mem(buf);

  for (int k = 0; k < 8; ++k) {  /* freed and allocated again: often the same address */
    MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &buf);
    run("reallocated", ++salt, buf, bytes, block, NULL, NULL, k % 2, 1);
    MPI_Free_mem(buf);
  }

  /* A non-contiguous receive type (every other int): agx unpacks from a temporary. */
  {
    MPI_Datatype every_other;
    MPI_Type_vector(block / 8, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(every_other, &lb, &extent);
    const size_t need = (size_t)extent * (size_t)size + 64;
    MPI_Alloc_mem((MPI_Aint)need, MPI_INFO_NULL, &buf);
    int* send = malloc(sizeof(int) * (size_t)(block / 8));
    for (int i = 0; i < block / 8; ++i) send[i] = rank * 100000 + i;
    const unsigned long long before = calls();
    MPI_Allgather(send, block / 8, MPI_INT, buf, 1, every_other, MPI_COMM_WORLD);
    if (calls() != before) fail("non-contiguous receive type", "ran by direct write");
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < block / 8; ++i) {
        int v;
        memcpy(&v, buf + (size_t)r * (size_t)extent + (size_t)i * 2 * sizeof(int), sizeof v);
        if (v != r * 100000 + i) {
          fail("non-contiguous receive type", "wrong element");
          r = size;
          break;
        }
      }
    free(send);
    MPI_Free_mem(buf);
    MPI_Type_free(&every_other);
  }

  /* 256 KiB blocks, where auto's usual choice is point-to-point: first into malloc'd
   * memory (that choice runs and the repeated-call path records it), then twice into
   * MPI_Alloc_mem memory of the same shape (the full and the repeated-call paths). */
  {
    const int large = 256 * 1024;
    const size_t large_bytes = (size_t)large * (size_t)size + 512;
    unsigned char* heap = malloc(large_bytes);
    run("256 KiB into malloc'd memory", ++salt, heap, large_bytes, large, NULL, NULL, 0, 0);
    free(heap);
    MPI_Alloc_mem((MPI_Aint)large_bytes, MPI_INFO_NULL, &buf);
    for (int k = 0; k < 2; ++k) run("256 KiB", ++salt, buf, large_bytes, large, NULL, NULL, 0, 1);
    int* large_counts = malloc(sizeof(int) * (size_t)size);
    int* large_displs = malloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; ++r) large_counts[r] = large, large_displs[r] = r * large;
    run("MPI_Allgatherv 256 KiB", ++salt, buf, large_bytes, 0, large_counts, large_displs, 1, 1);
    free(large_counts);
    free(large_displs);
    MPI_Free_mem(buf);
  }

  /* Mixed: the last rank receives into malloc'd memory. */
  {
    const int shared = rank != size - 1;
    if (shared) MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &buf);
    else buf = malloc(bytes);
    run("mixed", ++salt, buf, bytes, block, NULL, NULL, 0, 0);
    run("mixed in place", ++salt, buf, bytes, block, NULL, NULL, 1, 0);
    if (shared) MPI_Free_mem(buf);
    else free(buf);
  }
  free(counts);
  free(displs);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAIL" : "OK", total, size);
  MPI_Finalize();
  return total ? 1 : 0;
}
