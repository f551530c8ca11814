// The optional codecs (codec.hpp): LZ4 and Zstandard for lossless packing, ZFP for the
// opt-in lossy mode. Each is compiled in when Meson found it (AGX_HAVE_LZ4/ZSTD/ZFP).

#include "codec/codec.hpp"

#include <cmath>
#include <cstring>

#if AGX_HAVE_LZ4
#include <lz4.h>
#endif
#if AGX_HAVE_ZSTD
#include <zstd.h>
#endif
#if AGX_HAVE_ZFP
#include <zfp.h>
#endif

namespace agx {

std::string codecs_built() {
  std::string s = "sparse";
#if AGX_HAVE_LZ4
  s += " lz4";
#endif
#if AGX_HAVE_ZSTD
  s += " zstd";
#endif
#if AGX_HAVE_ZFP
  s += " zfp";
#endif
  return s;
}

bool lossless_available(Lossless l) {
  switch (l) {
    case Lossless::off: return true;
    case Lossless::lz4: return codec::packer_available(codec::Packer::lz4);
    case Lossless::zstd: return codec::packer_available(codec::Packer::zstd);
    case Lossless::automatic:
      return codec::packer_available(codec::Packer::lz4) ||
             codec::packer_available(codec::Packer::zstd);
  }
  return false;
}

namespace codec {

bool packer_available(Packer p) {
#if AGX_HAVE_LZ4
  if (p == Packer::lz4) return true;
#endif
#if AGX_HAVE_ZSTD
  if (p == Packer::zstd) return true;
#endif
  return p == Packer::none;
}

bool pack(Packer p, const std::byte* in, std::size_t n, std::vector<std::byte>& out) {
  (void)in;
#if AGX_HAVE_LZ4
  if (p == Packer::lz4 && n <= static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)) {
    out.resize(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(n))));
    const int got = LZ4_compress_default(reinterpret_cast<const char*>(in),
                                         reinterpret_cast<char*>(out.data()), static_cast<int>(n),
                                         static_cast<int>(out.size()));
    if (got <= 0 || static_cast<std::size_t>(got) >= n) return false;
    out.resize(static_cast<std::size_t>(got));
    return true;
  }
#endif
#if AGX_HAVE_ZSTD
  if (p == Packer::zstd) {
    out.resize(ZSTD_compressBound(n));
    const std::size_t got = ZSTD_compress(out.data(), out.size(), in, n, 1);
    if (ZSTD_isError(got) || got >= n) return false;
    out.resize(got);
    return true;
  }
#endif
  (void)p;
  (void)n;
  (void)out;
  return false;
}

bool worth_packing(Packer p, const std::byte* in, std::size_t n, const PackPrice& price) {
  constexpr std::size_t slices = 8, slice = 8192, from = std::size_t{1} << 20;
  if (p == Packer::none || n < from) return p != Packer::none;
  std::vector<std::byte> out;
  std::size_t packed = 0;
  for (std::size_t k = 0; k < slices; ++k) {
    const std::byte* at = in + (n - slice) / (slices - 1) * k;
    packed += pack(p, at, slice, out) ? out.size() : slice;
  }
  return packed < slices * slice - slices * slice / 32 &&
         price.pays(static_cast<double>(packed) / static_cast<double>(slices * slice));
}

bool unpack(Packer p, const std::byte* in, std::size_t n, std::byte* out, std::size_t out_bytes,
            std::string& why) {
  (void)in;
  (void)n;
  (void)out;
  (void)out_bytes;
#if AGX_HAVE_LZ4
  if (p == Packer::lz4) {
    if (n > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE) ||
        out_bytes > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)) {
      why = "LZ4 block too large";
      return false;
    }
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in),
                                        reinterpret_cast<char*>(out), static_cast<int>(n),
                                        static_cast<int>(out_bytes));
    if (got < 0 || static_cast<std::size_t>(got) != out_bytes) {
      why = "LZ4 data is corrupt or decodes to " + std::to_string(got) + " bytes, not " +
            std::to_string(out_bytes);
      return false;
    }
    return true;
  }
#endif
#if AGX_HAVE_ZSTD
  if (p == Packer::zstd) {
    const std::size_t got = ZSTD_decompress(out, out_bytes, in, n);
    if (ZSTD_isError(got) || got != out_bytes) {
      why = std::string("Zstandard data: ") +
            (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong decoded size");
      return false;
    }
    return true;
  }
#endif
  why = "packed with a compressor (" + std::to_string(static_cast<int>(p)) +
        ") this libagx was built without";
  return false;
}

bool zfp_available() {
#if AGX_HAVE_ZFP
  return true;
#else
  return false;
#endif
}

#if AGX_HAVE_ZFP
namespace {

/// A ZFP stream in the mode of `lossy` over a 1-D field at `data`; closes on exit.
struct ZfpCall {
  zfp_type type;
  zfp_field* field = nullptr;
  zfp_stream* stream = nullptr;
  bitstream* bits = nullptr;

  ZfpCall(void* data, const Spec& spec, const Lossy& lossy)
      : type(spec.kind == ElementKind::float32 ? zfp_type_float : zfp_type_double) {
    field = zfp_field_1d(data, type, spec.count);
    stream = zfp_stream_open(nullptr);
    if (lossy.mode == Lossy::Mode::accuracy) zfp_stream_set_accuracy(stream, lossy.value);
    else zfp_stream_set_rate(stream, lossy.value, type, 1, zfp_false);
  }
  std::size_t max_bytes() const { return zfp_stream_maximum_size(stream, field); }
  void attach(std::byte* buf, std::size_t bytes) {
    bits = stream_open(buf, bytes);
    zfp_stream_set_bit_stream(stream, bits);
    zfp_stream_rewind(stream);
  }
  ~ZfpCall() {
    if (bits != nullptr) stream_close(bits);
    zfp_stream_close(stream);
    zfp_field_free(field);
  }
  ZfpCall(const ZfpCall&) = delete;
  ZfpCall& operator=(const ZfpCall&) = delete;
};

}  // namespace
#endif

bool zfp_encode(const std::byte* block, const Spec& spec, const Lossy& lossy,
                std::vector<std::byte>& out) {
#if AGX_HAVE_ZFP
  if (spec.count == 0 || spec.kind == ElementKind::bytes) return false;
  for (std::size_t i = 0; i < spec.count; ++i) {  // ZFP's bound needs finite values
    double v = 0;
    if (spec.kind == ElementKind::float32) {
      float f = 0;
      std::memcpy(&f, block + i * 4, 4);
      v = f;
    } else {
      std::memcpy(&v, block + i * 8, 8);
    }
    if (!std::isfinite(v)) return false;
  }
  ZfpCall z(const_cast<std::byte*>(block), spec, lossy);
  out.assign(z.max_bytes(), std::byte{0});
  z.attach(out.data(), out.size());
  const std::size_t got = zfp_compress(z.stream, z.field);
  if (got == 0 || got >= spec.bytes()) return false;
  out.resize(got);
  return true;
#else
  (void)block, (void)spec, (void)lossy, (void)out;
  return false;
#endif
}

bool zfp_decode(const std::byte* in, std::size_t n, const Spec& spec, const Lossy& lossy,
                std::byte* out, std::string& why) {
#if AGX_HAVE_ZFP
  if (spec.count == 0 || spec.kind == ElementKind::bytes) {
    why = "ZFP payload for a block that is not float or double";
    return false;
  }
  ZfpCall z(out, spec, lossy);
  const std::size_t max = z.max_bytes();
  if (n > max) {
    why = "ZFP payload of " + std::to_string(n) + " bytes, at most " + std::to_string(max);
    return false;
  }
  std::vector<std::byte> padded(max, std::byte{0});  // ZFP reads whole words: never past it
  std::memcpy(padded.data(), in, n);
  z.attach(padded.data(), padded.size());
  if (zfp_decompress(z.stream, z.field) == 0) {
    why = "ZFP data does not decode";
    return false;
  }
  return true;
#else
  (void)in, (void)n, (void)spec, (void)lossy, (void)out;
  why = "ZFP payload, but this libagx was built without ZFP";
  return false;
#endif
}

}  // namespace codec
}  // namespace agx
