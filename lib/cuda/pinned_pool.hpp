#pragma once
// PinnedPool: page-locked staging buffers, kept between calls. A call takes the
// smallest free buffer that fits (or allocates one, rounded up to a power of two, and
// frees the free buffers smaller than it) and gives it back at its end, so
// steady-state calls allocate nothing and the pool holds at most one buffer per call
// running at once, each at most the staging bound (staging.hpp) rounded up.

#include "cuda/device_ops.hpp"

#include <cstddef>
#include <vector>

namespace agx::cuda {

class PinnedPool {
 public:
  explicit PinnedPool(DeviceOps& ops) : ops_(ops) {}
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  /// A buffer of at least `bytes` bytes (never null, even for 0).
  void* acquire(std::size_t bytes);
  /// Returns a buffer from acquire() to the pool.
  void release(void* p) noexcept;

  /// Buffers allocated so far (for tests: steady state allocates nothing).
  std::size_t allocations() const { return allocations_; }

 private:
  struct Buffer {
    void* ptr;
    std::size_t bytes;
    bool in_use;
  };
  DeviceOps& ops_;
  std::vector<Buffer> buffers_;
  std::size_t allocations_ = 0;
};

/// RAII lease of one pool buffer.
class PinnedLease {
 public:
  PinnedLease(PinnedPool& pool, std::size_t bytes) : pool_(pool), ptr_(pool.acquire(bytes)) {}
  ~PinnedLease() { pool_.release(ptr_); }
  PinnedLease(const PinnedLease&) = delete;
  PinnedLease& operator=(const PinnedLease&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(ptr_); }

 private:
  PinnedPool& pool_;
  void* ptr_;
};

}  // namespace agx::cuda
