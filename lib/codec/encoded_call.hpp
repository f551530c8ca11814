#pragma once
// The steps of one encoded all-gather (encoded.cpp), shared by the blocking call and its
// nonblocking form (encoded_start.cpp): the checks and the decision taken before any
// data moves, the own block's encoding, the check of the announced sizes and the decode.

#include <mpi.h>

#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/options.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace agx::codec {

/// One call, checked, with what it will do. `plain`: no block can be encoded (the same
/// on every rank): the call runs as the plain all-gather of `plain_layout()`.
struct EncodedCall {
  MPI_Comm comm = MPI_COMM_NULL;
  int n = 0, rank = 0;
  Buffers buffers;
  std::vector<std::size_t> block_bytes, offsets;
  std::size_t elem_bytes = 1;
  ElementKind kind = ElementKind::bytes;
  EncodedResult result;  ///< plain_bytes and encoded filled in
  bool plain = false;
  bool uniform = false;  ///< plain: every block the same size, back to back
  // Not plain: the own block encoded (header + payload) and the size it announces (the
  // test seam AGX_TEST_CORRUPT_BLOCK may have damaged both).
  std::vector<std::byte> own;
  std::uint64_t announced = 0;

  /// The layout of the plain call (uniform where it is one).
  Layout plain_layout() const;
};

/// The blocks of a regular call: `count` elements of `elem_bytes` per rank of `comm`,
/// back to back (MPI_ERR_COUNT where the bytes overflow).
void uniform_blocks(MPI_Comm comm, std::size_t count, std::size_t elem_bytes,
                    std::vector<std::size_t>& bytes, std::vector<std::size_t>& offsets);

/// Checks the call (the blocking call's checks, in its order; AGX_CHECK's agreement is
/// a blocking all-gather, and the packer of `automatic` may agree on the compressor's
/// speed: see packer_known_locally), decides plain or encoded and, encoded, encodes the
/// own block. `plain_only`: the checks without AGX_CHECK's agreement, then the plain call
/// (nothing collective: a start on a communicator agx has not set up).
EncodedCall prepare_call(MPI_Comm comm, const Buffers& buffers,
                         std::span<const std::size_t> block_bytes,
                         std::span<const std::size_t> offsets, std::size_t elem_bytes,
                         ElementKind kind, const EncodeOptions& encode, const Options& options,
                         bool plain_only = false);

/// Whether the packer of a call with `encode` on `comm` is decided without any
/// communication: off, lz4 and zstd always; automatic on one node, or where the
/// compressor's speed is already agreed on `comm` (a blocking call measured it), given
/// by AGX_COMPRESS_BYTES_PER_S or by the tuning file. The same on every rank.
bool packer_known_locally(MPI_Comm comm, const EncodeOptions& encode);

/// Checks the announced sizes of every block (a size outside [header, header + the
/// block's largest payload] is corrupt, raised naming the block) and lays the encoded
/// blocks out back to back: `bytes` and `at` receive the data phase's layout; returns
/// its total.
std::size_t encoded_layout(const EncodedCall& call, std::span<const std::uint64_t> sizes,
                           std::vector<std::size_t>& bytes, std::vector<std::size_t>& at);

/// Whether the announced sizes say that no block gained anything (each is its dense
/// bytes plus the header: not sparse, not packed, not lossy), while some block has bytes:
/// then the data phase is the plain all-gather of the user's buffers (no staging, no
/// decode; the same on every rank, as the sizes are). Never under AGX_TEST_CORRUPT_BLOCK,
/// whose damage must stay visible.
bool nothing_gained(const EncodedCall& call, std::span<const std::uint64_t> sizes);

/// Decodes every block of `arena` (laid out by encoded_layout) into the receive buffer.
/// Throws agx::Error (MPI_ERR_OTHER) naming the first corrupt block.
void decode_all(const EncodedCall& call, const std::byte* arena,
                std::span<const std::size_t> bytes, std::span<const std::size_t> at);

}  // namespace agx::codec
