// PinnedPool: reuse of page-locked staging buffers (see pinned_pool.hpp).

#include "cuda/pinned_pool.hpp"

#include <bit>
#include <vector>

namespace agx::cuda {

PinnedPool::~PinnedPool() {
  for (const Buffer& b : buffers_) ops_.free_pinned(b.ptr);
}

void* PinnedPool::acquire(std::size_t bytes) {
  Buffer* best = nullptr;
  for (Buffer& b : buffers_)
    if (!b.in_use && b.bytes >= bytes && (best == nullptr || b.bytes < best->bytes)) best = &b;
  if (best == nullptr) {
    const std::size_t size = std::bit_ceil(bytes < 4096 ? std::size_t{4096} : bytes);
    // Free buffers smaller than the new one are superseded by it: freed, so that what
    // the pool keeps is bounded by the largest call (staging.hpp bounds that) times
    // the calls running at once.
    std::erase_if(buffers_, [&](const Buffer& b) {
      if (b.in_use || b.bytes >= size) return false;
      ops_.free_pinned(b.ptr);
      return true;
    });
    buffers_.push_back({ops_.allocate_pinned(size), size, false});
    ++allocations_;
    best = &buffers_.back();
  }
  best->in_use = true;
  return best->ptr;
}

void PinnedPool::release(void* p) noexcept {
  for (Buffer& b : buffers_)
    if (b.ptr == p) b.in_use = false;
}

}  // namespace agx::cuda
