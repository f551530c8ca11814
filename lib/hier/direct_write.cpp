// Direct write into the peers' shared receive buffers (direct_write.hpp has the rounds).

#include "hier/direct_write.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/copy.hpp"
#include "core/integrity.hpp"
#include "core/local_rounds.hpp"
#include "core/planner.hpp"
#include "core/select.hpp"
#include "hier/copy_choice.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"
#include "hier/node_copies.hpp"
#include "hier/shared_alloc.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/uio.h>

namespace agx::hier {
namespace {

/// AGX_DIRECT_WRITE and AGX_DIRECT_WRITE_MIN_BYTES (core/settings.hpp, NodeSettings).
struct DirectSettings {
  bool enabled = true;
  std::size_t min_bytes = 256 * 1024;
};

DirectSettings direct_settings() {
  const NodeSettings& n = process_settings().node;
  return {n.direct_write, n.direct_write_min_bytes};
}

std::atomic<std::uint64_t> calls{0};

/// Round 1's line: where this rank receives, as it sees the call.
struct Descriptor {
  RegionHandle region;      ///< nonce 0: the receive buffer is not in a shared region
  std::uint64_t offset = 0;  ///< of buffers.recv from the region's base
  std::uint64_t extent = 0;  ///< bytes from buffers.recv that the layout covers
  std::uint64_t total = 0;   ///< the layout's bytes
  std::uint64_t own = 0;     ///< this rank's block
  std::uint64_t address = 0;  ///< buffers.recv in this process (the kernel's push)
};
static_assert(std::is_trivially_copyable_v<Descriptor> &&
              sizeof(Descriptor) <= InlineBlock::capacity);

// The statuses the schedule's signals publish; every rank acts on the largest, its own
// included.
constexpr std::uint64_t written = 0, cannot_map = 1, counts_differ = 2;

// Publishes `mine` in this rank's flag line for call `gen` (the discipline of the
// flag-line copies, node_copies.hpp).
template <class T>
void publish(HierContext& h, std::uint64_t gen, const T& mine) {
  InlineBlock& own = h.own_slot().inline_data[gen & 1];
  std::memcpy(own.bytes, &mine, sizeof(T));
  own.seq.store(gen << InlineBlock::size_bits | sizeof(T), std::memory_order_release);
  h.notify();
}

// Every local rank publishes `mine` in its flag line for call `gen` and reads everyone's
// (all[local rank]).
template <class T>
void exchange(HierContext& h, std::uint64_t gen, const T& mine, std::vector<T>& all,
              const char* stage) {
  const Topology& t = h.topo;
  const int n = t.local_size();
  constexpr unsigned bits = InlineBlock::size_bits;
  publish(h, gen, mine);
  all.assign(static_cast<std::size_t>(n), T{});
  all[static_cast<std::size_t>(t.local)] = mine;
  for (int k = 1; k < n; ++k) {
    const int j = (t.local + k) % n;
    const InlineBlock& b = h.slot(j).inline_data[gen & 1];
    std::uint64_t seen = 0;
    wait_advancing(
        h, [&] { return ((seen = b.seq.load(std::memory_order_acquire)) >> bits) >= gen; },
        [&](double seconds) {
          h.stalled(stage,
                    "the flag line of " + h.local_name(j) + " to reach call " +
                        std::to_string(gen) + " (it reads call " + std::to_string(seen >> bits) +
                        ")",
                    seconds);
        });
    if ((seen & ((1u << bits) - 1)) != sizeof(T))  // the peer runs another path of this call
      throw Error(MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: " + h.local_name(j) +
                                        " took another shared-memory path for call " +
                                        std::to_string(gen));
    std::memcpy(&all[static_cast<std::size_t>(j)], b.bytes, sizeof(T));
  }
  h.mark_started(gen - 1);  // every local rank has started this call
  h.finish_call(gen);
}

// The node copies of the direct-write schedule (see the header): a write copies the own
// block into every peer's receive buffer, mapped after the agreement's lines (`all`); its
// signal publishes this rank's status in its flag line; the wait reads every peer's.
class DirectWrites final : public hier::OneNodeCopies {
 public:
  DirectWrites(HierContext& h, const std::vector<Descriptor>& all, std::size_t total)
      : OneNodeCopies(h), all_(all), total_(total) {}

  bool fell_back() const { return worst_ == cannot_map; }

  void write(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override {
    const Topology& t = h_.topo;
    const int me = t.rank, n = t.local_size();
    for (const BlockSpan& span : op.blocks)
      if (span.count > 0 && (span.first != me || span.count != 1))
        throw Error(MPI_ERR_INTERN, "agx: direct write writes the rank's own block only");
    const auto& members = t.members[static_cast<std::size_t>(t.node)];
    const std::size_t at = layout.offset(me), bytes = layout.bytes(me);
    for (int j = 0; j < n && status_ == written; ++j) {
      const Descriptor& d = all_[static_cast<std::size_t>(j)];
      const std::size_t owns = layout.bytes(members[static_cast<std::size_t>(j)]);
      if (d.total != total_ || d.own != owns || (bytes > 0 && at + bytes > d.extent)) {
        status_ = counts_differ;
        why_ = h_.local_name(j) + " sees " + std::to_string(d.total) + " bytes in all and " +
               std::to_string(d.own) + " in its own block; this rank " + std::to_string(total_) +
               " and " + std::to_string(owns);
      }
    }
    std::vector<std::byte*>& bases = bases_;  // (one per thread: no allocation per call)
    bases.assign(static_cast<std::size_t>(n), nullptr);
    for (int k = 1; k < n && status_ == written; ++k) {
      const int j = (t.local + k) % n;
      if (all_[static_cast<std::size_t>(j)].region.nonce == 0) continue;  // (pushed by the kernel)
      bases[static_cast<std::size_t>(j)] = map_peer_region(all_[static_cast<std::size_t>(j)].region, why_);
      if (bases[static_cast<std::size_t>(j)] == nullptr) status_ = cannot_map;
    }
    if (status_ == written && bytes > 0) {
      const auto* src = mine.in_place ? static_cast<const std::byte*>(mine.recv) + at
                                      : static_cast<const std::byte*>(mine.send);
      // Chunk by chunk, each chunk to every peer and then (out of place) to the own
      // receive buffer while it is in cache: a block beyond the core's cache is read
      // from memory once, not once per copy (took_own_copy). On the Intel Xeon machine
      // at 2 ranks and 4 MiB a push and the own copy took 569-581 us so, 675 us one
      // after the other (docs/results.md).
      auto* own = mine.in_place ? nullptr : static_cast<std::byte*>(mine.recv) + at;
      for (std::size_t done = 0; done < bytes && status_ == written;) {
        const std::size_t piece = std::min(bytes - done, own_chunk);
        for (int k = 1; k < n && status_ == written; ++k) {
          const int j = (t.local + k) % n;
          const Descriptor& d = all_[static_cast<std::size_t>(j)];
          if (d.region.nonce != 0)
            copy_bytes(bases[static_cast<std::size_t>(j)] + d.offset + at + done, src + done, piece);
          else if (!push(j, d.address + at + done, src + done, piece))
            status_ = cannot_map;  // (the usual path rewrites it)
        }
        if (own != nullptr) copy_bytes(own + done, src + done, piece);
        done += piece;
      }
      own_copied_ = own != nullptr && status_ == written;
    }
    worst_ = std::max(worst_, status_);  // (this rank's own status counts as its peers' do)
    if (signal) publish(h_, gen_, status_);
  }

  bool took_own_copy() { return std::exchange(own_copied_, false); }

  void signal(const NodeOp&) override { publish(h_, gen_, status_); }

  bool try_wait(const NodeOp& op) override {
    const Topology& t = h_.topo;
    constexpr unsigned bits = InlineBlock::size_bits;
    std::size_t index = 0;
    for (const BlockSpan& span : op.blocks)
      for (int b = span.first; b < span.first + span.count; ++b, ++index) {
        if (index < seen_) continue;  // (read in an earlier poll)
        const int j = t.local_of[static_cast<std::size_t>(b)];
        const InlineBlock& line = h_.slot(j).inline_data[gen_ & 1];
        const std::uint64_t seen = line.seq.load(std::memory_order_acquire);
        if ((seen >> bits) < gen_) return awaiting(line.seq, seen);
        ++seen_;
        step();
        std::uint64_t status = counts_differ;  // a line of another size: another path
        if ((seen & ((1u << bits) - 1)) == sizeof(status)) std::memcpy(&status, line.bytes, sizeof(status));
        else if (why_.empty()) why_ = h_.local_name(j) + " took another shared-memory path";
        worst_ = std::max(worst_, status);
      }
    if (worst_ == counts_differ)
      return disagree(std::make_exception_ptr(Error(
          MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts (direct write)" +
                                (why_.empty() ? std::string(" on another rank") : ": " + why_))));
    return true;
  }

  void put(const NodeOp&, const Buffers&, const Layout&, bool) override { unpaired("put"); }
  bool try_get(const NodeOp&, GetCursor&, const Buffers&, const Layout&) override {
    return unpaired("get");
  }
  void finish() override {
    h_.mark_started(gen_ - 1);  // every local rank has started this call
    h_.finish_call(gen_);
  }
  std::string waiting_for(const NodeOp&, const GetCursor&) const override {
    return "the direct-write statuses of call " + std::to_string(gen_) + " (" +
           std::to_string(seen_) + " read)";
  }

 private:
  // Copies `bytes` from `src` to `address` in local rank j's process (process_vm_writev);
  // false, with why_ said, where the kernel refuses.
  bool push(int j, std::uint64_t address, const std::byte* src, std::size_t bytes) {
    const auto pid = static_cast<pid_t>(h_.slot(j).pid);
    while (bytes > 0) {
      iovec local{const_cast<std::byte*>(src), bytes}, remote{reinterpret_cast<void*>(address), bytes};
      const ssize_t put = peer_maps_refused() ? (errno = EPERM, -1)
                                              : process_vm_writev(pid, &local, 1, &remote, 1, 0);
      if (put <= 0) {
        why_ = "process_vm_writev into " + h_.local_name(j) + " failed: " + std::strerror(errno);
        return false;
      }
      src += put, address += static_cast<std::uint64_t>(put), bytes -= static_cast<std::size_t>(put);
    }
    return true;
  }

  const std::vector<Descriptor>& all_;
  std::size_t total_;
  std::uint64_t status_ = written, worst_ = written;
  std::size_t seen_ = 0;  // peers' statuses read
  bool own_copied_ = false;  // the write made the own block's copy (took_own_copy)
  static constexpr std::size_t own_chunk = std::size_t{512} * 1024;  // (see write)
  std::string why_;
  static thread_local std::vector<std::byte*> bases_;  // each peer's mapped region
};
thread_local std::vector<std::byte*> DirectWrites::bases_;

}  // namespace

bool direct_write_size(std::size_t mean_block) {
  const DirectSettings s = direct_settings();
  return s.enabled && mean_block >= s.min_bytes;
}

std::size_t direct_write_min_buffer() {
  const DirectSettings s = direct_settings();
  if (!s.enabled) return std::numeric_limits<std::size_t>::max();
  return s.min_bytes > std::numeric_limits<std::size_t>::max() / 2 ? s.min_bytes : 2 * s.min_bytes;
}

std::uint64_t direct_write_calls() { return calls.load(std::memory_order_relaxed); }

bool direct_write(HierContext& h, const Buffers& buffers, const Layout& layout,
                  bool send_on_host, std::optional<LargeCopies>* copies) {
  const DirectSettings s = direct_settings();
  const Topology& t = h.topo;
  if (!s.enabled || t.nnodes != 1 || t.size < 2) return false;
  std::size_t total = 0, extent = 0;
  for (int r = 0; r < t.size; ++r) {
    total += layout.bytes(r);
    if (layout.bytes(r) > 0) extent = std::max(extent, layout.offset(r) + layout.bytes(r));
  }
  if (total == 0 || total / static_cast<std::size_t>(t.size) < s.min_bytes) return false;
  h.prepare_node();
  const std::size_t mean = total / static_cast<std::size_t>(t.size);
  const WaitPick wait = h.wait_style_for(mean);
  const double started = MPI_Wtime();
  const int me = t.rank;

  Descriptor mine;
  SharedView view;
  const bool send_ok = buffers.in_place || send_on_host;  // (what this rank writes from)
  if (send_ok && find_shared(buffers.recv, extent, view)) {
    mine.region = view.region;
    mine.offset = view.offset;
  }
  mine.extent = extent;
  mine.total = total;
  mine.own = layout.bytes(me);
  // In place, pushed into only where the node has 3 ranks or more: the own block, read
  // once from memory, then goes to 2 peers or more from the cache. At 2 ranks there is
  // no own copy to make with the writes and one peer to write to, and single copy's read
  // or staging ran 0.92-0.99x Open MPI's time from 256 KiB against pushing's 0.95-1.07x;
  // at 3 and 4 ranks pushing took 10-20% off at 16 MiB (docs/hierarchy.md).
  if (send_ok && (!buffers.in_place || t.size >= 3))
    mine.address = reinterpret_cast<std::uintptr_t>(buffers.recv);
  thread_local std::vector<Descriptor> all;
  const std::uint64_t gen = h.next_gen();
  exchange(h, gen, mine, all, "direct write: receive buffers");
  // Every rank sees the same lines: all go on alike. A receive buffer outside agx's
  // regions is pushed by the kernel where the copy choice takes the kernel's copies for
  // this size (copy_choice.hpp: the node path picks, trials included; a point-to-point
  // choice, `copies` null, pushes once the node path's trials decided so), else every
  // rank leaves.
  bool kernel = false;
  for (const Descriptor& d : all) kernel = kernel || d.region.nonce == 0;
  if (kernel) {
    for (const Descriptor& d : all)
      if (d.address == 0) return false;
    if (copies == nullptr ? decided_large_copies(h, mean) != 1
                          : (*copies = choose_large_copies(h, mean))->way != 1)
      return false;
  }

  // The schedule (see the header), planned once per communicator.
  if (h.direct_write_schedule.rounds.empty()) {
    NodeShape shape;
    shape.node_of = t.node_of;
    shape.direct_write = true;
    h.direct_write_schedule = plan_node_algorithm(Algorithm::shared_memory, shape, me);
  }
  DirectWrites node(h, all, total);
  const auto pause = [&](auto&& ready) {
    wait_advancing(h, ready, [&](double seconds) {
      h.stalled("direct write: end of writing", node.waiting_for(NodeOp{}, GetCursor{}), seconds);
    });
  };
  if (run_local_rounds(h.direct_write_schedule, false, node, buffers, layout, pause))
    std::rethrow_exception(node.disagreement());
  if (node.fell_back()) {  // the usual path rewrites every block, staged (no trial)
    if (kernel && copies != nullptr) *copies = LargeCopies{};  // (a failed push is no trial)
    return false;
  }
  const double seconds = MPI_Wtime() - started;
  record_wait_trial(h, wait, seconds);
  if (kernel && copies != nullptr) {  // (the node path's calls: its copies counted)
    record_trial(h, **copies, seconds);
    ++h.single_copy_calls;
  }
  calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool direct_write_fits(const Layout& layout) {
  const int size = layout.nranks();
  if (size < 2) return false;
  std::size_t total = 0;
  for (int r = 0; r < size; ++r) total += layout.bytes(r);
  if (total == 0 || !direct_write_size(total / static_cast<std::size_t>(size))) return false;
  const Checks checks = Checks::of(Algorithm::shared_memory);
  return !checks.integrity && !checks.flip;  // the usual paths check end to end
}

bool run_direct_write(CommContext& ctx, const Buffers& buffers, const Layout& layout,
                      bool send_on_host) {
  if (config().check)
    check_consistency(ctx, layout, AlgorithmChoice{Algorithm::shared_memory, 0}, buffers.in_place);
  HierContext& h = hier_context(ctx);
  h.running = Algorithm::shared_memory;
  return direct_write(h, buffers, layout, send_on_host);
}

}  // namespace agx::hier
