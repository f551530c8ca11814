#pragma once
// Block encodings of the encoded all-gather (include/agx/encoded.hpp, docs/fused.md).
// Each function works on one block; none calls MPI. Decoders never write outside the
// block they are given and report inconsistent input through `why` (false return).

#include <mpi.h>

#include <agx/encoded.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace agx::codec {

/// One rank's block: `count` elements of `elem` bytes.
struct Spec {
  std::size_t count = 0;
  std::size_t elem = 1;
  ElementKind kind = ElementKind::bytes;
  std::size_t bytes() const { return count * elem; }
  /// Bytes of one position in the positions form: 4 while count fits 32 bits, else 8.
  std::size_t position_bytes() const { return count <= UINT32_MAX ? 4 : 8; }
  /// The largest payload any form of this block may have (a decoder's bound).
  std::size_t max_payload() const;
};

/// How a block's elements are written (before optional lossless packing).
enum class Form : std::uint8_t { dense = 0, positions = 1, bitmap = 2, zfp = 3 };
/// Lossless packing of a form's payload.
enum class Packer : std::uint8_t { none = 0, lz4 = 1, zstd = 2 };

// sparse.cpp
/// Writes the smallest of dense, positions + values and bitmap + values into `out`
/// (replacing its content); `nnz` receives the count of non-zero elements.
Form encode_sparse(const std::byte* block, const Spec& spec, std::vector<std::byte>& out,
                   std::uint64_t& nnz);
/// Decodes a dense, positions or bitmap payload of `in_bytes` into out (spec.bytes()).
bool decode_sparse(Form form, const std::byte* in, std::size_t in_bytes, std::uint64_t nnz,
                   std::byte* out, const Spec& spec, std::string& why);

// codecs.cpp
bool packer_available(Packer p);
/// Packs `n` bytes into `out`; false when not built in or when it does not shrink.
bool pack(Packer p, const std::byte* in, std::size_t n, std::vector<std::byte>& out);
/// What compressing a block saves and costs under `automatic` (docs/fused.md, "the
/// priced rule"): every other rank receives the block once, so packing saves
/// (1 - ratio) * receivers * link seconds per byte and costs pack + receivers * unpack
/// seconds per byte, times `share` (ranks on this node per core: compressors that share
/// a core run that much slower). Inactive (explicit LZ4 or Zstandard): only the sample.
struct PackPrice {
  bool active = false;
  int receivers = 0;
  double link_s_per_byte = 0, pack_s_per_byte = 0, unpack_s_per_byte = 0, share = 1;
  /// Whether a block that packs to `ratio` of its bytes gains.
  bool pays(double ratio) const {
    return !active || (1.0 - ratio) * receivers * link_s_per_byte >
                          share * (pack_s_per_byte + receivers * unpack_s_per_byte);
  }
};
/// Whether compressing `n` bytes at `in` can pay: blocks of at least 1 MiB are sampled
/// first (8 slices of 8 KiB spread over the block, each compressed alone), and a block
/// whose sample shrinks by less than 1/32, or by less than `price` asks, is not
/// compressed at all (no failed attempt over the whole block). Smaller blocks: true
/// (the attempt is cheap; encode_block prices the packed size afterwards).
bool worth_packing(Packer p, const std::byte* in, std::size_t n, const PackPrice& price);
/// Unpacks into exactly `out_bytes` bytes at out.
bool unpack(Packer p, const std::byte* in, std::size_t n, std::byte* out, std::size_t out_bytes,
            std::string& why);
bool zfp_available();

// speed.cpp
/// This process's measured compression speed of `p` in bytes per second (measured once,
/// lazily, about a millisecond); 0 for a packer not built in.
double local_pack_speed(Packer p);
/// This process's measured decompression speed of `p` (the same sample, measured with
/// local_pack_speed); 0 for a packer not built in.
double local_unpack_speed(Packer p);
/// The speed the rule uses on `comm`: AGX_COMPRESS_BYTES_PER_S if set, else the slowest
/// rank's local_pack_speed (collective on the first call per communicator and packer).
double agreed_pack_speed(MPI_Comm comm, Packer p);
/// Whether agreed_pack_speed(comm, p) answers without communication: set, tuned, or
/// agreed on `comm` already (local; the same on every rank, as the agreement is collective).
bool pack_speed_known(MPI_Comm comm, Packer p);
/// ZFP of a float/double block in the mode of `lossy`; false when not built in, the block
/// holds non-finite values, or it does not shrink.
bool zfp_encode(const std::byte* block, const Spec& spec, const Lossy& lossy,
                std::vector<std::byte>& out);
bool zfp_decode(const std::byte* in, std::size_t n, const Spec& spec, const Lossy& lossy,
                std::byte* out, std::string& why);

}  // namespace agx::codec
