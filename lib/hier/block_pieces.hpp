#pragma once
// Blocks made of pieces, and the chunk marks of the node's progress flags.
//
// A fused call (lib/fused) runs in place with block i made of its pieces in the members'
// receive buffers (core/message.hpp's BlockPieces). On a node path a put gathers the own
// block's pieces straight into the segment (or its flag line) and a get scatters each
// block from there straight into its pieces, chunk by chunk (node_call.cpp,
// node_copies.hpp). No range of the caller's buffer is read or written then (the own
// pieces hold the own block). Single copy and direct write (direct_write.hpp) publish
// one range per rank and so do not serve such calls: hier_allgather.cpp stages them
// instead, on every rank alike.

#include <agx/bytes.hpp>

#include "core/message.hpp"

#include <cstdint>
#include <span>

namespace agx::hier {

/// The pieces of block `b`: segments[begin[b] .. begin[b+1]).
inline std::span<const Segment> pieces_of(const BlockPieces& p, int b) {
  const auto u = static_cast<std::size_t>(b);
  return {p.segments.data() + p.begin[u], p.begin[u + 1] - p.begin[u]};
}

/// Copies bytes [at, at + len) of a block made of `pieces` to `dst`.
void gather_pieces(std::byte* dst, std::span<const Segment> pieces, std::size_t at, std::size_t len);
/// Copies `len` bytes from `src` to bytes [at, at + len) of a block made of `pieces`.
void scatter_pieces(std::span<const Segment> pieces, std::size_t at, const std::byte* src,
                    std::size_t len);

/// A progress flag's value: call `gen`, `chunks` chunks of the block copied in.
inline std::uint64_t progress_mark(std::uint64_t gen, std::size_t chunks) {
  return (gen << 32) | static_cast<std::uint64_t>(chunks);
}

inline std::size_t chunk_count(std::size_t bytes, std::size_t chunk) {
  return (bytes + chunk - 1) / chunk;
}

}  // namespace agx::hier
