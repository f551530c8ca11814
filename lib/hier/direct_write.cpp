// Direct write into the peers' shared receive buffers (direct_write.hpp has the rounds).

#include "hier/direct_write.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/copy.hpp"
#include "core/integrity.hpp"
#include "core/select.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"
#include "hier/shared_alloc.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

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
};
static_assert(std::is_trivially_copyable_v<Descriptor> &&
              sizeof(Descriptor) <= InlineBlock::capacity);

// Round 2's statuses; every rank acts on the largest.
constexpr std::uint64_t written = 0, cannot_map = 1, counts_differ = 2;

// Every local rank publishes `mine` in its flag line for call `gen` and reads everyone's
// (all[local rank]); the discipline of the flag-line copies (node_copies.hpp).
template <class T>
void exchange(HierContext& h, std::uint64_t gen, const T& mine, std::vector<T>& all,
              const char* stage) {
  const Topology& t = h.topo;
  const int n = t.local_size();
  constexpr unsigned bits = InlineBlock::size_bits;
  InlineBlock& own = h.own_slot().inline_data[gen & 1];
  std::memcpy(own.bytes, &mine, sizeof(T));
  own.seq.store(gen << bits | sizeof(T), std::memory_order_release);
  h.notify();
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

}  // namespace

bool direct_write_size(std::size_t mean_block) {
  const DirectSettings s = direct_settings();
  return s.enabled && mean_block >= s.min_bytes;
}

std::uint64_t direct_write_calls() { return calls.load(std::memory_order_relaxed); }

bool direct_write(HierContext& h, const Buffers& buffers, const Layout& layout,
                  bool send_on_host) {
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
  h.wait_style_for(total / static_cast<std::size_t>(t.size));
  const int me = t.rank, n = t.local_size();
  const auto& members = t.members[static_cast<std::size_t>(t.node)];

  Descriptor mine;
  SharedView view;
  if ((buffers.in_place || send_on_host) && find_shared(buffers.recv, extent, view)) {
    mine.region = view.region;
    mine.offset = view.offset;
  }
  mine.extent = extent;
  mine.total = total;
  mine.own = layout.bytes(me);
  thread_local std::vector<Descriptor> all;
  thread_local std::vector<std::uint64_t> statuses;
  const std::uint64_t gen = h.next_gen();
  exchange(h, gen, mine, all, "direct write: receive buffers");
  for (const Descriptor& d : all)
    if (d.region.nonce == 0) return false;  // every rank sees the same lines: all go on alike

  // Write the own block into every peer's receive buffer (and the own one).
  std::uint64_t status = written;
  std::string why;
  const std::size_t at = layout.offset(me), bytes = layout.bytes(me);
  for (int j = 0; j < n && status == written; ++j) {
    const Descriptor& d = all[static_cast<std::size_t>(j)];
    if (d.total != total || d.own != layout.bytes(members[static_cast<std::size_t>(j)]) ||
        (bytes > 0 && at + bytes > d.extent)) {
      status = counts_differ;
      why = h.local_name(j) + " sees " + std::to_string(d.total) + " bytes in all and " +
            std::to_string(d.own) + " in its own block; this rank " + std::to_string(total) +
            " and " + std::to_string(layout.bytes(members[static_cast<std::size_t>(j)]));
    }
  }
  thread_local std::vector<std::byte*> bases;
  bases.assign(static_cast<std::size_t>(n), nullptr);
  for (int k = 1; k < n && status == written; ++k) {
    const int j = (t.local + k) % n;
    bases[static_cast<std::size_t>(j)] = map_peer_region(all[static_cast<std::size_t>(j)].region, why);
    if (bases[static_cast<std::size_t>(j)] == nullptr) status = cannot_map;
  }
  if (status == written && bytes > 0) {
    std::byte* own_dst = static_cast<std::byte*>(buffers.recv) + at;
    const auto* src = buffers.in_place ? own_dst : static_cast<const std::byte*>(buffers.send);
    for (int k = 1; k < n; ++k) {
      const int j = (t.local + k) % n;
      copy_bytes(bases[static_cast<std::size_t>(j)] + all[static_cast<std::size_t>(j)].offset + at,
                  src, bytes);
    }
    if (!buffers.in_place) copy_bytes(own_dst, src, bytes);
  }
  exchange(h, h.next_gen(), status, statuses, "direct write: end of writing");
  const std::uint64_t worst = *std::max_element(statuses.begin(), statuses.end());
  if (worst == counts_differ)
    throw Error(MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts (direct write)" +
                                      (why.empty() ? std::string(" on another rank") : ": " + why));
  if (worst == cannot_map) return false;  // the usual path rewrites every block
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
