// PinnedPool: reuse of page-locked staging buffers (see pinned_pool.hpp).

#include "cuda/pinned_pool.hpp"

#include <bit>

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
