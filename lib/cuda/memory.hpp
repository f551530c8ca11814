#pragma once
// Memory kinds of user buffers, as the CUDA runtime reports them. Without CUDA (the
// no_cuda.cpp build) or on a machine without a GPU or driver, every pointer is host memory.

#include <cstdint>
#include <string_view>

namespace agx::cuda {

enum class MemoryKind : std::uint8_t {
  host,     ///< pageable host memory (or anything CUDA does not know)
  pinned,   ///< page-locked host memory (cudaMallocHost / cudaHostRegister)
  device,   ///< cudaMalloc memory of a GPU
  managed,  ///< cudaMallocManaged memory
};

/// True for kinds that host code must not dereference (device; managed is treated as
/// device memory too, so that it moves with copy engines rather than page faults).
constexpr bool needs_device_path(MemoryKind k) {
  return k == MemoryKind::device || k == MemoryKind::managed;
}

constexpr std::string_view to_string(MemoryKind k) {
  switch (k) {
    case MemoryKind::host: return "host";
    case MemoryKind::pinned: return "pinned";
    case MemoryKind::device: return "device";
    case MemoryKind::managed: return "managed";
  }
  return "unknown";
}

/// The kind of the memory at `p` (null is host). Never throws; any CUDA error,
/// including "no device" and "insufficient driver", means host, and is cleared.
MemoryKind memory_kind(const void* p) noexcept;

/// True when `p` must take the device path (device or managed memory).
inline bool is_device_memory(const void* p) noexcept { return needs_device_path(memory_kind(p)); }

/// Whether this build has CUDA support compiled in (lib/cuda built with nvcc).
bool built_with_cuda() noexcept;

/// Number of usable CUDA devices in this process; 0 without a GPU, driver or CUDA
/// build. Asked once per process and cached.
int device_count() noexcept;

}  // namespace agx::cuda
