// The staging pipeline (see staging.hpp). One call is one Staging object:
//   begin:  D2D own block send->recv (out of place), D2H own block in chunks on `d2h`
//   rounds: post receives on the mirror; post each send once the own-block chunks it
//           reads are on the host; as each receive completes, H2D its bytes on
//           h2d_a / h2d_b alternately; wait for the sends
//   end:    wait for every stream; the pinned mirror goes back to the pool.
// A failure (a CUDA error, an MPI error, or a stall under AGX_TIMEOUT, which this path
// honours as the executor does) takes the executor's abandon path before the mirror
// goes back: receives into the mirror cancelled, sends released, the communicator
// marked (core/timeout.hpp, core/executor.hpp). A rank whose CUDA call failed raises
// agx::Error; its peers then stall on its messages, which AGX_TIMEOUT reports.

#include "cuda/staging.hpp"

#include "core/executor.hpp"
#include "core/message.hpp"
#include "core/mpi_check.hpp"
#include "core/timeout.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace agx::cuda {
namespace {

/// One slice's mirror and its way to the device: blocks lie at b*stride on the mirror
/// and at the slice's device offsets in the receive buffer.
class Staging {
 public:
  Staging(DeviceOps& ops, std::byte* mirror, std::size_t stride, int rank, const Buffers& device,
          const Slice& slice, const StagingSettings& settings)
      : ops_(ops),
        stride_(stride),
        rank_(rank),
        device_(device),
        slice_(slice),
        settings_(settings),
        mirror_{nullptr, mirror, true},
        own_offset_(slice.mirror.offset(rank)),
        own_bytes_(slice.mirror.bytes(rank)) {
    ops_.begin_call();
  }

  ~Staging() {
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

  /// The own block: into its place on the device (out of place) and onto the mirror.
  void own_block_in() {
    if (own_bytes_ == 0) return;
    std::byte* dev_own = static_cast<std::byte*>(device_.recv) + slice_.device.offset(rank_);
    const auto* src = device_.in_place
                          ? dev_own
                          : static_cast<const std::byte*>(device_.send) + slice_.send_shift;
    if (!device_.in_place) ops_.copy_device_async(dev_own, src, own_bytes_, Stream::d2d);
    const std::size_t chunk = std::max<std::size_t>(settings_.chunk_bytes, 1);
    for (std::size_t at = 0; at < own_bytes_; at += chunk) {
      const std::size_t n = std::min(chunk, own_bytes_ - at);
      ops_.copy_to_host_async(mirror_base() + own_offset_ + at, src + at, n, Stream::d2h);
      own_chunks_.push_back({at + n, ops_.record(Stream::d2h)});
    }
  }

  /// Blocks until own-block bytes [0, upto) are on the mirror.
  void ensure_own(std::size_t upto) {
    while (own_ready_ < upto) {
      const OwnChunk& c = own_chunks_[next_chunk_++];
      ops_.synchronize(c.event);
      own_ready_ = c.end;
    }
  }

  /// Own-block bytes a message piece reads, counted from the block's start.
  std::size_t own_bytes_read(const Segment* segments, std::size_t count) const {
    const std::byte* lo = mirror_base() + own_offset_;
    const std::byte* hi = lo + own_bytes_;
    std::size_t need = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::byte* s = segments[i].ptr;
      const std::byte* e = s + segments[i].bytes;
      if (s < hi && lo < e) need = std::max(need, static_cast<std::size_t>(std::min(e, hi) - lo));
    }
    return need;
  }

  /// Enqueues the host->device copies of mirror bytes (received data); a segment may
  /// cover adjacent blocks of the mirror, which are apart on the device.
  void deliver(const Segment* segments, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const Stream s = (deliveries_++ % 2 == 0) ? Stream::h2d_a : Stream::h2d_b;
      std::size_t at = static_cast<std::size_t>(segments[i].ptr - mirror_base());
      std::size_t left = segments[i].bytes;
      while (left > 0) {
        const std::size_t b = at / stride_, within = at - b * stride_;
        const std::size_t n = std::min(left, stride_ - within);
        ops_.copy_to_device_async(static_cast<std::byte*>(device_.recv) +
                                      slice_.device.offset(static_cast<int>(b)) + within,
                                  mirror_base() + at, n, s);
        at += n;
        left -= n;
      }
    }
  }

  /// Copies every block except the own one from the mirror to the device.
  void deliver_all_but_own() {
    for (int b = 0; b < slice_.mirror.nranks(); ++b) {
      if (b == rank_ || slice_.mirror.bytes(b) == 0) continue;
      const Segment seg{mirror_base() + slice_.mirror.offset(b), slice_.mirror.bytes(b)};
      deliver(&seg, 1);
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

  std::byte* mirror_base() const { return static_cast<std::byte*>(mirror_.recv); }

  void drain() {
    for (Stream s : {Stream::d2h, Stream::d2d, Stream::h2d_a, Stream::h2d_b})
      ops_.synchronize(ops_.record(s));
  }

  DeviceOps& ops_;
  std::size_t stride_;
  int rank_;
  Buffers device_;
  const Slice& slice_;
  StagingSettings settings_;
  Buffers mirror_;
  std::size_t own_offset_, own_bytes_;
  std::vector<OwnChunk> own_chunks_;
  std::size_t next_chunk_ = 0, own_ready_ = 0;
  std::size_t deliveries_ = 0;
  bool finished_ = false;
};

/// MPI side of one round on the mirror: the same messages, in the same order, as the
/// host executor (core/executor.cpp) with the same piece size.
class RoundPoster {
 public:
  RoundPoster(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {}
  ~RoundPoster() { free_types(); }
  RoundPoster(const RoundPoster&) = delete;
  RoundPoster& operator=(const RoundPoster&) = delete;

  MPI_Request post(bool is_send, int peer, const Segment* segments, std::size_t count) {
    void* base = segments[0].ptr;
    int n = static_cast<int>(segments[0].bytes);
    MPI_Datatype type = MPI_BYTE;
    if (count > 1) {
      std::vector<int> lengths(count);
      std::vector<MPI_Aint> addresses(count);
      for (std::size_t i = 0; i < count; ++i) {
        lengths[i] = static_cast<int>(segments[i].bytes);
        check_mpi(MPI_Get_address(segments[i].ptr, &addresses[i]), "MPI_Get_address");
      }
      check_mpi(MPI_Type_create_hindexed(static_cast<int>(count), lengths.data(),
                                         addresses.data(), MPI_BYTE, &type),
                "MPI_Type_create_hindexed");
      types_.push_back(type);
      check_mpi(MPI_Type_commit(&types_.back()), "MPI_Type_commit");
      type = types_.back();
      base = MPI_BOTTOM;
      n = 1;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    if (is_send)
      check_mpi(MPI_Isend(base, n, type, peer, tag_, comm_, &r), "MPI_Isend");
    else
      check_mpi(MPI_Irecv(base, n, type, peer, tag_, comm_, &r), "MPI_Irecv");
    return r;
  }

  void free_types() {
    for (MPI_Datatype& t : types_) MPI_Type_free(&t);
    types_.clear();
  }

 private:
  MPI_Comm comm_;
  int tag_;
  std::vector<MPI_Datatype> types_;
};

/// The round's requests, withdrawn if the round does not complete (an exception).
struct RoundRequests {
  std::vector<MPI_Request> all;  ///< receives first, then sends
  std::vector<bool> is_send;
  MPI_Comm comm;
  ~RoundRequests() {
    bool open = false;
    for (MPI_Request r : all) open = open || r != MPI_REQUEST_NULL;
    if (!open) return;
    mark_abandoned(comm);
    abandon(all.data(), is_send);
  }
};

/// One round of a staging call, posted at once and then advanced without blocking:
/// receives on the mirror first, then the sends (each once the own-block chunks it
/// reads are on the host); each receive goes to the device as soon as it completes.
class RoundRun {
 public:
  RoundRun(Staging& st, const Round& round, int rank, const Layout& layout, std::size_t piece_bytes,
           RoundPoster& poster, MPI_Comm comm)
      : st_(st), rank_(rank), poster_(poster), rq_{{}, {}, comm} {
    MessagePlan msg;
    for (const Transfer& t : round.recvs) {
      plan_message(t, rank, st.mirror(), layout, piece_bytes, msg);
      for (std::size_t i = 0; i < msg.pieces(); ++i) {
        const std::size_t b = msg.piece_begin[i], e = msg.piece_begin[i + 1];
        rq_.all.push_back(poster.post(false, t.peer, msg.segments.data() + b, e - b));
        rq_.is_send.push_back(false);
        recv_segments_.emplace_back(msg.segments.begin() + static_cast<std::ptrdiff_t>(b),
                                    msg.segments.begin() + static_cast<std::ptrdiff_t>(e));
      }
    }
    for (const Transfer& t : round.sends) {
      plan_message(t, rank, st.mirror(), layout, piece_bytes, msg);
      for (std::size_t i = 0; i < msg.pieces(); ++i) {
        const std::size_t b = msg.piece_begin[i], e = msg.piece_begin[i + 1];
        st.ensure_own(st.own_bytes_read(msg.segments.data() + b, e - b));  // local wait
        rq_.all.push_back(poster.post(true, t.peer, msg.segments.data() + b, e - b));
        rq_.is_send.push_back(true);
      }
    }
    left_ = rq_.all.size();
    done_.resize(rq_.all.size());
    if (const double limit = timeout_seconds(); limit > 0) clock_.emplace(limit);
  }

  /// One MPI_Testsome; true once every request of the round has completed.
  bool test() {
    if (left_ == 0) return finish();
    int count = 0;
    check_mpi(MPI_Testsome(static_cast<int>(rq_.all.size()), rq_.all.data(), &count, done_.data(),
                           MPI_STATUSES_IGNORE),
              "MPI_Testsome");
    if (count == MPI_UNDEFINED) return finish();
    if (count == 0) {
      if (clock_ && clock_->stalled())
        report_hang(rq_.comm, "agx: AGX_TIMEOUT: " + rank_in(rq_.comm, rank_) +
                                  " made no progress for " + std::to_string(clock_->seconds()) +
                                  " s in a staging round (device buffers): " +
                                  std::to_string(left_) + " of its messages are open");
      return false;
    }
    if (clock_) clock_->restart();
    for (int k = 0; k < count; ++k) {
      const auto i = static_cast<std::size_t>(done_[static_cast<std::size_t>(k)]);
      if (i < recv_segments_.size()) st_.deliver(recv_segments_[i].data(), recv_segments_[i].size());
    }
    left_ -= static_cast<std::size_t>(count);
    return left_ == 0 && finish();
  }

 private:
  bool finish() {
    poster_.free_types();
    return true;
  }

  Staging& st_;
  int rank_;
  RoundPoster& poster_;
  RoundRequests rq_;  ///< withdrawn by its destructor if the round does not complete
  std::vector<std::vector<Segment>> recv_segments_;
  std::vector<int> done_;
  std::size_t left_ = 0;
  std::optional<StallClock> clock_;
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

struct StagingCall::State {
  State(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule, const Buffers& device,
        const Layout& layout, MPI_Comm comm, int tag, const StagingSettings& settings)
      : ops(ops),
        slicing(slicing_of(layout, settings.mirror_bytes)),
        lease(pool, static_cast<std::size_t>(layout.nranks()) * slicing.stride),
        schedule(schedule),
        device(device),
        layout(layout),
        comm(comm),
        tag(tag),
        settings(settings),
        piece(std::max<std::size_t>(settings.piece_bytes, 1)) {}

  /// Starts slice `j`: its layouts, its own block onto the mirror.
  void begin_slice(std::size_t j) {
    slice.emplace(layout, slicing, j);
    st.emplace(ops, lease.get(), slicing.stride, schedule.rank, device, *slice, settings);
    poster.emplace(comm, tag);
    round = 0;
    st->own_block_in();
  }

  // Destroyed in reverse: an open round's requests are withdrawn before the slice's
  // copies are drained (Staging's destructor) and the mirror goes back to the pool.
  DeviceOps& ops;
  Slicing slicing;
  PinnedLease lease;
  const Schedule& schedule;
  Buffers device;
  Layout layout;
  MPI_Comm comm;
  int tag;
  StagingSettings settings;
  std::size_t piece;
  std::size_t slice_index = 0;
  std::optional<Slice> slice;
  std::optional<Staging> st;
  std::optional<RoundPoster> poster;
  std::size_t round = 0;
  std::optional<RoundRun> current;
  bool done = false;
};

StagingCall::StagingCall(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                         const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                         const StagingSettings& settings) {
  try {
    s_ = std::make_unique<State>(ops, pool, schedule, device, layout, comm, tag, settings);
    s_->begin_slice(0);
    (void)test();  // posts the first round
  } catch (...) {
    mark_abandoned(comm);  // a peer's message of this call may still arrive on it
    throw;
  }
}

StagingCall::~StagingCall() = default;

bool StagingCall::test() {
  State& s = *s_;
  if (s.done) return true;
  try {
    for (;;) {
      if (!s.current) {
        if (s.round == s.schedule.rounds.size()) {  // the slice is complete
          s.st->finish();
          s.current.reset();
          s.poster.reset();
          s.st.reset();
          if (++s.slice_index == s.slicing.slices) break;
          s.begin_slice(s.slice_index);
          continue;
        }
        s.current.emplace(*s.st, s.schedule.rounds[s.round], s.schedule.rank, s.slice->mirror,
                          s.piece, *s.poster, s.comm);
      }
      if (!s.current->test()) return false;
      s.current.reset();
      ++s.round;
    }
  } catch (...) {
    mark_abandoned(s.comm);
    throw;
  }
  s.done = true;
  return true;
}

struct HostStagingCall::State {
  State(const Schedule& schedule, const Buffers& host, const Layout& layout, MPI_Comm comm, int tag,
        const StagingSettings& settings)
      : slicing(slicing_of(layout, settings.mirror_bytes)),
        schedule(schedule),
        host(host),
        layout(layout),
        comm(comm),
        tag(tag),
        piece(settings.piece_bytes) {}
  void begin_slice(std::size_t j) {
    e.reset();
    slice.emplace(layout, slicing, j);
    const Buffers b{host.in_place ? nullptr : static_cast<const std::byte*>(host.send) + slice->send_shift,
                    host.recv, host.in_place};
    e.emplace(schedule, b, slice->device, comm, tag, piece);
    e->start();
  }
  Slicing slicing;
  const Schedule& schedule;
  Buffers host;
  Layout layout;
  MPI_Comm comm;
  int tag;
  std::size_t piece;
  std::size_t slice_index = 0;
  std::optional<Slice> slice;
  std::optional<Execution> e;  // destroyed before its slice's layout
};

HostStagingCall::HostStagingCall(const Schedule& schedule, const Buffers& host, const Layout& layout,
                                 MPI_Comm comm, int tag, const StagingSettings& settings)
    : s_(std::make_unique<State>(schedule, host, layout, comm, tag, settings)) {
  s_->begin_slice(0);
}

HostStagingCall::~HostStagingCall() = default;

bool HostStagingCall::test() {
  State& s = *s_;
  while (s.e) {
    if (!s.e->test()) return false;
    s.e.reset();
    if (++s.slice_index < s.slicing.slices) s.begin_slice(s.slice_index);
  }
  return true;
}

void run_staging(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                 const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                 const StagingSettings& settings) {
  StagingCall call(ops, pool, schedule, device, layout, comm, tag, settings);
  while (!call.test()) {
  }
}

struct StagedMirror::State {
  State(DeviceOps& ops, PinnedPool& pool, int rank, const Buffers& device, const Layout& layout,
        const StagingSettings& settings)
      : slicing(slicing_of(layout, static_cast<std::size_t>(-1))),
        lease(pool, static_cast<std::size_t>(layout.nranks()) * slicing.stride),
        slice(layout, slicing, 0),
        st(ops, lease.get(), slicing.stride, rank, device, slice, settings) {}
  Slicing slicing;  // one slice: lib/hier's algorithms take whole blocks
  PinnedLease lease;
  Slice slice;
  Staging st;
};

StagedMirror::StagedMirror(DeviceOps& ops, PinnedPool& pool, int rank, const Buffers& device,
                           const Layout& layout, const StagingSettings& settings)
    : s_(std::make_unique<State>(ops, pool, rank, device, layout, settings)) {
  s_->st.own_block_in();
  s_->st.ensure_own(s_->slice.mirror.bytes(rank));
}

const Layout& StagedMirror::layout() const { return s_->slice.mirror; }

StagedMirror::~StagedMirror() = default;

const Buffers& StagedMirror::mirror() const { return s_->st.mirror(); }

void StagedMirror::finish() {
  s_->st.deliver_all_but_own();
  s_->st.finish();
}

void run_staged(DeviceOps& ops, PinnedPool& pool, int rank, const Buffers& device,
                const Layout& layout, const StagingSettings& settings,
                const std::function<void(const Buffers& mirror, const Layout& on_mirror)>& host_run) {
  StagedMirror m(ops, pool, rank, device, layout, settings);
  host_run(m.mirror(), m.layout());
  m.finish();
}

}  // namespace agx::cuda
