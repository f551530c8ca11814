// The flag-line and single-copy NodeSegments (node_copies.hpp has the copies).

#include "hier/node_copies.hpp"

#include <agx/error.hpp>

#include "core/copy.hpp"
#include "hier/block_pieces.hpp"
#include "hier/wait.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace agx::hier {
namespace {

constexpr unsigned bits = InlineBlock::size_bits;
constexpr std::uint64_t size_mask = (std::uint64_t{1} << bits) - 1;

const std::byte* own_source(const Buffers& b, const Layout& l, int rank) {
  if (b.in_place) return static_cast<const std::byte*>(b.recv) + l.offset(rank);
  return static_cast<const std::byte*>(b.send);
}

std::byte* recv_at(const Buffers& b, const Layout& l, int rank) {
  return static_cast<std::byte*>(b.recv) + l.offset(rank);
}

// A one-node schedule puts only the rank's own block (the validator proves it).
void own_only(const NodeOp& op, int me, const char* copies) {
  if (op.blocks.size() == 1 && op.blocks[0].first == me && op.blocks[0].count == 1) return;
  for (const BlockSpan& span : op.blocks)
    if (span.count > 0 && (span.first != me || span.count != 1))
      throw Error(MPI_ERR_INTERN, std::string("agx: ") + copies +
                                      " put another rank's block (a schedule for several nodes?)");
}

constexpr unsigned value_bits = 40;
constexpr std::uint64_t value_mask = (std::uint64_t{1} << value_bits) - 1;
constexpr std::uint64_t gen_mask = (std::uint64_t{1} << (64 - value_bits)) - 1;

std::uint64_t tagged(std::uint64_t gen, std::uint64_t value) {
  return (gen & gen_mask) << value_bits | (value & value_mask);
}

}  // namespace

void publish_block(Slot& own, std::uint64_t gen, std::size_t bytes, std::uint64_t offset) {
  own.block_bytes[gen & 1].store(tagged(gen, bytes), std::memory_order_relaxed);
  own.block_offset[gen & 1].store(tagged(gen, offset), std::memory_order_relaxed);
}

void publish_no_block(Slot& own, std::uint64_t gen) {
  own.block_bytes[gen & 1].store(tagged(gen, value_mask), std::memory_order_relaxed);
  own.block_offset[gen & 1].store(tagged(gen, value_mask), std::memory_order_relaxed);
}

std::exception_ptr block_disagreement(const HierContext& h, int j, std::uint64_t gen, int block,
                                      std::size_t bytes, std::uint64_t offset) {
  const Slot& s = h.slot(j);
  const std::uint64_t size_word = s.block_bytes[gen & 1].load(std::memory_order_relaxed);
  const std::uint64_t place_word = s.block_offset[gen & 1].load(std::memory_order_relaxed);
  const bool size_ok = size_word >> value_bits != (gen & gen_mask) || size_word == tagged(gen, bytes);
  const bool place_ok = place_word >> value_bits != (gen & gen_mask) || place_word == tagged(gen, offset);
  if (size_ok && place_ok) return nullptr;
  const std::uint64_t wrote = size_word & value_mask;
  if (wrote == value_mask)
    return std::make_exception_ptr(another_path(h, j, gen, block));
  return std::make_exception_ptr(Error(MPI_ERR_TRUNCATE,
              "agx: the ranks disagree on the counts: block " + std::to_string(block) +
                  " holds " + std::to_string(bytes) + " bytes here, its owner " +
                  h.local_name(j) + " wrote " + std::to_string(wrote) +
                  (wrote == bytes ? " bytes at another place (earlier blocks differ)" : " bytes")));
}

bool other_path(const HierContext& h, int j, std::uint64_t gen) {
  return h.slot(j).inline_data[gen & 1].seq.load(std::memory_order_acquire) >> bits == gen;
}

Error another_path(const HierContext& h, int j, std::uint64_t gen, int block) {
  return Error(MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: " + h.local_name(j) +
                                     ", the owner of block " + std::to_string(block) +
                                     ", took another shared-memory path for call " +
                                     std::to_string(gen) + " (its counts give it another)");
}

int waiting_block(const NodeOp& op, const GetCursor& c) {
  std::size_t index = 0;
  for (const BlockSpan& span : op.blocks) {
    if (c.block < index + static_cast<std::size_t>(span.count))
      return span.first + static_cast<int>(c.block - index);
    index += static_cast<std::size_t>(span.count);
  }
  return -1;
}

// --- flag lines -----------------------------------------------------------------------

namespace {

// The own block `bytes` (from `src`, or gathered from `pieces` where not null) into the
// own flag line of call `gen`, then the sequence word that shows it.
void put_line(HierContext& h, std::uint64_t gen, const std::byte* src, const BlockPieces* pieces,
              std::size_t bytes) {
  InlineBlock& own = h.own_slot().inline_data[gen & 1];
  if (bytes > InlineBlock::capacity)
    throw Error(MPI_ERR_INTERN, "agx: a block of " + std::to_string(bytes) +
                                    " bytes does not fit a flag line");
  if (bytes > 0 && pieces != nullptr) gather_pieces(own.bytes, pieces_of(*pieces, h.topo.rank), 0, bytes);
  else if (bytes > 0) copy_bytes(own.bytes, src, bytes);
  own.seq.store(gen << bits | bytes, std::memory_order_release);
  h.notify();
}

// Where local rank j's line of call `gen` stands: the sequence word, once it shows the
// call (true), or once `misses` polls found that j put its block another way (its counts
// give it another path: true too, the word still below the call). Looks at j's progress
// flag only after `patience` polls: that line is the owner's busiest, and a look costs a
// cache miss the usual call does not pay. (Read in this order: a flag-line write of this
// call comes before any later call's progress.)
bool line_settled(const HierContext& h, int j, std::uint64_t gen, int& misses, std::uint64_t& seen) {
  const InlineBlock& line = h.slot(j).inline_data[gen & 1];
  seen = line.seq.load(std::memory_order_acquire);
  if ((seen >> bits) >= gen) return true;
  if (++misses < patience || h.slot(j).progress.load(std::memory_order_acquire) < progress_mark(gen, 0))
    return false;
  seen = line.seq.load(std::memory_order_acquire);
  return true;
}

// The block of local rank j in its settled line (`seen`) into `dst` (or scattered into
// `pieces` where not null): null, or the disagreement on the counts (nothing copied).
// (The usual case, the line of this call with the expected size into a range, is
// copied by InlineCopies::try_get itself.)
std::exception_ptr get_line(const HierContext& h, int j, std::uint64_t gen, std::uint64_t seen,
                            int block, std::size_t bytes, std::byte* dst, const BlockPieces* pieces) {
  if ((seen >> bits) < gen) return std::make_exception_ptr(another_path(h, j, gen, block));
  if (const std::size_t wrote = seen & size_mask; wrote != bytes)
    return std::make_exception_ptr(Error(
        MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: block " + std::to_string(block) +
                              " holds " + std::to_string(bytes) + " bytes here, its owner " +
                              h.local_name(j) + " wrote " + std::to_string(wrote) + " bytes"));
  const InlineBlock& line = h.slot(j).inline_data[gen & 1];
  if (bytes > 0 && pieces != nullptr) scatter_pieces(pieces_of(*pieces, block), 0, line.bytes, bytes);
  else if (bytes > 0) copy_bytes(dst, line.bytes, bytes);
  return nullptr;
}

}  // namespace

bool OneNodeCopies::unpaired(const char* what) {
  throw Error(MPI_ERR_INTERN, std::string("agx: the flag-line and single copies raise a block's flag as they "
                                          "copy it and check it as they get it: a ") +
                                  what + " of its own is not theirs");
}

void InlineCopies::put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) {
  need_signal(signal);
  const int me = h_.topo.rank;
  own_only(op, me, "the flag-line copies");
  put_line(h_, gen_, pieces_ != nullptr ? nullptr : own_source(mine, layout, me), pieces_,
           layout.bytes(me));
}

bool InlineCopies::try_get(const NodeOp& op, GetCursor& c, const Buffers& mine,
                           const Layout& layout) {
  return for_blocks(op, c, [&](int b, std::size_t&) {
    const int j = h_.topo.local_of[static_cast<std::size_t>(b)];
    std::uint64_t seen = 0;
    if (!line_settled(h_, j, gen_, misses_, seen))
      return awaiting(h_.slot(j).inline_data[gen_ & 1].seq, seen);
    const std::size_t bytes = layout.bytes(b);
    if (pieces_ == nullptr && (seen >> bits) >= gen_ && (seen & size_mask) == bytes) {
      if (bytes > 0) copy_bytes(recv_at(mine, layout, b), h_.slot(j).inline_data[gen_ & 1].bytes, bytes);
    } else if (std::exception_ptr e = get_line(h_, j, gen_, seen, b, bytes,
                                               pieces_ != nullptr ? nullptr : recv_at(mine, layout, b), pieces_)) {
      return disagree(std::move(e));
    }
    step();
    return true;
  });
}

void InlineCopies::finish() {
  // Every local rank has started this call, so none reads the other parity's lines any
  // more: the next call may write them.
  h_.mark_started(gen_ - 1);
  h_.finish_call(gen_);
}

std::string InlineCopies::waiting_for(const NodeOp& op, const GetCursor& c) const {
  const int b = waiting_block(op, c);
  if (b < 0) return "";
  const int j = h_.topo.local_of[static_cast<std::size_t>(b)];
  const std::uint64_t seen = h_.slot(j).inline_data[gen_ & 1].seq.load();
  return "block " + std::to_string(b) + " in the flag line of " + h_.local_name(j) +
         " (call " + std::to_string(gen_) + "; the line reads call " +
         std::to_string(seen >> bits) + ")";
}

// --- single copy ----------------------------------------------------------------------

void SingleCopies::put(const NodeOp&, const Buffers&, const Layout&, bool) {
  unpaired("put into the segment");
}

bool SingleCopies::try_get(const NodeOp&, GetCursor&, const Buffers&, const Layout&) {
  return unpaired("get from the segment");
}

void SingleCopies::expose(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) {
  need_signal(signal);
  const int me = h_.topo.rank;
  own_only(op, me, "single copy");
  Slot& own = h_.own_slot();
  own.address.store(reinterpret_cast<std::uintptr_t>(own_source(mine, layout, me)),
                    std::memory_order_relaxed);
  publish_block(own, gen_, layout.bytes(me), single_copy_place);
  own.progress.store(progress_mark(gen_, 1), std::memory_order_release);
  h_.notify();
}

bool SingleCopies::try_read(const NodeOp& op, GetCursor& c, const Buffers& mine,
                            const Layout& layout) {
  const bool all = for_blocks(op, c, [&](int b, std::size_t&) {
    std::size_t left = layout.bytes(b);
    if (left == 0) return true;
    const int j = h_.topo.local_of[static_cast<std::size_t>(b)];
    const Slot& s = h_.slot(j);
    const std::uint64_t v = s.progress.load(std::memory_order_acquire);
    if (v < progress_mark(gen_, 0)) {
      if (++misses_ >= patience && other_path(h_, j, gen_))
        return disagree(std::make_exception_ptr(another_path(h_, j, gen_, b)));
      return awaiting(s.progress, v);
    }
    // (a staged owner published its place in the segment: another path)
    if (std::exception_ptr e = block_disagreement(h_, j, gen_, b, left, single_copy_place))
      return disagree(std::move(e));
    if (v < progress_mark(gen_, 1)) return awaiting(s.progress, v);
    auto* src = reinterpret_cast<std::byte*>(s.address.load(std::memory_order_relaxed));
    std::byte* dst = recv_at(mine, layout, b);
    while (left > 0) {
      iovec local{dst, left}, remote{src, left};
      const ssize_t got = process_vm_readv(static_cast<pid_t>(s.pid), &local, 1, &remote, 1, 0);
      if (got <= 0)
        throw Error(MPI_ERR_OTHER, "agx: process_vm_readv from " + h_.local_name(j) +
                                       " failed: " + std::strerror(errno));
      dst += got;
      src += got;
      left -= static_cast<std::size_t>(got);
    }
    step();
    return true;
  });
  if (all) done_reading();  // (the owners' releases wait for it)
  return all;
}

void SingleCopies::done_reading() {
  if (done_ > 0) return;
  done_ = 1;
  h_.finish_call(gen_);  // this rank's done flag shows the call
}

bool SingleCopies::try_release(const NodeOp&) {
  // This rank's buffer is read by its peers: it stays the call's until all are done
  // (their done flags rise when their reads are over, this rank's own included).
  const int n = h_.topo.local_size();
  for (; readers_done_ < n; ++readers_done_, step())
    if (const std::uint64_t v = h_.slot(readers_done_).done.load(std::memory_order_acquire); v < gen_)
      return awaiting(h_.slot(readers_done_).done, v);
  h_.mark_synced(gen_);
  return true;
}

void SingleCopies::finish() { done_reading(); }

std::string SingleCopies::waiting_for(const NodeOp& op, const GetCursor& c) const {
  if (op.kind == NodeOp::Kind::release) return release_waiting_for();
  const int b = waiting_block(op, c);
  if (b < 0) return "";
  const int j = h_.topo.local_of[static_cast<std::size_t>(b)];
  const std::uint64_t v = h_.slot(j).progress.load();
  return "the address of block " + std::to_string(b) + " from " + h_.local_name(j) +
         " (single copy, call " + std::to_string(gen_) + "; its flag reads call " +
         std::to_string(v >> 32) + ")";
}

std::string SingleCopies::release_waiting_for() const {
  const int j = readers_done_;
  if (j >= h_.topo.local_size()) return "";
  return "the done flag of " + h_.local_name(j) + " to reach call " + std::to_string(gen_) +
         " (single copy: it reads this rank's buffer; its flag reads call " +
         std::to_string(h_.slot(j).done.load()) + ")";
}

}  // namespace agx::hier
