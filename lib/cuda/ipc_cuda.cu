// CUDA side of the IPC path (ipc.cpp has the protocol). One non-blocking stream and one
// interprocess event per process; peers' memory and event handles are opened once and
// cached by handle bytes (a handle names one live allocation; a freed and reallocated
// peer buffer has a new handle, and its old mapping stays open until the process ends).
// The allocation base comes from the driver's cuMemGetAddressRange, reached through
// cudaGetDriverEntryPointByVersion, so libagx does not link libcuda.

#include "cuda/backend.hpp"
#include "cuda/cuda_check.hpp"

#include <cstring>
#include <map>
#include <string>

namespace agx::cuda::backend {
namespace {

using GetAddressRange = int (*)(unsigned long long* base, std::size_t* size,
                                unsigned long long ptr);

struct IpcState {
  cudaStream_t stream{};
  cudaEvent_t ready{};
  cudaEvent_t caller{};
  cudaIpcEventHandle_t ready_handle{};
  GetAddressRange address_range = nullptr;
  std::map<std::string, std::byte*> memories;
  std::map<std::string, cudaEvent_t> events;
};

IpcState& state() {
  static IpcState* s = [] {
    auto* st = new IpcState();
    check_cuda(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming | cudaEventInterprocess),
               "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&st->caller, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaIpcGetEventHandle(&st->ready_handle, st->ready), "cudaIpcGetEventHandle");
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      st->address_range = reinterpret_cast<GetAddressRange>(fn);
    (void)cudaGetLastError();
    return st;
  }();
  return *s;
}

std::string key(const unsigned char (&bytes)[64]) {
  return std::string(reinterpret_cast<const char*>(bytes), 64);
}

}  // namespace

bool ipc_begin(const void* send, void* recv, bool in_place, std::size_t own_offset,
               std::size_t own_bytes, IpcExport& out) {
  IpcState& s = state();
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  out.device = device;
  check_cuda(cudaEventRecord(s.caller, cudaStreamLegacy), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(s.stream, s.caller, 0), "cudaStreamWaitEvent");
  if (!in_place && own_bytes > 0)
    check_cuda(cudaMemcpyAsync(static_cast<std::byte*>(recv) + own_offset, send, own_bytes,
                               cudaMemcpyDefault, s.stream),
               "cudaMemcpyAsync");
  check_cuda(cudaEventRecord(s.ready, s.stream), "cudaEventRecord");
  std::memcpy(out.event, &s.ready_handle, sizeof out.event);

  unsigned long long base = 0;
  std::size_t size = 0;
  if (s.address_range == nullptr ||
      s.address_range(&base, &size, reinterpret_cast<unsigned long long>(recv)) != 0)
    return false;
  cudaIpcMemHandle_t h{};
  if (cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::memcpy(out.memory, &h, sizeof out.memory);
  out.offset = reinterpret_cast<unsigned long long>(recv) - base;
  return true;
}

IpcPeer ipc_open(const IpcExport& peer) {
  IpcState& s = state();
  IpcPeer p;
  const std::string mk = key(peer.memory);
  auto m = s.memories.find(mk);
  if (m == s.memories.end()) {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, peer.memory, sizeof h);
    void* ptr = nullptr;
    if (cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      (void)cudaGetLastError();
      return p;
    }
    m = s.memories.emplace(mk, static_cast<std::byte*>(ptr)).first;
  }
  const std::string ek = key(peer.event);
  auto e = s.events.find(ek);
  if (e == s.events.end()) {
    cudaIpcEventHandle_t h{};
    std::memcpy(&h, peer.event, sizeof h);
    cudaEvent_t ev{};
    if (cudaIpcOpenEventHandle(&ev, h) != cudaSuccess) {
      (void)cudaGetLastError();
      return p;
    }
    e = s.events.emplace(ek, ev).first;
  }
  p.base = m->second + peer.offset;
  p.event = e->second;
  return p;
}

void ipc_copy(std::byte* dst, const std::byte* src, std::size_t bytes, const IpcPeer& peer) {
  IpcState& s = state();
  check_cuda(cudaStreamWaitEvent(s.stream, static_cast<cudaEvent_t>(peer.event), 0),
             "cudaStreamWaitEvent");
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.stream),
             "cudaMemcpyAsync");
}

void ipc_finish() {
  check_cuda(cudaStreamSynchronize(state().stream), "cudaStreamSynchronize");
}

}  // namespace agx::cuda::backend
