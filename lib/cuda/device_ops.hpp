#pragma once
// DeviceOps: the few device operations the staging pipeline needs, behind an abstract
// interface. The real implementation (cuda_ops.cu) uses CUDA streams and events; the
// test seam (test/cuda/seam_ops.hpp) stands in for device memory with separate host
// memory and explicit, delayed copies, so that a missing wait or copy fails a test.
//
// Semantics are CUDA's: operations on one stream run in order; operations on different
// streams run in any order; an event completes when everything enqueued on its stream
// before it has completed.

#include <cstddef>
#include <cstdint>

namespace agx::cuda {

/// The pipeline's streams: device->host copies, two alternating host->device streams
/// (double buffering of received chunks) and device->device copies.
enum class Stream : std::uint8_t { d2h, h2d_a, h2d_b, d2d };
inline constexpr int stream_count = 4;

/// An event handle, valid until end_call().
using Event = std::uint32_t;

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  /// Starts a call: orders every stream after the caller's work already enqueued on the
  /// legacy default stream (what agx waits for before it reads the send buffer).
  virtual void begin_call() = 0;
  /// Ends a call: every event handle of the call becomes invalid.
  virtual void end_call() noexcept = 0;

  /// Enqueues a copy of `bytes` from device memory to (pinned) host memory.
  virtual void copy_to_host_async(void* host, const void* device, std::size_t bytes, Stream s) = 0;
  /// Enqueues a copy of `bytes` from (pinned) host memory to device memory.
  virtual void copy_to_device_async(void* device, const void* host, std::size_t bytes,
                                    Stream s) = 0;
  /// Enqueues a device-to-device copy.
  virtual void copy_device_async(void* dst, const void* src, std::size_t bytes, Stream s) = 0;

  /// Records an event after everything enqueued on `s` so far.
  virtual Event record(Stream s) = 0;
  /// True when the event has completed (never blocks).
  virtual bool query(Event e) = 0;
  /// Blocks until the event has completed.
  virtual void synchronize(Event e) = 0;

  /// Page-locked host memory for the staging mirror (see PinnedPool).
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* p) noexcept = 0;
};

}  // namespace agx::cuda
