// agx::allocate and the registry of shared regions (shared_alloc.hpp).

#include "hier/shared_alloc.hpp"

#include <agx/allocate.hpp>

#include "hier/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>

namespace agx::hier {
namespace {

/// One memory file of the arena: mapped once, handed out in pieces.
struct Chunk {
  std::size_t bytes = 0;
  std::uint64_t serial = 0;
  int fd = -1;
  std::uint64_t inode = 0;
  std::size_t live = 0;  ///< allocations in it (0: the chunk is one free range)
};

/// A free range; never crosses a chunk's end.
struct Free {
  std::size_t bytes = 0;
  std::uintptr_t chunk = 0;  ///< base of its chunk
};

struct Live {
  std::size_t bytes = 0;
  std::uintptr_t chunk = 0;
  bool cached = false;  ///< freed, held in the recent cache for the next request of its size
};

/// Pieces freed lately, kept whole for the next request of the same size: a program that
/// frees and allocates one size again and again (ARMCI's buffers do) gets the same piece
/// back without touching the free lists (no allocation of the registry's own nodes).
constexpr std::size_t recent_pieces = 8;

struct Mapped {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  std::uint64_t used = 0;  ///< tick of the last use (least recently used goes first)
};

struct Registry {
  std::mutex mutex;
  std::uint64_t nonce = 0;
  std::uint64_t serial = 0;
  std::map<std::uintptr_t, Chunk> chunks;  ///< by base address
  std::map<std::uintptr_t, Free> free_at;  ///< free ranges by address
  std::set<std::pair<std::size_t, std::uintptr_t>> free_by_size;  ///< the same, best fit first
  std::unordered_map<std::uintptr_t, Live> live;  ///< allocations by address
  std::size_t empty_bytes = 0;  ///< bytes of chunks with no allocation, kept for reuse
  std::uintptr_t recent[recent_pieces] = {};  ///< freed pieces, oldest first (0: none)
  std::size_t recent_count = 0, recent_bytes = 0;
  std::uint64_t files = 0;      ///< memory files ever made (tests)
  std::map<std::pair<std::uint64_t, std::uint64_t>, Mapped> peers;  ///< by (nonce, serial)
  std::uint64_t tick = 0;

  Registry() {
    std::random_device device;
    while (nonce == 0)
      nonce = (std::uint64_t{device()} << 32 | device()) ^ static_cast<std::uint64_t>(getpid());
  }
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: deallocate may run in static destructors
  return *r;
}

// The least recently used mapping of `nonce` while it has more than `keep`.
void trim(Registry& r, std::uint64_t nonce, std::size_t keep) {
  while (true) {
    std::size_t count = 0;
    auto oldest = r.peers.end();
    for (auto it = r.peers.lower_bound({nonce, 0}); it != r.peers.end() && it->first.first == nonce; ++it) {
      ++count;
      if (oldest == r.peers.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (count <= keep) return;
    munmap(oldest->second.base, oldest->second.bytes);
    r.peers.erase(oldest);
  }
}

void add_free(Registry& r, std::uintptr_t at, std::size_t bytes, std::uintptr_t chunk) {
  r.free_at[at] = Free{bytes, chunk};
  r.free_by_size.emplace(bytes, at);
}

void remove_free(Registry& r, std::map<std::uintptr_t, Free>::iterator it) {
  r.free_by_size.erase({it->second.bytes, it->first});
  r.free_at.erase(it);
}

// A new chunk of at least `bytes`, as one free range at its (page-aligned) base; 0 when
// no memory file can be made or mapped. Its pages are not touched: the program's first
// write faults each in.
std::uintptr_t add_chunk(Registry& r, std::size_t bytes) {
  const std::size_t size = std::max(arena_chunk_bytes, page_round(bytes));
  if (size < bytes) return 0;
  const int fd = memfd_create("agx-allocate", MFD_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st {};
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(size)) == 0 && fstat(fd, &st) == 0)
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return 0;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  try {
    r.chunks[base] = Chunk{size, ++r.serial, fd, static_cast<std::uint64_t>(st.st_ino), 0};
    add_free(r, base, size, base);
  } catch (...) {  // no memory for the registry's entries
    r.chunks.erase(base);
    munmap(p, size);
    close(fd);
    return 0;
  }
  r.empty_bytes += size;
  ++r.files;
  return base;
}

void release_chunk(Registry& r, std::map<std::uintptr_t, Chunk>::iterator c) {
  remove_free(r, r.free_at.find(c->first));  // (an empty chunk is one free range)
  munmap(reinterpret_cast<void*>(c->first), c->second.bytes);
  close(c->second.fd);
  r.chunks.erase(c);
}

}  // namespace

bool find_shared(const void* p, std::size_t bytes, SharedView& out) {
  Registry& r = registry();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(r.mutex);
  auto it = r.chunks.upper_bound(at);
  if (it == r.chunks.begin()) return false;
  --it;
  const std::uintptr_t offset = at - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return false;
  out.region = RegionHandle{r.nonce,        it->second.serial, static_cast<std::int64_t>(getpid()),
                            it->second.fd,  it->second.inode,  it->second.bytes};
  out.offset = offset;
  return true;
}

namespace {
std::atomic<bool> refusing{false};  // refuse_peer_maps
}  // namespace

void refuse_peer_maps(bool refuse) { refusing.store(refuse, std::memory_order_relaxed); }
bool peer_maps_refused() { return refusing.load(std::memory_order_relaxed); }

std::byte* map_peer_region(const RegionHandle& region, std::string& error) {
  if (refusing.load(std::memory_order_relaxed)) {
    error = "mapping refused (test seam)";
    return nullptr;
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto key = std::make_pair(region.nonce, region.serial);
  if (auto it = r.peers.find(key); it != r.peers.end()) {
    it->second.used = ++r.tick;
    return it->second.base;
  }
  const std::string path = "/proc/" + std::to_string(region.pid) + "/fd/" + std::to_string(region.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_ino) != region.inode ||
      static_cast<std::uint64_t>(st.st_size) < region.bytes) {
    close(fd);
    error = path + " is not the peer's region (closed while it was announced?)";
    return nullptr;
  }
  // (no MAP_POPULATE: a chunk is mostly pages this rank never writes; those it writes
  // fault in once per mapping, and the mapping is kept)
  void* p = mmap(nullptr, region.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    error = "mmap of " + std::to_string(region.bytes) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  r.peers[key] = Mapped{static_cast<std::byte*>(p), region.bytes, ++r.tick};
  trim(r, region.nonce, peer_cache_per_owner);
  return static_cast<std::byte*>(p);
}

namespace {

// Gives the piece at `at` (a live entry) back to the free lists, merged with its free
// neighbours of the same chunk; a chunk left empty is kept or released (see the header).
void release_piece(Registry& r, std::unordered_map<std::uintptr_t, Live>::iterator found) {
  std::uintptr_t at = found->first, end = at + found->second.bytes;
  const std::uintptr_t chunk = found->second.chunk;
  r.live.erase(found);
  try {
    auto next = r.free_at.lower_bound(at);
    if (next != r.free_at.end() && next->first == end && next->second.chunk == chunk) {
      end += next->second.bytes;
      next = std::next(next);
      remove_free(r, std::prev(next));
    }
    if (next != r.free_at.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second.bytes == at && prev->second.chunk == chunk) {
        at = prev->first;
        remove_free(r, prev);
      }
    }
    add_free(r, at, end - at, chunk);
  } catch (...) {  // no memory for the free range's entry: the range stays unused
  }
  const auto c = r.chunks.find(chunk);
  if (--c->second.live == 0) {
    // An empty chunk is kept for the next allocations while the empty ones hold at most
    // arena_keep_bytes; beyond that it goes back to the system.
    const auto whole = r.free_at.find(chunk);
    if (r.empty_bytes + c->second.bytes <= arena_keep_bytes) r.empty_bytes += c->second.bytes;
    else if (whole != r.free_at.end() && whole->second.bytes == c->second.bytes) release_chunk(r, c);
  }
}

// The oldest recently freed piece back to the free lists.
void evict_recent(Registry& r) {
  const auto found = r.live.find(r.recent[0]);
  r.recent_bytes -= found->second.bytes;
  std::copy(r.recent + 1, r.recent + r.recent_count, r.recent);
  r.recent[--r.recent_count] = 0;
  release_piece(r, found);
}

}  // namespace

void* allocate_shared(std::size_t bytes, std::size_t align) noexcept {
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) return nullptr;
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) & ~std::size_t{63};
  align = std::max<std::size_t>(align, 64);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (std::size_t i = r.recent_count; i-- > 0;) {  // the newest piece of this size first
    const std::uintptr_t at = r.recent[i];
    Live& piece = r.live.find(at)->second;
    if (piece.bytes != size || at % align != 0) continue;
    piece.cached = false;
    r.recent_bytes -= size;
    std::copy(r.recent + i + 1, r.recent + r.recent_count, r.recent + i);
    r.recent[--r.recent_count] = 0;
    return reinterpret_cast<void*>(at);
  }
  try {
    // Best fit: the smallest free range that holds `size` at the alignment (a range
    // `align - 64` longer always does: every range starts 64-byte aligned), else a new
    // chunk, whose page-aligned base holds it.
    std::uintptr_t from = 0;
    if (auto fit = r.free_by_size.lower_bound({size + align - 64, 0}); fit != r.free_by_size.end())
      from = fit->second;
    else if ((from = add_chunk(r, size)) == 0)
      return nullptr;
    const auto range = r.free_at.find(from);
    const std::uintptr_t end = from + range->second.bytes, chunk = range->second.chunk;
    const std::uintptr_t at = (from + align - 1) & ~(std::uintptr_t{align} - 1);
    remove_free(r, range);
    if (at > from) add_free(r, from, at - from, chunk);
    if (end > at + size) add_free(r, at + size, end - (at + size), chunk);
    r.live[at] = Live{size, chunk, false};
    Chunk& c = r.chunks.find(chunk)->second;
    if (c.live++ == 0) r.empty_bytes -= c.bytes;
    return reinterpret_cast<void*>(at);
  } catch (...) {  // no memory for the registry's entries
    return nullptr;
  }
}

bool deallocate_shared(void* p) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto found = r.live.find(reinterpret_cast<std::uintptr_t>(p));
  if (found == r.live.end()) return false;
  if (found->second.cached) return true;  // (freed twice: nothing more to do)
  // Held whole for the next request of its size while the recent pieces hold at most
  // arena_keep_bytes, the oldest given back first.
  if (found->second.bytes > arena_keep_bytes) {
    release_piece(r, found);
    return true;
  }
  while (r.recent_count == recent_pieces || r.recent_bytes + found->second.bytes > arena_keep_bytes)
    evict_recent(r);
  found->second.cached = true;
  r.recent[r.recent_count++] = found->first;
  r.recent_bytes += found->second.bytes;
  return true;
}

std::size_t owned_regions() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.live.size() - r.recent_count;
}

std::uint64_t memory_files_made() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.files;
}

std::size_t peer_mappings() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.peers.size();
}

}  // namespace agx::hier

namespace agx {

void* allocate(std::size_t bytes) {
  if (void* p = hier::allocate_shared(bytes, hier::page_round(1))) return p;
  void* q = std::malloc(bytes == 0 ? 1 : bytes);  // no memory file here: ordinary memory
  if (q == nullptr) throw std::bad_alloc();
  return q;
}

void deallocate(void* p) noexcept {
  if (p != nullptr && !hier::deallocate_shared(p)) std::free(p);
}

bool is_shared(const void* p, std::size_t bytes) noexcept {
  hier::SharedView v;
  try {
    return hier::find_shared(p, bytes, v);
  } catch (...) {
    return false;
  }
}

}  // namespace agx
