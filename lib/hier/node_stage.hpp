#pragma once
// The node stage: ranks of one node exchange blocks through their shared segment, or
// read each other's buffers directly (single copy).
//
// Staged (copy in, copy out), 4 ranks on a node, blocks A B C D:
//
//   copy in      rank i copies its block into the segment chunk by chunk and
//                publishes slot[i].progress = (gen << 32) | chunks after each chunk
//                    segment: [ A | B | C | D ]
//   copy out     rank i copies every other block out of the segment into its receive
//                buffer, each chunk once its producer's progress covers it; copy-out of
//                chunk k overlaps copy-in of chunk k+1 on the producer
//   done         slot[i].done = gen (lets a later call reuse this region)
//
//   bytes per rank: M in + (N-1)·M out (out of place the own block comes from send)
//   synchronization: one flag store per chunk, no MPI call
//
// Single copy (process_vm_readv), 4 ranks:
//   rank i publishes its block's address, then reads B_j straight from rank j's own
//   buffer into its receive buffer; done = gen; waits until every rank is done
//   (its own buffer must stay valid until all peers have read it).
//   bytes per rank: (N-1)·M read once; two flag rounds per call.
//
// Blocks as pieces (a fused call, lib/fused: block i is the list of its pieces in the
// members' receive buffers, core/message.hpp's BlockPieces): the staged copy-in gathers
// the own block's pieces straight into the segment and the copy-out scatters each block
// from the segment straight into its pieces; the inline exchange likewise gathers into
// and scatters from the flag lines. No range of the caller's buffer is read or written
// then (the call is in place: the own pieces hold the own block). Single copy and direct
// write (direct_write.hpp) publish one range per rank and so do not serve such calls:
// hier_allgather.cpp runs the staged stage instead, on every rank alike.

#include <agx/bytes.hpp>

#include "core/message.hpp"
#include "hier/hier_context.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace agx::hier {

/// One staged call as the node stage sees it.
struct StagedCall {
  std::uint64_t gen = 0;
  const Buffers* buffers = nullptr;
  const Layout* layout = nullptr;
  std::byte* base = nullptr;                         ///< segment region of this call
  const std::vector<std::size_t>* seg_offset = nullptr;  ///< per communicator rank
  std::size_t chunk_bytes = 0;
  const BlockPieces* pieces = nullptr;  ///< not null: blocks are these pieces (in place)
};

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

inline std::uint64_t progress_mark(std::uint64_t gen, std::size_t chunks) {
  return (gen << 32) | static_cast<std::uint64_t>(chunks);
}

inline std::size_t chunk_count(std::size_t bytes, std::size_t chunk) {
  return (bytes + chunk - 1) / chunk;
}

/// Copies the own block into the segment, publishing progress per chunk.
void copy_in(HierContext& h, const StagedCall& c);
/// Waits until every rank of the node has copied its whole block in (`stage` names the
/// wait in an AGX_TIMEOUT report).
void wait_node_complete(HierContext& h, const StagedCall& c, const char* stage);
/// Copies the blocks of the own node out of the segment into the receive buffer.
void copy_out_local(HierContext& h, const StagedCall& c);

/// Tiny blocks inside one node: each block travels in its owner's flag line.
void inline_exchange(HierContext& h, std::uint64_t gen, const Buffers& buffers, const Layout& layout,
                     const BlockPieces* pieces = nullptr);

/// The single-copy all-gather inside one node (all ranks on the node).
void single_copy(HierContext& h, std::uint64_t gen, const Buffers& buffers, const Layout& layout);

}  // namespace agx::hier
