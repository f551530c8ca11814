// Memory kinds with the CUDA runtime, and the synchronous helpers of backend.hpp.
// A machine without a GPU or driver is a normal case: cudaGetDeviceCount fails with
// cudaErrorNoDevice or cudaErrorInsufficientDriver, the error is cleared, and every
// pointer is host memory from then on without another CUDA call (cached per process).

#include "cuda/backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/memory.hpp"

namespace agx::cuda {

bool built_with_cuda() noexcept { return true; }

int device_count() noexcept {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

MemoryKind memory_kind(const void* p) noexcept {
  if (p == nullptr || device_count() == 0) return MemoryKind::host;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return MemoryKind::host;
  }
  switch (a.type) {
    case cudaMemoryTypeHost: return MemoryKind::pinned;
    case cudaMemoryTypeDevice: return MemoryKind::device;
    case cudaMemoryTypeManaged: return MemoryKind::managed;
    default: return MemoryKind::host;
  }
}

namespace backend {

void wait_caller_stream() {
  check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

void copy_sync(void* dst, const void* src, std::size_t bytes) {
  wait_caller_stream();
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

}  // namespace backend
}  // namespace agx::cuda
