// MPI_Alloc_mem and MPI_Free_mem (C and mpif.h / `use mpi` Fortran): memory from
// agx::allocate's arena (hier/shared_alloc.hpp), so that receive buffers a program
// allocates this way take the direct-write path of blocking all-gathers
// (docs/interposer.md). An allocation and a free cost about what the MPI library's do:
// a few map operations, no system call, no page touched. Requests smaller than any
// buffer direct write can serve (hier::direct_write_min_buffer: 512 KiB by default) go
// to the MPI library's own PMPI_Alloc_mem, as they would without agx; so do all of them
// where no memory file can be made, with AGX_DISABLE=1 or AGX_ALLOC_MEM=0. Every
// MPI_Info key is ignored (agx reads none). MPI_Free_mem hands what agx did not allocate
// to PMPI_Free_mem.

#include <mpi.h>

#include "hier/direct_write.hpp"
#include "hier/shared_alloc.hpp"
#include "pmpi/report.hpp"
#include "pmpi/settings.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace agx::pmpi {
namespace {

std::atomic<unsigned long long> served{0}, served_bytes{0}, passed{0};  // (AGX_SUMMARY)

// The least request agx's arena serves (settings are read once per process).
std::size_t least_served() {
  static const std::size_t least = settings().alloc_mem && !settings().disabled
                                       ? hier::direct_write_min_buffer()
                                       : std::numeric_limits<std::size_t>::max();
  return least;
}

int alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) noexcept {
  if (size > 0 && baseptr != nullptr && static_cast<std::size_t>(size) >= least_served()) {
    const std::size_t align = size >= 4096 ? 4096 : 64;  // (the pages of large buffers whole)
    if (void* p = hier::allocate_shared(static_cast<std::size_t>(size), align)) {
      std::memcpy(baseptr, &p, sizeof p);  // baseptr points to a pointer (MPI's void*)
      served.fetch_add(1, std::memory_order_relaxed);
      served_bytes.fetch_add(static_cast<unsigned long long>(size), std::memory_order_relaxed);
      return MPI_SUCCESS;
    }
  }
  passed.fetch_add(1, std::memory_order_relaxed);
  return PMPI_Alloc_mem(size, info, baseptr);  // also reports what is wrong with the arguments
}

int free_mem(void* base) noexcept {
  if (base != nullptr && hier::deallocate_shared(base)) return MPI_SUCCESS;
  return PMPI_Free_mem(base);
}

}  // namespace

AllocCounts alloc_counts() {
  return {served.load(std::memory_order_relaxed), served_bytes.load(std::memory_order_relaxed),
          passed.load(std::memory_order_relaxed)};
}

}  // namespace agx::pmpi

extern "C" {

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  return agx::pmpi::alloc_mem(size, info, baseptr);
}

int MPI_Free_mem(void* base) { return agx::pmpi::free_mem(base); }

// Fortran (mpif.h, `use mpi`): BASEPTR is an INTEGER(KIND=MPI_ADDRESS_KIND) or a
// TYPE(C_PTR) (Open MPI's _cptr names) that receives the address; MPI_FREE_MEM gets the
// memory itself. Open MPI's own Fortran forms call PMPI_Alloc_mem, so they are replaced.
#define AGX_ALLOC_MEM_F(name)                                                          \
  void name(MPI_Aint* size, MPI_Fint* info, MPI_Aint* baseptr, MPI_Fint* ierr) {       \
    void* p = nullptr;                                                                  \
    *ierr = agx::pmpi::alloc_mem(*size, PMPI_Info_f2c(*info), &p);                      \
    if (*ierr == MPI_SUCCESS) *baseptr = reinterpret_cast<MPI_Aint>(p);                 \
  }
#define AGX_FREE_MEM_F(name) \
  void name(void* base, MPI_Fint* ierr) { *ierr = agx::pmpi::free_mem(base); }

AGX_ALLOC_MEM_F(mpi_alloc_mem)
AGX_ALLOC_MEM_F(mpi_alloc_mem_)
AGX_ALLOC_MEM_F(mpi_alloc_mem__)
AGX_ALLOC_MEM_F(MPI_ALLOC_MEM)
AGX_ALLOC_MEM_F(mpi_alloc_mem_cptr)  // `use mpi` with a TYPE(C_PTR) BASEPTR: the same ABI
AGX_ALLOC_MEM_F(mpi_alloc_mem_cptr_)
AGX_ALLOC_MEM_F(mpi_alloc_mem_cptr__)
AGX_ALLOC_MEM_F(MPI_ALLOC_MEM_CPTR)
AGX_FREE_MEM_F(mpi_free_mem)
AGX_FREE_MEM_F(mpi_free_mem_)
AGX_FREE_MEM_F(mpi_free_mem__)
AGX_FREE_MEM_F(MPI_FREE_MEM)

/// Blocking all-gathers of this process that ran by direct write (tests).
unsigned long long agx_pmpi_direct_write_calls(void) { return agx::hier::direct_write_calls(); }

/// The arena's memory files made since the start, and its live allocations (tests).
unsigned long long agx_pmpi_memory_files_made(void) { return agx::hier::memory_files_made(); }
unsigned long long agx_pmpi_arena_allocations(void) { return agx::hier::owned_regions(); }

}  // extern "C"
