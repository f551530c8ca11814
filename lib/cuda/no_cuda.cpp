// lib/cuda without CUDA: every pointer is host memory, and nothing here is ever asked
// to move device memory (run_if_device returns false before it would).

#include "cuda/backend.hpp"
#include "cuda/memory.hpp"

#include <agx/error.hpp>

namespace agx::cuda {

MemoryKind memory_kind(const void*) noexcept { return MemoryKind::host; }
bool built_with_cuda() noexcept { return false; }
int device_count() noexcept { return 0; }

namespace backend {
namespace {
[[noreturn]] void unavailable() {
  throw Error(MPI_ERR_OTHER, "agx: built without CUDA (meson option -Dcuda=enabled)");
}
}  // namespace

DeviceOps& device_ops() { unavailable(); }
PinnedPool& pinned_pool() { unavailable(); }
void copy_sync(void*, const void*, std::size_t) { unavailable(); }
void wait_caller_stream() {}
int current_device() { return 0; }
void set_device(int) {}
void ipc_copy_own(const void*, void*, std::size_t) { unavailable(); }
bool ipc_expose(void*, std::size_t, IpcExport&) { return false; }
IpcPeer ipc_open(const IpcExport&) { return {}; }
void ipc_copy(std::byte*, const std::byte*, std::size_t, const IpcPeer&) { unavailable(); }
void ipc_finish() {}

}  // namespace backend
}  // namespace agx::cuda
