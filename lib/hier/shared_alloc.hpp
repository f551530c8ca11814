#pragma once
// The arena behind agx::allocate (include/agx/allocate.hpp) and the interposer's
// MPI_Alloc_mem: memory that the node's other ranks can map, and the mappings this
// process holds of other processes' memory.
//
// The arena is a few anonymous memory files (chunks, `arena_chunk_bytes` each or one
// request's size where that is larger), mapped once and handed out in pieces, best fit,
// freed pieces merged with their free neighbours: an allocation and a free cost a few
// map operations, no system call, and no page is touched before the program touches it
// (no MAP_POPULATE; a reused piece keeps the pages it had, as malloc's do). A chunk whose
// every piece is free is kept for later allocations while the kept ones hold at most
// `arena_keep_bytes`, and goes back to the system beyond that.
//
// A chunk (a region) is named node-wide by (nonce, serial): a random 64-bit number drawn
// once per process and a counter that never repeats within it, so a new chunk at the
// address of a freed one never matches the old name. A peer maps a chunk by opening
// /proc/<pid>/fd/<fd> (the owner keeps the descriptor open while the chunk lives),
// checks the inode, and keeps the mapping in a small cache: up to `peer_cache_per_owner`
// chunks per owner, least recently used dropped first. A chunk that a peer still maps
// after its owner released it stays valid memory for that peer (MAP_SHARED keeps the
// pages) until the peer drops it; nothing a peer writes there can reach a later chunk.
// Within a live chunk a peer writes only where the owner's descriptor of the current
// call says (direct_write.cpp).

#include <cstddef>
#include <cstdint>
#include <string>

namespace agx::hier {

/// What a peer needs to map a region (plain data: it travels through the node's flag lines).
struct RegionHandle {
  std::uint64_t nonce = 0;   ///< the owner process's random name (0: not shared)
  std::uint64_t serial = 0;  ///< the region's number in its owner
  std::int64_t pid = 0;      ///< owner process
  std::int64_t fd = -1;      ///< the owner's descriptor of the memory file
  std::uint64_t inode = 0;   ///< the memory file's inode (checked after opening)
  std::uint64_t bytes = 0;   ///< mapped size
};

/// A range of this process's memory inside one shared region.
struct SharedView {
  RegionHandle region;
  std::size_t offset = 0;  ///< of the range's first byte from the region's base
};

/// True when [p, p + bytes) lies inside one live region of this process (bytes 0: p itself).
bool find_shared(const void* p, std::size_t bytes, SharedView& out);

constexpr std::size_t peer_cache_per_owner = 8;
/// The arena's chunk size, and how many bytes of wholly free chunks it keeps.
constexpr std::size_t arena_chunk_bytes = std::size_t{64} << 20;
constexpr std::size_t arena_keep_bytes = std::size_t{256} << 20;

/// The base of this process's mapping of a peer's region, mapped on first use (cached).
/// Null when it cannot be mapped; `error` then says why.
std::byte* map_peer_region(const RegionHandle& region, std::string& error);

/// `bytes` (at least 1) of the arena at a multiple of `align` (a power of two; at least
/// 64); null when no memory file can be made or mapped here.
void* allocate_shared(std::size_t bytes, std::size_t align) noexcept;
/// Frees what allocate_shared returned; false when `p` is none of its allocations.
bool deallocate_shared(void* p) noexcept;

/// Live allocations / memory files made since the start / peer chunks this process maps
/// (tests, agx_pmpi_* counters).
std::size_t owned_regions();
std::uint64_t memory_files_made();
std::size_t peer_mappings();

/// Test seam (test/hier/test_direct_write.cpp): while set, map_peer_region fails in this
/// process, cached mappings too, as for a peer whose region cannot be opened, and so does
/// direct write's push into a peer's heap buffer (direct_write.cpp), as for a kernel that
/// refuses process_vm_writev.
void refuse_peer_maps(bool refuse);
bool peer_maps_refused();

}  // namespace agx::hier
