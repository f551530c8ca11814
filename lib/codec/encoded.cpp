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

#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/error.hpp>

#include "codec/codec.hpp"
#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/crc32c.hpp"
#include "core/select.hpp"
#include "cuda/memory.hpp"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace agx {

namespace {

using codec::Form;
using codec::Packer;
using codec::Spec;

constexpr std::size_t header_bytes = 24;
constexpr std::byte magic{0xA6};

/// Bytes per second a compressor must beat the link by (docs/fused.md): a conservative
/// single-core compression speed of each packer, or AGX_COMPRESS_BYTES_PER_S.
double packer_speed(Packer p) {
  if (const char* s = std::getenv("AGX_COMPRESS_BYTES_PER_S"); s != nullptr && *s != '\0') {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0))
      throw Error(MPI_ERR_ARG, std::string("agx: AGX_COMPRESS_BYTES_PER_S='") + s +
                                   "' is not a positive number");
    return v;
  }
  return p == Packer::lz4 ? 500e6 : 250e6;
}

/// The rule of docs/fused.md: compress only where the slowest link the call crosses is
/// slower than the compressor. On one node the link is memory: never.
bool link_slower_than(MPI_Comm comm, Packer p) {
  const Selector& s = context(comm).selector();
  if (s.placement().nodes() <= 1) return false;
  const double beta = s.tuning().params.network.beta_s_per_byte;
  return beta > 0 && 1.0 / beta < packer_speed(p);
}

/// The packer this call uses (the same on every rank: it depends on the options, the
/// block size, the build and the agreed tuning), none for no compression.
Packer choose_packer(MPI_Comm comm, const EncodeOptions& e, std::size_t block_bytes) {
  switch (e.lossless) {
    case Lossless::off: return Packer::none;
    case Lossless::lz4:
    case Lossless::zstd: {
      const Packer p = e.lossless == Lossless::lz4 ? Packer::lz4 : Packer::zstd;
      if (!codec::packer_available(p))
        throw Error(MPI_ERR_ARG, std::string("agx: ") + (p == Packer::lz4 ? "LZ4" : "Zstandard") +
                                     " compression was asked for, but this libagx was built "
                                     "without it (built: " + codecs_built() + ")");
      return block_bytes >= e.min_bytes ? p : Packer::none;
    }
    case Lossless::automatic: {
      const Packer p = codec::packer_available(Packer::lz4)    ? Packer::lz4
                       : codec::packer_available(Packer::zstd) ? Packer::zstd
                                                               : Packer::none;
      if (p == Packer::none || block_bytes < e.min_bytes) return Packer::none;
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
                              Packer packer) {
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
  if (packer != Packer::none && codec::pack(packer, form_bytes, form_size, packed)) {
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
  const char* s = std::getenv("AGX_TEST_CORRUPT_BLOCK");
  if (s == nullptr || *s == '\0') return;
  const std::string v(s);
  const auto colon = v.find(':');
  const std::string kind = colon == std::string::npos ? "" : v.substr(colon + 1);
  if (colon == std::string::npos || (kind != "flip" && kind != "lie" && kind != "truncate" &&
                                     kind != "huge"))
    throw Error(MPI_ERR_ARG, "agx: AGX_TEST_CORRUPT_BLOCK='" + v +
                                 "' is not <rank>:<flip|lie|truncate|huge>");
  if (std::atoi(v.substr(0, colon).c_str()) != rank) return;
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
void check_agreement(MPI_Comm comm, const Spec& spec, const EncodeOptions& e, const Options& o) {
  struct Key {
    std::uint64_t count, elem, min_bytes, value;
    std::uint32_t kind, sparse, lossless, lossy;
  };
  const Key mine{spec.count, spec.elem, e.min_bytes, std::bit_cast<std::uint64_t>(e.lossy.value),
                 static_cast<std::uint32_t>(spec.kind), e.sparse ? 1u : 0u,
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

EncodedResult encoded_allgather_bytes(MPI_Comm comm, const void* send, void* recv,
                                      std::size_t count, std::size_t elem_bytes,
                                      ElementKind kind, const EncodeOptions& encode,
                                      const Options& options) {
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  int n = 0, rank = 0;
  if (MPI_Comm_size(comm, &n) != MPI_SUCCESS || MPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    throw Error(MPI_ERR_COMM, "agx: invalid communicator");
  if (elem_bytes == 0) throw Error(MPI_ERR_ARG, "agx: element size 0");
  const Spec spec{count, elem_bytes, kind};
  if (count > std::numeric_limits<std::size_t>::max() / elem_bytes / static_cast<std::size_t>(n) / 2)
    throw Error(MPI_ERR_COUNT, "agx: " + std::to_string(count) + " elements overflow the byte size");
  if (recv == nullptr && spec.bytes() > 0) throw Error(MPI_ERR_BUFFER, "agx: receive buffer is null");
  if (cuda::is_device_memory(recv) || cuda::is_device_memory(send))
    throw Error(MPI_ERR_BUFFER, "agx: the encoded all-gather takes host buffers, not device memory");
  check_encode_options(encode, kind);
  if (config().check) check_agreement(comm, spec, encode, options);
  const Packer packer = choose_packer(comm, encode, spec.bytes());
  const bool in_place = send == nullptr;
  auto* out = static_cast<std::byte*>(recv);
  EncodedResult r;
  r.plain_bytes = spec.bytes() * static_cast<std::size_t>(n);
  if (!encode.sparse && encode.lossy.mode == Lossy::Mode::off && packer == Packer::none) {
    r.algorithm = allgather_bytes(comm, {send, recv, in_place}, Layout::uniform(n, spec.bytes()), options);
    r.wire_bytes = r.plain_bytes;
    return r;
  }
  r.encoded = true;
  const std::byte* mine = in_place ? out + spec.bytes() * static_cast<std::size_t>(rank)
                                   : static_cast<const std::byte*>(send);
  std::vector<std::byte> enc = encode_block(mine, spec, encode, packer);
  std::uint64_t announced = enc.size();
  apply_seam(rank, enc, announced);
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(n));
  allgather_bytes(comm, {&announced, sizes.data(), false}, Layout::uniform(n, 8), options);
  const std::size_t limit = header_bytes + spec.max_payload();
  std::vector<std::size_t> bytes(static_cast<std::size_t>(n)), offsets(static_cast<std::size_t>(n));
  std::size_t total = 0;
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (sizes[u] < header_bytes || sizes[u] > limit)
      corrupt(i, "its announced size of " + std::to_string(sizes[u]) + " bytes is outside [" +
                     std::to_string(header_bytes) + ", " + std::to_string(limit) + "]");
    bytes[u] = static_cast<std::size_t>(sizes[u]);
    offsets[u] = total;
    total += bytes[u];
  }
  r.wire_bytes = total;
  std::vector<std::byte> arena(total);
  // The own block travels with what it announced (a truncating seam sends less).
  r.algorithm = allgather_bytes(comm, {enc.data(), arena.data(), false},
                                Layout::varying(bytes, offsets), options);
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    decode(i, arena.data() + offsets[u], bytes[u], spec, out + spec.bytes() * u);
  }
  return r;
}

}  // namespace agx
