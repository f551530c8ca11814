#pragma once
// Memory that the other ranks of a node can map: receive buffers for the shared-memory
// all-gather's direct-write path (docs/hierarchy.md, "Direct write").
//
// agx::allocate(bytes) returns page-aligned memory from agx's arena: a few anonymous
// memory files (memfd_create, mmap MAP_SHARED) handed out in pieces, recorded in a
// process-local registry; allocating and freeing cost a few map operations and touch no
// page. When every rank of a one-node communicator receives into such memory, a blocking
// shared_memory (or automatic) call writes each block straight into every peer's
// receive buffer: N·M bytes written per rank, the copy bound. Where no memory file can
// be made, allocate falls back to ordinary memory (is_shared false) and calls take the
// usual paths. MPI_Alloc_mem under libagx_pmpi.so returns the same memory from 512 KiB
// (docs/interposer.md).

#include <cstddef>
#include <limits>
#include <new>

namespace agx {

/// `bytes` of memory, page-aligned; throws std::bad_alloc when there is none.
void* allocate(std::size_t bytes);
/// Frees what allocate returned (nullptr: nothing): back to the arena, whose files go back
/// to the system once unused beyond 256 MiB (peers keep a mapping until they drop it).
void deallocate(void* p) noexcept;
/// Whether [p, p + bytes) lies inside one memory file of the arena that peers can map.
bool is_shared(const void* p, std::size_t bytes = 1) noexcept;

/// An STL allocator over agx::allocate: std::vector<double, agx::SharedAllocator<double>>.
template <class T>
struct SharedAllocator {
  using value_type = T;
  SharedAllocator() noexcept = default;
  template <class U>
  SharedAllocator(const SharedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(agx::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { agx::deallocate(p); }
  template <class U>
  bool operator==(const SharedAllocator<U>&) const noexcept { return true; }
};

}  // namespace agx
