// Memory kinds with the CUDA runtime, and the synchronous helpers of backend.hpp.
// A machine without a GPU or driver is a normal case: cudaGetDeviceCount fails with
// cudaErrorNoDevice or cudaErrorInsufficientDriver, the error is cleared, and every
// pointer is host memory from then on without another CUDA call (cached per process).
// Memory kinds come from the driver's cuPointerGetAttributes (reached through
// cudaGetDriverEntryPointByVersion, libcuda is not linked), which needs no context:
// cudaPointerGetAttributes would create the current device's primary context, on
// device 0 in a job that never chose one, for every host buffer it is asked about.

#include "cuda/backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/memory.hpp"

#include <cuda.h>

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

namespace {

using PointerGetAttributes = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

PointerGetAttributes pointer_get_attributes() {
  static const PointerGetAttributes fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    (void)cudaGetLastError();
    return reinterpret_cast<PointerGetAttributes>(f);
  }();
  return fn;
}

}  // namespace

MemoryKind memory_kind(const void* p) noexcept {
  if (p == nullptr || device_count() == 0) return MemoryKind::host;
  if (PointerGetAttributes get = pointer_get_attributes()) {
    unsigned type = 0;
    int managed = 0;
    CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void* data[2] = {&type, &managed};
    // Unknown (pageable host) pointers are no error here: every attribute stays 0.
    if (get(2, which, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return MemoryKind::host;
    if (managed) return MemoryKind::managed;
    if (type == CU_MEMORYTYPE_DEVICE) return MemoryKind::device;
    if (type == CU_MEMORYTYPE_HOST) return MemoryKind::pinned;
    return MemoryKind::host;
  }
  cudaPointerAttributes a{};  // a driver without the entry point: the runtime's query
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
  // A device-to-device cudaMemcpy returns before the copy has run ("no host-side
  // synchronization"): whoever reads `dst` next (a CUDA-aware MPI) must see it done.
  wait_caller_stream();
}

int current_device() {
  int d = 0;
  check_cuda(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void set_device(int device) {
  if (current_device() != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace backend
}  // namespace agx::cuda
