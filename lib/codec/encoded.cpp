// The encoded all-gather (include/agx/encoded.hpp, docs/fused.md). Three steps, each
// a plain libagx call, so that whatever schedule runs relays the encoded blocks as
// opaque bytes:
//   1. every rank encodes its block once (header + payload, codec.hpp);
//   2. the encoded sizes are all-gathered (8 bytes per rank);
//   3. the encoded blocks are all-gathered as a v layout into a staging buffer,
//      and every rank decodes every block into the dense receive buffer.
// Header (24 bytes): magic 0xA6, form, packer, lossy mode; CRC32C of the whole encoded
// block (with these 4 bytes zero); u64 payload bytes before packing; u64 aux (non-zero
// count of a sparse form, or the lossy bound's bits).
//
// Test seam AGX_TEST_CORRUPT_BLOCK=<rank>:<flip|lie|truncate|huge> (docs/environment.md)
// damages that rank's encoded block after encoding, as a faulty link or encoder would.
// The steps are encoded_call.hpp's; the nonblocking form runs them from test()
// (encoded_start.cpp).

#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/error.hpp>

#include "codec/codec.hpp"
#include "codec/encoded_call.hpp"
#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/crc32c.hpp"
#include "core/select.hpp"
#include "cuda/memory.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace agx {

namespace {

using codec::Form;
using codec::Packer;
using codec::Spec;

constexpr std::size_t header_bytes = 24;
constexpr std::byte magic{0xA6};

/// The rule of docs/fused.md: compress only where the slowest link the call crosses is
/// slower than the compressor. On one node the link is memory: never.
bool link_slower_than(MPI_Comm comm, Packer p) {
  const Selector& s = context(comm).selector();
  if (s.placement().nodes() <= 1) return false;
  const double beta = s.tuning().params.network.beta_s_per_byte;
  return beta > 0 && 1.0 / beta < codec::agreed_pack_speed(comm, p);
}

/// The priced rule's terms for this rank's block under `automatic` (inactive for an
/// explicit packer). AGX_COMPRESS_BYTES_PER_S stands for both speeds; otherwise the
/// agreed packing speed and this process's measured unpacking speed (each block is
/// priced at its origin and its header says whether it was packed, so ranks need not
/// agree on it).
codec::PackPrice pack_price(MPI_Comm comm, const EncodeOptions& e, Packer p, int n) {
  codec::PackPrice price;
  if (e.lossless != Lossless::automatic || p == Packer::none) return price;
  const Selector& s = context(comm).selector();
  price.active = true;
  price.receivers = n - 1;
  price.link_s_per_byte = s.tuning().params.network.beta_s_per_byte;
  const double pack = codec::agreed_pack_speed(comm, p);
  const std::optional<double>& forced = config().compress_bytes_per_s;
  const double unpack = forced ? *forced : codec::local_unpack_speed(p);
  const double inf = std::numeric_limits<double>::infinity();
  price.pack_s_per_byte = pack > 0 ? 1.0 / pack : inf;
  price.unpack_s_per_byte = unpack > 0 ? 1.0 / unpack : inf;
  // The node's ranks over the cores their affinity masks cover together (the set-up
  // exchange's, as the node path's wait style uses them; 0 cores: unknown, no share).
  const hier::Topology& topo = hier::hier_context(context(comm)).topo;
  if (topo.node_cores > 0)
    price.share = std::max(1.0, static_cast<double>(topo.local_size()) / topo.node_cores);
  return price;
}

/// The packer of this call, before the per-block size threshold (the same on every
/// rank: it depends on the options, the build and the agreed tuning); none for no
/// compression. Collective on the communicator's first use (the tuning is agreed then),
/// so every rank asks, whatever its block's size.
Packer call_packer(MPI_Comm comm, const EncodeOptions& e) {
  switch (e.lossless) {
    case Lossless::off: return Packer::none;
    case Lossless::lz4:
    case Lossless::zstd: {
      const Packer p = e.lossless == Lossless::lz4 ? Packer::lz4 : Packer::zstd;
      if (!codec::packer_available(p))
        throw Error(MPI_ERR_ARG, std::string("agx: ") + (p == Packer::lz4 ? "LZ4" : "Zstandard") +
                                     " compression was asked for, but this libagx was built "
                                     "without it (built: " + codecs_built() + ")");
      return p;
    }
    case Lossless::automatic: {
      const Packer p = codec::packer_available(Packer::lz4)    ? Packer::lz4
                       : codec::packer_available(Packer::zstd) ? Packer::zstd
                                                               : Packer::none;
      if (p == Packer::none) return Packer::none;
      return link_slower_than(comm, p) ? p : Packer::none;
    }
  }
  return Packer::none;
}

void check_encode_options(const EncodeOptions& e, ElementKind kind) {
  if (e.lossy.mode == Lossy::Mode::off) return;
  if (kind == ElementKind::bytes)
    throw Error(MPI_ERR_ARG, "agx: lossy (ZFP) compression needs float or double elements");
  if (!codec::zfp_available())
    throw Error(MPI_ERR_ARG, "agx: lossy compression was asked for, but this libagx was built "
                             "without ZFP (built: " + codecs_built() + ")");
  const double v = e.lossy.value;
  const bool ok = e.lossy.mode == Lossy::Mode::accuracy ? std::isfinite(v) && v > 0
                                                         : v > 0 && v <= 64;
  if (!ok)
    throw Error(MPI_ERR_ARG, "agx: lossy " +
                                 std::string(e.lossy.mode == Lossy::Mode::accuracy
                                                 ? "error bound must be a positive finite number"
                                                 : "rate must be in (0, 64] bits per value") +
                                 ", got " + std::to_string(v));
}

struct Header {
  Form form = Form::dense;
  Packer packer = Packer::none;
  Lossy::Mode lossy = Lossy::Mode::off;
  std::uint64_t payload = 0;  // bytes before packing
  std::uint64_t aux = 0;
};

void write_header(std::byte* out, const Header& h) {
  out[0] = magic;
  out[1] = static_cast<std::byte>(h.form);
  out[2] = static_cast<std::byte>(h.packer);
  out[3] = static_cast<std::byte>(h.lossy);
  std::memset(out + 4, 0, 4);
  std::memcpy(out + 8, &h.payload, 8);
  std::memcpy(out + 16, &h.aux, 8);
}

void seal(std::vector<std::byte>& block) {
  std::memset(block.data() + 4, 0, 4);
  const std::uint32_t crc = crc32c(block.data(), block.size());
  std::memcpy(block.data() + 4, &crc, 4);
}

std::vector<std::byte> encode_block(const std::byte* data, const Spec& spec, const EncodeOptions& e,
                              Packer packer, const codec::PackPrice& price) {
  Header h;
  std::vector<std::byte> payload;
  // The form's bytes: `data` itself for the dense form (not copied before packing).
  const std::byte* form_bytes = data;
  std::size_t form_size = spec.bytes();
  if (e.lossy.mode != Lossy::Mode::off && codec::zfp_encode(data, spec, e.lossy, payload)) {
    h.form = Form::zfp;
    h.lossy = e.lossy.mode;
    h.aux = std::bit_cast<std::uint64_t>(e.lossy.value);
  } else if (e.sparse) {
    h.form = codec::encode_sparse(data, spec, payload, h.aux);
  }
  if (h.form != Form::dense || e.sparse) {
    form_bytes = payload.data();
    form_size = payload.size();
  }
  h.payload = form_size;
  std::vector<std::byte> packed;
  if (packer != Packer::none && codec::worth_packing(packer, form_bytes, form_size, price) &&
      codec::pack(packer, form_bytes, form_size, packed) &&
      price.pays(static_cast<double>(packed.size()) / static_cast<double>(form_size))) {
    h.packer = packer;
    form_bytes = packed.data();
    form_size = packed.size();
  }
  std::vector<std::byte> out(header_bytes + form_size);
  write_header(out.data(), h);
  if (form_size > 0) std::memcpy(out.data() + header_bytes, form_bytes, form_size);
  seal(out);
  return out;
}

[[noreturn]] void corrupt(int block, const std::string& why) {
  throw Error(MPI_ERR_OTHER, "agx: encoded block " + std::to_string(block) + " (from rank " +
                                 std::to_string(block) + ") is corrupt: " + why);
}

void decode(int block, const std::byte* in, std::size_t n, const Spec& spec, std::byte* out) {
  if (n < header_bytes)
    corrupt(block, std::to_string(n) + " bytes, shorter than its header");
  std::uint32_t crc = 0;
  std::memcpy(&crc, in + 4, 4);
  std::byte head[header_bytes];
  std::memcpy(head, in, header_bytes);
  std::memset(head + 4, 0, 4);
  const std::uint32_t got = crc32c(in + header_bytes, n - header_bytes, crc32c(head, header_bytes));
  if (got != crc) corrupt(block, "CRC32C mismatch (damaged or truncated in transit)");
  Header h;
  const auto form = static_cast<unsigned>(in[1]), packer = static_cast<unsigned>(in[2]),
             lossy = static_cast<unsigned>(in[3]);
  if (in[0] != magic || form > 3 || packer > 2 || lossy > 2)
    corrupt(block, "unknown header");
  h.form = static_cast<Form>(form);
  h.packer = static_cast<Packer>(packer);
  std::memcpy(&h.payload, in + 8, 8);
  std::memcpy(&h.aux, in + 16, 8);
  if (h.payload > spec.max_payload())
    corrupt(block, "payload of " + std::to_string(h.payload) + " bytes claimed, at most " +
                       std::to_string(spec.max_payload()));
  const std::byte* payload = in + header_bytes;
  const std::size_t wire = n - header_bytes;
  std::vector<std::byte> unpacked;
  std::string why;
  if (h.packer != Packer::none) {
    unpacked.resize(h.payload);
    if (!codec::unpack(h.packer, payload, wire, unpacked.data(), unpacked.size(), why))
      corrupt(block, why);
    payload = unpacked.data();
  } else if (wire != h.payload) {
    corrupt(block, std::to_string(wire) + " payload bytes, the header says " +
                       std::to_string(h.payload));
  }
  bool ok = false;
  if (h.form == Form::zfp) {
    const Lossy l{static_cast<Lossy::Mode>(lossy), std::bit_cast<double>(h.aux)};
    const bool bound_ok = l.mode == Lossy::Mode::accuracy ? std::isfinite(l.value) && l.value > 0
                          : l.mode == Lossy::Mode::rate   ? l.value > 0 && l.value <= 64
                                                          : false;
    if (!bound_ok) corrupt(block, "ZFP payload without a valid lossy mode and bound");
    ok = codec::zfp_decode(payload, static_cast<std::size_t>(h.payload), spec, l, out, why);
  } else {
    ok = codec::decode_sparse(h.form, payload, static_cast<std::size_t>(h.payload), h.aux, out,
                              spec, why);
  }
  if (!ok) corrupt(block, why);
}

/// AGX_TEST_CORRUPT_BLOCK on this rank: damages `enc` and the size it announces.
void apply_seam(int rank, std::vector<std::byte>& enc, std::uint64_t& announced) {
  check_config();  // an unreadable AGX_TEST_CORRUPT_BLOCK is MPI_ERR_ARG (core/settings.hpp)
  const std::optional<CorruptSeam>& seam = config().corrupt;
  if (!seam || seam->rank != rank) return;
  const std::string& kind = seam->kind;
  if (kind == "flip") enc.back() ^= std::byte{0x10};
  if (kind == "lie") {  // a consistent-looking block whose payload size lies
    std::uint64_t p = 0;
    std::memcpy(&p, enc.data() + 8, 8);
    ++p;
    std::memcpy(enc.data() + 8, &p, 8);
    seal(enc);
  }
  if (kind == "truncate") announced = enc.size() - 1;
  if (kind == "huge") announced = std::uint64_t{1} << 60;
}

/// AGX_CHECK: the options that must agree across ranks do.
void check_agreement(MPI_Comm comm, std::span<const std::size_t> block_bytes, std::size_t elem,
                     ElementKind kind, const EncodeOptions& e, const Options& o) {
  struct Key {
    std::uint64_t counts_crc, elem, min_bytes, value;
    std::uint32_t kind, sparse, lossless, lossy;
  };
  // Every block's size (not the offsets: they are each rank's own business, as in MPI).
  const std::uint32_t crc = crc32c(reinterpret_cast<const std::byte*>(block_bytes.data()),
                                   block_bytes.size_bytes());
  const Key mine{crc, elem, e.min_bytes, std::bit_cast<std::uint64_t>(e.lossy.value),
                 static_cast<std::uint32_t>(kind), e.sparse ? 1u : 0u,
                 static_cast<std::uint32_t>(e.lossless), static_cast<std::uint32_t>(e.lossy.mode)};
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<Key> all(static_cast<std::size_t>(n));
  allgather_bytes(comm, {&mine, all.data(), false}, Layout::uniform(n, sizeof(Key)), o);
  for (int i = 0; i < n; ++i)
    if (std::memcmp(&all[static_cast<std::size_t>(i)], &all[0], sizeof(Key)) != 0)
      throw Error(MPI_ERR_ARG, "agx: AGX_CHECK: rank " + std::to_string(i) +
                                   " calls the encoded all-gather with other counts or encode "
                                   "options than rank 0");
}

}  // namespace

namespace codec {

void uniform_blocks(MPI_Comm comm, std::size_t count, std::size_t elem_bytes,
                    std::vector<std::size_t>& bytes, std::vector<std::size_t>& offsets) {
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  int n = 0;
  if (MPI_Comm_size(comm, &n) != MPI_SUCCESS) throw Error(MPI_ERR_COMM, "agx: invalid communicator");
  if (elem_bytes == 0) throw Error(MPI_ERR_ARG, "agx: element size 0");
  if (count > std::numeric_limits<std::size_t>::max() / elem_bytes / static_cast<std::size_t>(n) / 2)
    throw Error(MPI_ERR_COUNT, "agx: " + std::to_string(count) + " elements overflow the byte size");
  const std::size_t block = count * elem_bytes;
  bytes.assign(static_cast<std::size_t>(n), block);
  offsets.clear();
  for (int i = 0; i < n; ++i) offsets.push_back(block * static_cast<std::size_t>(i));
}

Layout EncodedCall::plain_layout() const {
  return uniform ? Layout::uniform(n, block_bytes[0]) : Layout::varying(block_bytes, offsets);
}

bool packer_known_locally(MPI_Comm comm, const EncodeOptions& e) {
  if (e.lossless != Lossless::automatic) return true;
  const Packer p = codec::packer_available(Packer::lz4)    ? Packer::lz4
                   : codec::packer_available(Packer::zstd) ? Packer::zstd
                                                           : Packer::none;
  if (p == Packer::none) return true;
  const Selector& s = context(comm).selector();
  const double beta = s.tuning().params.network.beta_s_per_byte;
  return s.placement().nodes() <= 1 || beta <= 0 || pack_speed_known(comm, p);
}

EncodedCall prepare_call(MPI_Comm comm, const Buffers& buffers,
                         std::span<const std::size_t> block_bytes,
                         std::span<const std::size_t> offsets, std::size_t elem_bytes,
                         ElementKind kind, const EncodeOptions& encode, const Options& options,
                         bool plain_only) {
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  EncodedCall c;
  c.comm = comm;
  if (MPI_Comm_size(comm, &c.n) != MPI_SUCCESS || MPI_Comm_rank(comm, &c.rank) != MPI_SUCCESS)
    throw Error(MPI_ERR_COMM, "agx: invalid communicator");
  if (elem_bytes == 0) throw Error(MPI_ERR_ARG, "agx: element size 0");
  const auto un = static_cast<std::size_t>(c.n);
  if (block_bytes.size() != un || offsets.size() != un)
    throw Error(MPI_ERR_ARG, "agx: " + std::to_string(block_bytes.size()) + " block sizes and " +
                                 std::to_string(offsets.size()) + " offsets for " +
                                 std::to_string(c.n) + " ranks");
  std::size_t plain = 0, largest = 0;
  for (std::size_t i = 0; i < un; ++i) {
    if (block_bytes[i] % elem_bytes != 0)
      throw Error(MPI_ERR_ARG, "agx: block " + std::to_string(i) + " of " +
                                   std::to_string(block_bytes[i]) + " bytes is not a whole number "
                                   "of " + std::to_string(elem_bytes) + "-byte elements");
    std::size_t end = 0;
    if (__builtin_add_overflow(offsets[i], block_bytes[i], &end) ||
        __builtin_add_overflow(plain, block_bytes[i], &plain) ||
        end > std::numeric_limits<std::size_t>::max() / 4)
      throw Error(MPI_ERR_COUNT, "agx: the encoded all-gather's blocks overflow the byte size");
    largest = std::max(largest, block_bytes[i]);
  }
  if (buffers.recv == nullptr && plain > 0) throw Error(MPI_ERR_BUFFER, "agx: receive buffer is null");
  if (cuda::is_device_memory(buffers.recv) || cuda::is_device_memory(buffers.send))
    throw Error(MPI_ERR_BUFFER, "agx: the encoded all-gather takes host buffers, not device memory");
  check_encode_options(encode, kind);
  if (config().check && !plain_only) check_agreement(comm, block_bytes, elem_bytes, kind, encode, options);
  const Packer call = plain_only ? Packer::none : call_packer(comm, encode);
  c.buffers = buffers;
  c.block_bytes.assign(block_bytes.begin(), block_bytes.end());
  c.offsets.assign(offsets.begin(), offsets.end());
  c.elem_bytes = elem_bytes;
  c.kind = kind;
  c.result.plain_bytes = plain;
  // The plain call when no block can be encoded (the same on every rank: the sizes are
  // known everywhere).
  if (plain_only || (!encode.sparse && encode.lossy.mode == Lossy::Mode::off &&
                     (call == Packer::none || largest < encode.min_bytes))) {
    c.plain = true;
    c.uniform = true;  // a regular call stays one (the selection tells them apart)
    for (std::size_t u = 0; u < un; ++u)
      c.uniform = c.uniform && block_bytes[u] == block_bytes[0] && offsets[u] == block_bytes[0] * u;
    c.result.wire_bytes = plain;
    return c;
  }
  c.result.encoded = true;
  const auto me = static_cast<std::size_t>(c.rank);
  const Spec own{block_bytes[me] / elem_bytes, elem_bytes, kind};
  const std::byte* mine = buffers.in_place ? static_cast<const std::byte*>(buffers.recv) + offsets[me]
                                           : static_cast<const std::byte*>(buffers.send);
  const Packer packer = own.bytes() >= encode.min_bytes ? call : Packer::none;
  c.own = encode_block(mine, own, encode, packer, pack_price(comm, encode, packer, c.n));
  c.announced = c.own.size();
  apply_seam(c.rank, c.own, c.announced);
  return c;
}

std::size_t encoded_layout(const EncodedCall& c, std::span<const std::uint64_t> sizes,
                           std::vector<std::size_t>& bytes, std::vector<std::size_t>& at) {
  const auto un = static_cast<std::size_t>(c.n);
  bytes.assign(un, 0);
  at.assign(un, 0);
  std::size_t total = 0;
  for (std::size_t u = 0; u < un; ++u) {
    const Spec spec{c.block_bytes[u] / c.elem_bytes, c.elem_bytes, c.kind};
    const std::size_t limit = header_bytes + spec.max_payload();
    if (sizes[u] < header_bytes || sizes[u] > limit)
      corrupt(static_cast<int>(u), "its announced size of " + std::to_string(sizes[u]) +
                                       " bytes is outside [" + std::to_string(header_bytes) +
                                       ", " + std::to_string(limit) + "]");
    bytes[u] = static_cast<std::size_t>(sizes[u]);
    at[u] = total;
    total += bytes[u];
  }
  return total;
}

bool nothing_gained(const EncodedCall& c, std::span<const std::uint64_t> sizes) {
  if (c.result.plain_bytes == 0 || config().corrupt) return false;
  for (std::size_t u = 0; u < static_cast<std::size_t>(c.n); ++u)
    if (sizes[u] != header_bytes + c.block_bytes[u]) return false;
  return true;
}

void decode_all(const EncodedCall& c, const std::byte* arena, std::span<const std::size_t> bytes,
                std::span<const std::size_t> at) {
  auto* out = static_cast<std::byte*>(c.buffers.recv);
  for (std::size_t u = 0; u < static_cast<std::size_t>(c.n); ++u) {
    const Spec spec{c.block_bytes[u] / c.elem_bytes, c.elem_bytes, c.kind};
    decode(static_cast<int>(u), arena + at[u], bytes[u], spec, out + c.offsets[u]);
  }
}

}  // namespace codec

EncodedResult encoded_allgatherv_bytes(MPI_Comm comm, const Buffers& buffers,
                                       std::span<const std::size_t> block_bytes,
                                       std::span<const std::size_t> offsets,
                                       std::size_t elem_bytes, ElementKind kind,
                                       const EncodeOptions& encode, const Options& options) {
  const codec::EncodedCall c =
      codec::prepare_call(comm, buffers, block_bytes, offsets, elem_bytes, kind, encode, options);
  EncodedResult r = c.result;
  if (c.plain) {
    r.algorithm = allgather_bytes(comm, buffers, c.plain_layout(), options);
    return r;
  }
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(c.n));
  allgather_bytes(comm, {&c.announced, sizes.data(), false}, Layout::uniform(c.n, 8), options);
  std::vector<std::size_t> bytes, at;
  r.wire_bytes = codec::encoded_layout(c, sizes, bytes, at);
  if (codec::nothing_gained(c, sizes)) {  // every block dense and unpacked: the plain call
    r.encoded = false;
    r.wire_bytes = r.plain_bytes;
    r.algorithm = allgather_bytes(comm, buffers, c.plain_layout(), options);
    return r;
  }
  std::vector<std::byte> arena(r.wire_bytes);
  // The own block travels with what it announced (a truncating seam sends less).
  r.algorithm = allgather_bytes(comm, {c.own.data(), arena.data(), false},
                                Layout::varying(bytes, at), options);
  codec::decode_all(c, arena.data(), bytes, at);
  return r;
}

EncodedResult encoded_allgather_bytes(MPI_Comm comm, const void* send, void* recv,
                                      std::size_t count, std::size_t elem_bytes,
                                      ElementKind kind, const EncodeOptions& encode,
                                      const Options& options) {
  std::vector<std::size_t> bytes, offsets;
  codec::uniform_blocks(comm, count, elem_bytes, bytes, offsets);
  return encoded_allgatherv_bytes(comm, {send, recv, send == nullptr}, bytes, offsets, elem_bytes,
                                  kind, encode, options);
}

}  // namespace agx
