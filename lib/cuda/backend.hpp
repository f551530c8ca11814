#pragma once
// What lib/cuda needs from the CUDA runtime, in one place: implemented with CUDA in
// cuda_ops.cu / memory_cuda.cu / ipc_cuda.cu, and by no_cuda.cpp ("every pointer is host
// memory") when agx is built without CUDA. Everything else in lib/cuda is plain C++ and
// MPI and is built in both cases.

#include "cuda/device_ops.hpp"
#include "cuda/pinned_pool.hpp"

#include <cstddef>
#include <cstdint>

namespace agx::cuda::backend {

/// The process-wide CUDA streams/events implementation. Throws agx::Error without CUDA.
DeviceOps& device_ops();
/// The process-wide pool of pinned staging buffers (over device_ops()).
PinnedPool& pinned_pool();

/// Copies `bytes` between any kinds of memory and waits (cudaMemcpy, after the caller's
/// legacy default stream). Throws agx::Error on a CUDA failure.
void copy_sync(void* dst, const void* src, std::size_t bytes);
/// Waits for the caller's work on the legacy default stream.
void wait_caller_stream();

/// The calling thread's current CUDA device (cudaGetDevice: creates no context).
int current_device();
/// Makes `device` current on the calling thread when it is not (the device path may run
/// on agx's progress thread, whose current device is not the caller's).
void set_device(int device);

/// What a rank publishes for CUDA IPC: its receive allocation and its ready event.
struct IpcExport {
  unsigned char memory[64];  ///< cudaIpcMemHandle_t of the receive allocation
  unsigned char event[64];   ///< cudaIpcEventHandle_t of this process's ready event
  std::uint64_t offset;      ///< this rank's own block within that allocation
  std::uint64_t base;        ///< that allocation's address in this rank (cache key)
  std::int64_t owner;        ///< this process (cache key; one node)
  std::int32_t ok;           ///< 0: this rank cannot take part
  std::int32_t device;       ///< CUDA device ordinal (informational)
};

/// The IPC schedule's own copy (copy~device): orders the IPC stream after the caller's
/// legacy stream, then copies `bytes` from `send` to `recv_own` on it (send null or bytes
/// 0: the ordering only, as in place). Never waits.
void ipc_copy_own(const void* send, void* recv_own, std::size_t bytes);
/// The IPC schedule's expose~device and signal~device: records the ready event on the IPC
/// stream (after the own copy) and fills `out` with the receive allocation's handle and
/// the own block's place in it. False when `recv` cannot be exported. Never waits.
bool ipc_expose(void* recv, std::size_t own_offset, IpcExport& out);

/// Most peer allocations kept mapped (ipc_cuda.cu); more only while one call needs them.
inline constexpr std::size_t ipc_cache_entries = 16;

/// A peer's receive allocation and ready event, opened once and cached (ipc_cuda.cu).
struct IpcPeer {
  std::byte* base = nullptr;  ///< the peer's own block (in its receive buffer) in this process
  void* event = nullptr;      ///< cudaEvent_t
};
/// Opens (or finds in the cache) a peer's export; base == nullptr when impossible.
IpcPeer ipc_open(const IpcExport& peer);
/// Enqueues: wait for the peer's ready event, then copy `bytes` from `src` to `dst`.
void ipc_copy(std::byte* dst, const std::byte* src, std::size_t bytes, const IpcPeer& peer);
/// Waits for every copy of this call.
void ipc_finish();

}  // namespace agx::cuda::backend
