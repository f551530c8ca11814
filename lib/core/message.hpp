#pragma once
// From block indices to bytes on the wire: the memory segments of a transfer and
// their split into MPI messages of at most max_bytes each. Sender and receiver compute
// the same split from the same layout, so pieces match one to one.

#include <agx/bytes.hpp>

#include "core/schedule.hpp"

#include <cstddef>
#include <vector>

namespace agx {

struct Segment {
  std::byte* ptr = nullptr;
  std::size_t bytes = 0;
};

/// A transfer cut into messages: pieces[i] is segments[piece_begin[i] .. piece_begin[i+1]).
struct MessagePlan {
  std::vector<Segment> segments;
  std::vector<std::size_t> piece_begin;  // one entry per piece, plus the end
  std::size_t pieces() const { return piece_begin.empty() ? 0 : piece_begin.size() - 1; }
};

/// Blocks made of several memory pieces (a fused call's block spread over its members'
/// buffers, lib/fused): block b is segments[begin[b] .. begin[b+1]). When a transfer is
/// planned over such blocks they replace block_address and the layout's sizes.
struct BlockPieces {
  std::vector<Segment> segments;
  std::vector<std::size_t> begin;  // one entry per block, plus the end
};

/// Where block b of the call lives: the receive buffer, except the own block of an
/// out-of-place call, which is read from the send buffer.
std::byte* block_address(int block, int rank, const Buffers& buffers, const Layout& layout);

/// Fills `out` with the transfer's memory, adjacent segments merged, zero bytes
/// dropped, cut into pieces of at most max_bytes. No piece is empty. With `blocks`, each
/// block's memory is its pieces there (in order) instead of its range of the layout.
void plan_message(const Transfer& t, int rank, const Buffers& buffers, const Layout& layout,
                  std::size_t max_bytes, MessagePlan& out, const BlockPieces* blocks = nullptr);

}  // namespace agx
