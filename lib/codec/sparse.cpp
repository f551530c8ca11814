// The sparse forms of a block (codec.hpp). An element is zero when all its bytes are
// zero, so -0.0, NaN payloads and any bit pattern survive exactly.
//   dense      the block's bytes
//   positions  nnz positions (4 or 8 bytes each, ascending), then the nnz values
//   bitmap     ceil(count / 8) bytes, bit i (LSB first) set for a non-zero element i,
//              then the nnz values in element order

#include "codec/codec.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace agx::codec {

namespace {

bool is_zero(const std::byte* e, std::size_t elem) {
  for (std::size_t k = 0; k < elem; ++k)
    if (e[k] != std::byte{0}) return false;
  return true;
}

std::size_t bitmap_bytes(std::size_t count) { return (count + 7) / 8; }

}  // namespace

std::size_t Spec::max_payload() const {
  return std::max(bytes(), std::max(count * (position_bytes() + elem), bitmap_bytes(count) + bytes()));
}

Form encode_sparse(const std::byte* block, const Spec& spec, std::vector<std::byte>& out,
                   std::uint64_t& nnz) {
  nnz = 0;
  for (std::size_t i = 0; i < spec.count; ++i)
    if (!is_zero(block + i * spec.elem, spec.elem)) ++nnz;
  const std::size_t values = nnz * spec.elem;
  const std::size_t pw = spec.position_bytes();
  const std::size_t dense = spec.bytes(), positions = nnz * pw + values,
                    bitmap = bitmap_bytes(spec.count) + values;
  out.clear();
  if (dense <= positions && dense <= bitmap) {
    out.assign(block, block + dense);
    return Form::dense;
  }
  if (positions < bitmap) {
    out.resize(positions);
    std::byte* pos = out.data();
    std::byte* val = out.data() + nnz * pw;
    for (std::size_t i = 0; i < spec.count; ++i) {
      const std::byte* e = block + i * spec.elem;
      if (is_zero(e, spec.elem)) continue;
      if (pw == 4) {
        const auto p = static_cast<std::uint32_t>(i);
        std::memcpy(pos, &p, 4);
      } else {
        const auto p = static_cast<std::uint64_t>(i);
        std::memcpy(pos, &p, 8);
      }
      pos += pw;
      std::memcpy(val, e, spec.elem);
      val += spec.elem;
    }
    return Form::positions;
  }
  out.assign(bitmap, std::byte{0});
  std::byte* val = out.data() + bitmap_bytes(spec.count);
  for (std::size_t i = 0; i < spec.count; ++i) {
    const std::byte* e = block + i * spec.elem;
    if (is_zero(e, spec.elem)) continue;
    out[i / 8] |= std::byte{static_cast<unsigned char>(1u << (i % 8))};
    std::memcpy(val, e, spec.elem);
    val += spec.elem;
  }
  return Form::bitmap;
}

bool decode_sparse(Form form, const std::byte* in, std::size_t in_bytes, std::uint64_t nnz,
                   std::byte* out, const Spec& spec, std::string& why) {
  if (form == Form::dense) {
    if (in_bytes != spec.bytes()) {
      why = "dense payload of " + std::to_string(in_bytes) + " bytes for a block of " +
            std::to_string(spec.bytes());
      return false;
    }
    if (in_bytes > 0) std::memcpy(out, in, in_bytes);
    return true;
  }
  if (nnz > spec.count) {
    why = std::to_string(nnz) + " non-zero elements claimed in a block of " + std::to_string(spec.count);
    return false;
  }
  const std::size_t values = static_cast<std::size_t>(nnz) * spec.elem;
  const std::size_t pw = spec.position_bytes();
  const std::size_t index_bytes = form == Form::positions ? static_cast<std::size_t>(nnz) * pw
                                                          : bitmap_bytes(spec.count);
  if (in_bytes != index_bytes + values) {
    why = "payload of " + std::to_string(in_bytes) + " bytes, its " + std::to_string(nnz) +
          " non-zero elements need " + std::to_string(index_bytes + values);
    return false;
  }
  if (spec.bytes() > 0) std::memset(out, 0, spec.bytes());
  const std::byte* val = in + index_bytes;
  if (form == Form::positions) {
    std::uint64_t last = 0;
    for (std::size_t j = 0; j < nnz; ++j) {
      std::uint64_t p = 0;
      if (pw == 4) {
        std::uint32_t p32 = 0;
        std::memcpy(&p32, in + j * 4, 4);
        p = p32;
      } else {
        std::memcpy(&p, in + j * 8, 8);
      }
      if (p >= spec.count || (j > 0 && p <= last)) {
        why = "position " + std::to_string(p) + " (entry " + std::to_string(j) +
              ") is out of order or past the block's " + std::to_string(spec.count) + " elements";
        return false;
      }
      last = p;
      std::memcpy(out + p * spec.elem, val + j * spec.elem, spec.elem);
    }
    return true;
  }
  std::uint64_t set = 0;
  for (std::size_t b = 0; b < index_bytes; ++b)
    set += static_cast<std::uint64_t>(std::popcount(static_cast<unsigned>(in[b])));
  const unsigned tail = static_cast<unsigned>(spec.count % 8);
  const bool tail_clear = tail == 0 || index_bytes == 0 ||
                          (static_cast<unsigned>(in[index_bytes - 1]) >> tail) == 0;
  if (set != nnz || !tail_clear) {
    why = "bitmap has " + std::to_string(set) + " bits set" +
          (tail_clear ? std::string() : std::string(" (some past the block's end)")) + ", " +
          std::to_string(nnz) + " claimed";
    return false;
  }
  std::size_t j = 0;
  for (std::size_t i = 0; i < spec.count; ++i)
    if ((static_cast<unsigned>(in[i / 8]) >> (i % 8)) & 1u)
      std::memcpy(out + i * spec.elem, val + (j++) * spec.elem, spec.elem);
  return true;
}

}  // namespace agx::codec
