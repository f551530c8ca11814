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
#include <map>
#include <mutex>
#include <random>
#include <utility>

namespace agx::hier {
namespace {

struct Owned {
  std::size_t bytes = 0;
  std::uint64_t serial = 0;
  int fd = -1;
  std::uint64_t inode = 0;
};

struct Mapped {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  std::uint64_t used = 0;  ///< tick of the last use (least recently used goes first)
};

struct Registry {
  std::mutex mutex;
  std::uint64_t nonce = 0;
  std::uint64_t serial = 0;
  std::map<std::uintptr_t, Owned> owned;  ///< by base address
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

}  // namespace

bool find_shared(const void* p, std::size_t bytes, SharedView& out) {
  Registry& r = registry();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(r.mutex);
  auto it = r.owned.upper_bound(at);
  if (it == r.owned.begin()) return false;
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
  void* p = mmap(nullptr, region.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    error = "mmap of " + std::to_string(region.bytes) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  r.peers[key] = Mapped{static_cast<std::byte*>(p), region.bytes, ++r.tick};
  trim(r, region.nonce, peer_cache_per_owner);
  return static_cast<std::byte*>(p);
}

void* allocate_shared(std::size_t bytes) noexcept {
  const std::size_t size = page_round(bytes == 0 ? 1 : bytes);
  if (size < bytes) return nullptr;
  const int fd = memfd_create("agx-allocate", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(size)) == 0 && fstat(fd, &st) == 0)
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  try {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.owned[reinterpret_cast<std::uintptr_t>(p)] =
        Owned{size, ++r.serial, fd, static_cast<std::uint64_t>(st.st_ino)};
  } catch (...) {  // no memory for the registry's entry
    munmap(p, size);
    close(fd);
    return nullptr;
  }
  return p;
}

bool deallocate_shared(void* p) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.owned.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == r.owned.end()) return false;
  munmap(p, it->second.bytes);
  close(it->second.fd);
  r.owned.erase(it);
  return true;
}

std::size_t owned_regions() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.owned.size();
}

std::size_t peer_mappings() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.peers.size();
}

}  // namespace agx::hier

namespace agx {

void* allocate(std::size_t bytes) {
  if (void* p = hier::allocate_shared(bytes)) return p;
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
