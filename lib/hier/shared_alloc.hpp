#pragma once
// The registry behind agx::allocate (include/agx/allocate.hpp): which address ranges of
// this process are shared regions (anonymous memory files), and the mappings this
// process holds of other processes' regions.
//
// A region is named node-wide by (nonce, serial): a random 64-bit number drawn once per
// process and a counter that never repeats within it, so a new region at the address of
// a freed one never matches the old name. A peer maps a region by opening
// /proc/<pid>/fd/<fd> (the owner keeps the descriptor open while the region lives),
// checks the inode, and keeps the mapping in a small cache: up to `peer_cache_per_owner`
// regions per owner, least recently used dropped first. A freed region that a peer
// still maps stays valid memory for that peer (MAP_SHARED keeps the pages) until the
// peer drops it; nothing a peer writes there can reach a later region.

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

constexpr std::size_t peer_cache_per_owner = 4;

/// The base of this process's mapping of a peer's region, mapped on first use (cached).
/// Null when it cannot be mapped; `error` then says why.
std::byte* map_peer_region(const RegionHandle& region, std::string& error);

/// A new shared region of at least `bytes` (whole pages, at least one); null when no
/// memory file can be made or mapped here.
void* allocate_shared(std::size_t bytes) noexcept;
/// Frees a region from allocate_shared (`p` its base); false when `p` is none.
bool deallocate_shared(void* p) noexcept;

/// Regions this process owns / peer regions it maps (agx-info, tests).
std::size_t owned_regions();
std::size_t peer_mappings();

/// Test seam (test/hier/test_direct_write.cpp): while set, map_peer_region fails in this
/// process, cached mappings too, as for a peer whose region cannot be opened, and so does
/// direct write's push into a peer's heap buffer (direct_write.cpp), as for a kernel that
/// refuses process_vm_writev.
void refuse_peer_maps(bool refuse);
bool peer_maps_refused();

}  // namespace agx::hier
