// The node stage: staged copy-in/copy-out through the segment, and single copy
// (node_stage.hpp has the steps and the diagram).

#include "hier/node_stage.hpp"

#include <agx/error.hpp>

#include "core/copy.hpp"
#include "hier/wait.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace agx::hier {
namespace {

const std::byte* own_source(const StagedCall& c, int rank) {
  if (c.buffers->in_place) return static_cast<const std::byte*>(c.buffers->recv) + c.layout->offset(rank);
  return static_cast<const std::byte*>(c.buffers->send);
}

std::byte* recv_at(const Buffers& b, const Layout& l, int rank) {
  return static_cast<std::byte*>(b.recv) + l.offset(rank);
}

// Copies blocks `ranks` (communicator ranks, increasing) from the segment to the
// receive buffer, merging neighbours that are adjacent on both sides into one memcpy
// (blocks as pieces: each block into its pieces, except block `own`, which they hold).
template <class Ranks>
void copy_runs(const StagedCall& c, const Ranks& ranks, int own = -1) {
  if (c.pieces != nullptr) {
    for (int r : ranks)
      if (r != own)
        scatter_pieces(pieces_of(*c.pieces, r), 0, c.base + (*c.seg_offset)[static_cast<std::size_t>(r)],
                       c.layout->bytes(r));
    return;
  }
  const std::byte* src = nullptr;
  std::byte* dst = nullptr;
  std::size_t run = 0;
  for (int r : ranks) {
    const std::size_t bytes = c.layout->bytes(r);
    if (bytes == 0) continue;
    const std::byte* s = c.base + (*c.seg_offset)[static_cast<std::size_t>(r)];
    std::byte* d = recv_at(*c.buffers, *c.layout, r);
    if (run > 0 && s == src + run && d == dst + run) {
      run += bytes;
      continue;
    }
    if (run > 0) copy_bytes(dst, src, run);
    src = s;
    dst = d;
    run = bytes;
  }
  if (run > 0) copy_bytes(dst, src, run);
}

std::string progress_text(std::uint64_t v) {
  return "call " + std::to_string(v >> 32) + ", chunk " + std::to_string(v & 0xffffffffu);
}

/// What a reader expects of block `block` in call `gen`: its size, and its place in
/// the segment (any_offset: not in the segment, single copy).
struct Expected {
  std::uint64_t gen = 0;
  int block = 0;
  std::size_t bytes = 0;
  std::uint64_t offset = 0;
};
constexpr std::uint64_t any_offset = ~std::uint64_t{0};

/// MPI_ERR_TRUNCATE when local rank j wrote its block of call `e.gen` with another size
/// or at another place than this rank expects (the ranks gave different counts). Read
/// after j's progress flag showed `e.gen`: j wrote both before that flag.
void check_block(const HierContext& h, int j, const Expected& e) {
  const Slot& s = h.slot(j);
  const std::uint64_t bytes = s.block_bytes[e.gen & 1].load(std::memory_order_relaxed);
  const std::uint64_t offset = s.block_offset[e.gen & 1].load(std::memory_order_relaxed);
  if (bytes == e.bytes && (e.offset == any_offset || offset == e.offset)) return;
  throw Error(MPI_ERR_TRUNCATE,
              "agx: the ranks disagree on the counts: block " + std::to_string(e.block) +
                  " holds " + std::to_string(e.bytes) + " bytes here, its owner " +
                  h.local_name(j) + " wrote " + std::to_string(bytes) +
                  (bytes == e.bytes ? " bytes at another place (earlier blocks differ)"
                                    : " bytes"));
}

// Waits until local rank j's progress flag reaches `mark` (its copy-in of block
// e.block), checking its block against `e` as soon as the flag shows the call. The
// report names the value the last check saw.
void wait_progress(const HierContext& h, int j, std::uint64_t mark, const char* stage,
                   const Expected& e) {
  const Slot& s = h.slot(j);
  std::uint64_t seen = 0;
  bool checked = false;
  wait_advancing(
      h,
      [&] {
        seen = s.progress.load(std::memory_order_acquire);
        if (!checked && (seen >> 32) >= e.gen) {
          check_block(h, j, e);
          checked = true;
        }
        return seen >= mark;
      },
      [&](double seconds) {
        h.stalled(stage, "the progress flag of " + h.local_name(j) + " to reach " +
                             progress_text(mark) + " of its copy of block " +
                             std::to_string(e.block) + " (it reads " + progress_text(seen) + ")",
                  seconds);
      });
}

Expected expected_in_segment(const StagedCall& c, int rank) {
  return {c.gen, rank, c.layout->bytes(rank), (*c.seg_offset)[static_cast<std::size_t>(rank)]};
}

}  // namespace

namespace {

// Calls f(piece address, offset into the range, bytes) for the part of each piece that
// bytes [at, at + len) of the block (its pieces back to back) cover.
template <class F>
void walk_pieces(std::span<const Segment> pieces, std::size_t at, std::size_t len, F f) {
  std::size_t done = 0;
  for (const Segment& p : pieces) {
    if (done == len) return;
    if (at >= p.bytes) {
      at -= p.bytes;
      continue;
    }
    const std::size_t take = std::min(len - done, p.bytes - at);
    f(p.ptr + at, done, take);
    done += take;
    at = 0;
  }
}

}  // namespace

void gather_pieces(std::byte* dst, std::span<const Segment> pieces, std::size_t at, std::size_t len) {
  walk_pieces(pieces, at, len, [&](std::byte* piece, std::size_t off, std::size_t n) {
    copy_bytes(dst + off, piece, n);
  });
}

void scatter_pieces(std::span<const Segment> pieces, std::size_t at, const std::byte* src,
                    std::size_t len) {
  walk_pieces(pieces, at, len, [&](std::byte* piece, std::size_t off, std::size_t n) {
    copy_bytes(piece, src + off, n);
  });
}

void copy_in(HierContext& h, const StagedCall& c) {
  const int me = h.topo.rank;
  const std::size_t bytes = c.layout->bytes(me);
  Slot& slot = h.own_slot();
  const std::byte* src = c.pieces != nullptr ? nullptr : own_source(c, me);
  std::byte* dst = c.base + (*c.seg_offset)[static_cast<std::size_t>(me)];
  const std::size_t chunks = chunk_count(bytes, c.chunk_bytes);
  slot.block_bytes[c.gen & 1].store(bytes, std::memory_order_relaxed);  // before any mark
  slot.block_offset[c.gen & 1].store((*c.seg_offset)[static_cast<std::size_t>(me)],
                                     std::memory_order_relaxed);
  if (chunks == 0) {
    slot.progress.store(progress_mark(c.gen, 0), std::memory_order_release);
    h.notify();
  }
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t at = k * c.chunk_bytes, len = std::min(c.chunk_bytes, bytes - at);
    if (c.pieces != nullptr) gather_pieces(dst + at, pieces_of(*c.pieces, me), at, len);
    else copy_bytes(dst + at, src + at, len);
    slot.progress.store(progress_mark(c.gen, k + 1), std::memory_order_release);
    h.notify();
  }
}

void wait_node_complete(HierContext& h, const StagedCall& c, const char* stage) {
  const auto& members = h.topo.members[static_cast<std::size_t>(h.topo.node)];
  for (std::size_t i = 0; i < members.size(); ++i)
    wait_progress(h, static_cast<int>(i),
                  progress_mark(c.gen, chunk_count(c.layout->bytes(members[i]), c.chunk_bytes)),
                  stage, expected_in_segment(c, members[i]));
}

void copy_out_local(HierContext& h, const StagedCall& c) {
  const auto& members = h.topo.members[static_cast<std::size_t>(h.topo.node)];
  const int n = static_cast<int>(members.size());
  // Blocks up to 16 KiB: wait for all, then as few memcpy calls as possible. Larger
  // blocks go chunk by chunk, even when one chunk holds them (measured: one 128 KiB
  // memcpy after waiting for all was 2x slower than two overlapped 64 KiB ones).
  constexpr std::size_t merge_limit = 16 * 1024;
  bool small = true;
  for (int r : members) small = small && c.layout->bytes(r) <= std::min(merge_limit, c.chunk_bytes);
  if (small) {
    wait_node_complete(h, c, "copy-out inside the node");
    copy_runs(c, members, h.topo.rank);
    h.mark_started(c.gen - 1);  // every local rank has started this call
    return;
  }
  // Large: chunk by chunk, starting with the next rank so that readers spread out.
  for (int k = 1; k <= n; ++k) {
    const int j = (h.topo.local + k) % n;
    const int r = members[static_cast<std::size_t>(j)];
    const std::size_t bytes = c.layout->bytes(r);
    std::byte* dst = c.pieces != nullptr ? nullptr : recv_at(*c.buffers, *c.layout, r);
    if (j == h.topo.local) {  // (blocks as pieces: in place)
      if (!c.buffers->in_place && bytes > 0) copy_bytes(dst, c.buffers->send, bytes);
      continue;
    }
    const std::byte* src = c.base + (*c.seg_offset)[static_cast<std::size_t>(r)];
    for (std::size_t k2 = 0, chunks = chunk_count(bytes, c.chunk_bytes); k2 < chunks; ++k2) {
      const std::size_t at = k2 * c.chunk_bytes, len = std::min(c.chunk_bytes, bytes - at);
      wait_progress(h, j, progress_mark(c.gen, k2 + 1), "copy-out inside the node",
                    expected_in_segment(c, r));
      if (c.pieces != nullptr) scatter_pieces(pieces_of(*c.pieces, r), at, src + at, len);
      else copy_bytes(dst + at, src + at, len);
    }
    if (bytes == 0)
      wait_progress(h, j, progress_mark(c.gen, 0), "copy-out inside the node",
                    expected_in_segment(c, r));
  }
  h.mark_started(c.gen - 1);  // every local rank has started this call
}

void inline_exchange(HierContext& h, std::uint64_t gen, const Buffers& buffers, const Layout& layout,
                     const BlockPieces* pieces) {
  const Topology& t = h.topo;
  const int me = t.rank, n = t.local_size();
  const auto& members = t.members[static_cast<std::size_t>(t.node)];
  const std::size_t parity = gen & 1;
  InlineBlock& mine = h.own_slot().inline_data[parity];
  if (const std::size_t bytes = layout.bytes(me); bytes > 0 && pieces != nullptr) {
    gather_pieces(mine.bytes, pieces_of(*pieces, me), 0, bytes);  // (in place)
  } else if (bytes > 0) {
    std::byte* own_dst = recv_at(buffers, layout, me);
    copy_bytes(mine.bytes, buffers.in_place ? own_dst : buffers.send, bytes);
    if (!buffers.in_place) copy_bytes(own_dst, buffers.send, bytes);
  }
  constexpr unsigned bits = InlineBlock::size_bits;
  mine.seq.store(gen << bits | layout.bytes(me), std::memory_order_release);
  h.notify();
  for (int k = 1; k < n; ++k) {
    const int j = (t.local + k) % n;
    const int r = members[static_cast<std::size_t>(j)];
    const InlineBlock& b = h.slot(j).inline_data[parity];
    std::uint64_t seen = 0;
    wait_advancing(h, [&] { return ((seen = b.seq.load(std::memory_order_acquire)) >> bits) >= gen; },
               [&](double seconds) {
                 h.stalled("inline exchange (blocks in the flag lines)",
                           "the inline block flag of " + h.local_name(j) + " to reach call " +
                               std::to_string(gen) + " (it reads call " +
                               std::to_string(seen >> bits) + "), block " + std::to_string(r),
                           seconds);
               });
    const std::size_t bytes = layout.bytes(r);
    if (const std::size_t wrote = seen & ((1u << bits) - 1); wrote != bytes)
      throw Error(MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: block " +
                                        std::to_string(r) + " holds " + std::to_string(bytes) +
                                        " bytes here, its owner " + h.local_name(j) + " wrote " +
                                        std::to_string(wrote) + " bytes");
    if (bytes > 0 && pieces != nullptr) scatter_pieces(pieces_of(*pieces, r), 0, b.bytes, bytes);
    else if (bytes > 0) copy_bytes(recv_at(buffers, layout, r), b.bytes, bytes);
  }
  h.mark_started(gen - 1);  // every local rank has started this call
  h.finish_call(gen);
}

void single_copy(HierContext& h, std::uint64_t gen, const Buffers& buffers, const Layout& layout) {
  const Topology& t = h.topo;
  const int me = t.rank, n = t.local_size();
  const auto& members = t.members[static_cast<std::size_t>(t.node)];
  Slot& own = h.own_slot();
  std::byte* own_dst = recv_at(buffers, layout, me);
  const void* own_src = buffers.in_place ? own_dst : buffers.send;
  own.address.store(reinterpret_cast<std::uintptr_t>(own_src), std::memory_order_relaxed);
  own.block_bytes[gen & 1].store(layout.bytes(me), std::memory_order_relaxed);
  own.progress.store(progress_mark(gen, 1), std::memory_order_release);
  h.notify();
  if (!buffers.in_place && layout.bytes(me) > 0) copy_bytes(own_dst, buffers.send, layout.bytes(me));
  for (int k = 1; k < n; ++k) {
    const int j = (t.local + k) % n;
    const int r = members[static_cast<std::size_t>(j)];
    std::size_t left = layout.bytes(r);
    if (left == 0) continue;
    const Slot& s = h.slot(j);
    wait_progress(h, j, progress_mark(gen, 1), "single copy: block address",
                  Expected{gen, r, layout.bytes(r), any_offset});
    auto* src = reinterpret_cast<std::byte*>(s.address.load(std::memory_order_relaxed));
    std::byte* dst = recv_at(buffers, layout, r);
    while (left > 0) {
      iovec local{dst, left}, remote{src, left};
      const ssize_t got = process_vm_readv(static_cast<pid_t>(s.pid), &local, 1, &remote, 1, 0);
      if (got <= 0)
        throw Error(MPI_ERR_OTHER, "agx: process_vm_readv from local rank " + std::to_string(j) +
                                       " failed: " + std::strerror(errno));
      dst += got;
      src += got;
      left -= static_cast<std::size_t>(got);
    }
  }
  h.finish_call(gen);
  for (int j = 0; j < n; ++j) {
    const Slot& s = h.slot(j);
    wait_advancing(h, [&] { return s.done.load(std::memory_order_acquire) >= gen; },
               [&](double seconds) {
                 h.stalled("single copy: end of reading",
                           "the done flag of " + h.local_name(j) + " to reach call " +
                               std::to_string(gen) + " (it reads call " +
                               std::to_string(s.done.load()) + ")",
                           seconds);
               });
  }
  h.mark_synced(gen);
}

}  // namespace agx::hier
