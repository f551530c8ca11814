// The staging pipeline (see staging.hpp). A call runs slice after slice; each slice is
// the staged schedule (stage_on_device: the host schedule with its device copies) on
// the round engine (core/executor.hpp) over the pinned mirror, with this file's Staging
// as the engine's DeviceCopies:
//   round 0: the own copy (device-level: D2D send->recv, out of place) and the to_host
//           of the own block, in chunks on `d2h`
//   rounds: the engine posts the round's messages on the mirror, from the compiled
//           descriptors; before it posts a send (or takes the own block's checksum)
//           it asks own_needed(), which waits for the own-block chunks that send reads;
//           each receive that completes goes to the device (its round's to_device) on
//           h2d_a / h2d_b alternately
//   end:    wait for every stream; the pinned mirror goes back to the pool.
// AGX_TIMEOUT, AGX_INTEGRITY (and AGX_TEST_FLIP), truncation and the abandon path are
// the engine's: a failure withdraws the slice's requests (receives into the mirror
// cancelled, sends released, the communicator marked) before the slice's copies are
// drained and the mirror goes back. A rank whose CUDA call failed raises agx::Error;
// its peers then stall on its messages, which AGX_TIMEOUT reports.

#include "cuda/staging.hpp"

#include "core/comm_context.hpp"
#include "core/executor.hpp"
#include "hier/hier.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace agx::cuda {
namespace {

/// One slice's mirror and its way to the device: blocks lie at b*stride on the mirror
/// and at the slice's device offsets in the receive buffer.
class Staging final : public DeviceCopies {
 public:
  Staging(DeviceOps& ops, std::byte* mirror, int rank, const Buffers& device, const Slice& slice,
          const StagingSettings& settings)
      : ops_(ops),
        rank_(rank),
        device_(device),
        slice_(slice),
        chunk_bytes_(std::max<std::size_t>(settings.chunk_bytes, 1)),
        mirror_{nullptr, mirror, true} {
    ops_.begin_call();
  }

  ~Staging() override {
    if (!finished_) {  // an error: let the copies end before the mirror is reused
      try {
        drain();
      } catch (...) {
      }
    }
    ops_.end_call();
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  const Buffers& mirror() const { return mirror_; }

  /// The own block into its place on the device (out of place).
  void copy_own() override {
    const std::size_t own = slice_.mirror.bytes(rank_);
    if (own > 0 && !device_.in_place) ops_.copy_device_async(device_at(rank_), own_source(), own, Stream::d2d);
  }

  /// The own block onto the mirror, chunk by chunk.
  void own_to_host() override {
    const std::size_t own = slice_.mirror.bytes(rank_);
    const std::byte* src = own_source();
    for (std::size_t at = 0; at < own; at += chunk_bytes_) {
      const std::size_t n = std::min(chunk_bytes_, own - at);
      ops_.copy_to_host_async(mirror_at(rank_) + at, src + at, n, Stream::d2h);
      own_chunks_.push_back({at + n, ops_.record(Stream::d2h)});
    }
  }

  /// Blocks until own-block bytes [0, upto) are on the mirror.
  void own_needed(std::size_t upto) override {
    while (own_ready_ < upto && next_chunk_ < own_chunks_.size()) {
      const OwnChunk& c = own_chunks_[next_chunk_++];
      ops_.synchronize(c.event);
      own_ready_ = c.end;
    }
  }

  /// Bytes [begin, end) of the transfer's blocks (in transfer order) are on the mirror:
  /// host->device, block by block (adjacent on the mirror, apart on the device).
  void to_device(const Transfer& t, std::size_t begin, std::size_t end) override {
    const Stream s = (deliveries_++ % 2 == 0) ? Stream::h2d_a : Stream::h2d_b;
    std::size_t at = 0;  // where block b starts in the transfer's data
    for (const BlockSpan& span : t.blocks)
      for (int b = span.first; b < span.first + span.count && at < end; ++b) {
        const std::size_t n = slice_.mirror.bytes(b), lo = std::max(at, begin),
                          hi = std::min(at + n, end);
        if (lo < hi) ops_.copy_to_device_async(device_at(b) + (lo - at), mirror_at(b) + (lo - at), hi - lo, s);
        at += n;
      }
  }

  /// Blocks [first, last) of a node schedule's get (in the get's order) are on the
  /// mirror: host->device, each on the next stream.
  void got(const NodeOp& get, std::size_t first, std::size_t last) override {
    std::size_t index = 0;
    for (const BlockSpan& span : get.blocks)
      for (int b = span.first; b < span.first + span.count; ++b, ++index) {
        if (index < first || index >= last || slice_.mirror.bytes(b) == 0) continue;
        const Stream s = (deliveries_++ % 2 == 0) ? Stream::h2d_a : Stream::h2d_b;
        ops_.copy_to_device_async(device_at(b), mirror_at(b), slice_.mirror.bytes(b), s);
      }
  }

  /// Waits for every stream; after this the receive buffer is complete.
  void finish() {
    drain();
    finished_ = true;
  }

 private:
  struct OwnChunk {
    std::size_t end;
    Event event;
  };

  const std::byte* own_source() const {
    return device_.in_place ? device_at(rank_)
                            : static_cast<const std::byte*>(device_.send) + slice_.send_shift;
  }
  std::byte* mirror_at(int b) const {
    return static_cast<std::byte*>(mirror_.recv) + slice_.mirror.offset(b);
  }
  std::byte* device_at(int b) const {
    return static_cast<std::byte*>(device_.recv) + slice_.device.offset(b);
  }

  void drain() {
    for (Stream s : {Stream::d2h, Stream::d2d, Stream::h2d_a, Stream::h2d_b})
      ops_.synchronize(ops_.record(s));
  }

  DeviceOps& ops_;
  int rank_;
  Buffers device_;
  const Slice& slice_;
  std::size_t chunk_bytes_;
  Buffers mirror_;
  std::vector<OwnChunk> own_chunks_;
  std::size_t next_chunk_ = 0, own_ready_ = 0;
  std::size_t deliveries_ = 0;
  bool finished_ = false;
};

}  // namespace

Slicing slicing_of(const Layout& layout, std::size_t mirror_bytes) {
  const auto n = static_cast<std::size_t>(layout.nranks());
  std::size_t largest = 0;
  for (int b = 0; b < layout.nranks(); ++b) largest = std::max(largest, layout.bytes(b));
  Slicing s;
  if (n == 0 || largest == 0) return s;
  s.stride = largest <= mirror_bytes / n ? largest : std::max<std::size_t>(mirror_bytes / n, 1);
  s.slices = (largest + s.stride - 1) / s.stride;
  return s;
}

Slice::Slice(const Layout& layout, const Slicing& s, std::size_t j) {
  const auto n = static_cast<std::size_t>(layout.nranks());
  bytes.resize(n);
  device_offsets.resize(n);
  mirror_offsets.resize(n);
  const std::size_t start = j * s.stride;
  send_shift = start;  // the own block's piece (unused when the piece is empty)
  for (int b = 0; b < layout.nranks(); ++b) {
    const auto k = static_cast<std::size_t>(b);
    const std::size_t all = layout.bytes(b), from = std::min(start, all);
    bytes[k] = std::min(s.stride, all - from);
    device_offsets[k] = layout.offset(b) + from;
    mirror_offsets[k] = k * s.stride;
  }
  device = Layout::varying(bytes, device_offsets);
  mirror = Layout::varying(bytes, mirror_offsets);
}

/// A staging call's slices, each one schedule run on the engine: the staged schedule on
/// the pinned mirror with Staging as its device copies (device buffers, `ops` set), or
/// the host schedule on the caller's buffers (a host rank of the call, `ops` null), so
/// the messages are the same.
struct SlicedCall {
  SlicedCall(DeviceOps* ops, PinnedPool* pool, const Schedule& schedule, const Buffers& buffers,
             const Layout& layout, MPI_Comm comm, int tag, const StagingSettings& settings,
             const Checks& checks)
      : ops(ops),
        slicing(slicing_of(layout, settings.mirror_bytes)),
        schedule(schedule),
        buffers(buffers),
        layout(layout),
        comm(comm),
        tag(tag),
        settings(settings),
        checks(checks) {
    if (ops != nullptr) lease.emplace(*pool, static_cast<std::size_t>(layout.nranks()) * slicing.stride);
  }

  /// Starts slice `j`: its layouts, its own block onto the mirror, its first round.
  void begin_slice(std::size_t j) {
    slice.emplace(layout, slicing, j);
    const std::size_t piece = std::max<std::size_t>(settings.piece_bytes, 1);
    if (ops == nullptr) {
      const Buffers b{buffers.in_place ? nullptr : static_cast<const std::byte*>(buffers.send) + slice->send_shift,
                      buffers.recv, buffers.in_place};
      e.emplace(schedule, b, slice->device, comm, tag, piece, checks);
    } else {
      st.emplace(*ops, lease->get(), schedule.rank, buffers, *slice, settings);
      e.emplace(schedule, st->mirror(), slice->mirror, comm, tag, piece, checks);
      e->use_device(*st);
    }
    e->start();
  }

  bool test() {
    try {
      while (e) {
        if (!e->test()) return false;
        e.reset();
        if (st) st->finish();
        st.reset();
        if (++slice_index < slicing.slices) begin_slice(slice_index);
      }
    } catch (...) {
      mark_abandoned(comm);  // a peer's message of a later slice may still arrive on it
      throw;
    }
    return true;
  }

  // Destroyed in reverse: an open slice's requests are withdrawn (the engine's abandon
  // path) before its copies are drained (Staging's destructor) and the mirror goes back.
  DeviceOps* ops;
  Slicing slicing;
  std::optional<PinnedLease> lease;
  const Schedule& schedule;
  Buffers buffers;
  Layout layout;
  MPI_Comm comm;
  int tag;
  StagingSettings settings;
  Checks checks;
  std::size_t slice_index = 0;
  std::optional<Slice> slice;
  std::optional<Staging> st;
  std::optional<Execution> e;
};

namespace {

std::unique_ptr<SlicedCall> start_sliced(DeviceOps* ops, PinnedPool* pool, const Schedule& schedule,
                                         const Buffers& buffers, const Layout& layout, MPI_Comm comm,
                                         int tag, const StagingSettings& settings, const Checks& checks) {
  try {
    auto s = std::make_unique<SlicedCall>(ops, pool, schedule, buffers, layout, comm, tag, settings, checks);
    s->begin_slice(0);
    return s;
  } catch (...) {
    mark_abandoned(comm);  // a peer's message of this call may still arrive on it
    throw;
  }
}

}  // namespace

StagingCall::StagingCall(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                         const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                         const StagingSettings& settings, const Checks& checks)
    : s_((is_staged(schedule) ? void()
                              : throw Error(MPI_ERR_INTERN, "agx: a staging call needs a staged schedule (stage_on_device)"),
          start_sliced(&ops, &pool, schedule, device, layout, comm, tag, settings, checks))) {}

StagingCall::~StagingCall() = default;

bool StagingCall::test() { return s_->test(); }

HostStagingCall::HostStagingCall(const Schedule& schedule, const Buffers& host, const Layout& layout,
                                 MPI_Comm comm, int tag, const StagingSettings& settings,
                                 const Checks& checks)
    : s_(start_sliced(nullptr, nullptr, schedule, host, layout, comm, tag, settings, checks)) {}

HostStagingCall::~HostStagingCall() = default;

bool HostStagingCall::test() { return s_->test(); }

void run_staging(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                 const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                 const StagingSettings& settings, const Checks& checks) {
  StagingCall call(ops, pool, schedule, device, layout, comm, tag, settings, checks);
  while (!call.test()) {
  }
}

struct StagedNodeCall::State {
  State(DeviceOps& ops, PinnedPool& pool, CommContext& ctx, Algorithm a, const Buffers& device,
        const Layout& layout, const StagingSettings& settings)
      : slicing(slicing_of(layout, static_cast<std::size_t>(-1))),
        lease(pool, static_cast<std::size_t>(layout.nranks()) * slicing.stride),
        slice(layout, slicing, 0),
        st(ops, lease.get(), ctx.rank(), device, slice, settings),
        call(hier::start_node_call(ctx, a, st.mirror(), slice.mirror, nullptr, &st)) {}
  // Destroyed in reverse: the node call (its requests withdrawn on a failure) before the
  // copies are drained (Staging's destructor) and the mirror goes back.
  Slicing slicing;  // one slice: lib/hier's schedules take whole blocks
  PinnedLease lease;
  Slice slice;
  Staging st;
  hier::NodeCallPtr call;
};

StagedNodeCall::StagedNodeCall(DeviceOps& ops, PinnedPool& pool, CommContext& ctx, Algorithm a,
                               const Buffers& device, const Layout& layout,
                               const StagingSettings& settings)
    : s_(std::make_unique<State>(ops, pool, ctx, a, device, layout, settings)) {}

StagedNodeCall::~StagedNodeCall() = default;

bool StagedNodeCall::test() {
  if (done_) return true;
  if (!hier::test_node_call(*s_->call)) return false;
  s_->st.finish();  // every device copy over: the receive buffer is complete
  done_ = true;
  return true;
}

}  // namespace agx::cuda
