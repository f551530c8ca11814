// lib/codec's sparse forms without MPI: every form round-trips bit for bit (NaN
// payloads, -0.0), the smallest form is chosen, and damaged payloads — every single
// byte flipped, every truncation — are either refused with a reason or decode inside
// the block: never a write past it.

#include "codec/codec.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using agx::codec::Form;
using agx::codec::Spec;

namespace {

std::vector<std::byte> block_of(std::size_t count, std::size_t every) {
  std::vector<float> v(count, 0.0f);
  for (std::size_t i = 0; i < count; i += every)
    v[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? std::numeric_limits<float>::quiet_NaN() : -1.5f * float(i);
  std::vector<std::byte> b(count * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

constexpr std::size_t guard = 32;
constexpr std::byte fill{0x5A};

bool decode_guarded(Form f, const std::vector<std::byte>& in, std::uint64_t nnz, const Spec& spec,
                    std::vector<std::byte>& out, bool& guards_ok) {
  std::vector<std::byte> buf(spec.bytes() + 2 * guard, fill);
  std::string why;
  const bool ok = agx::codec::decode_sparse(f, in.data(), in.size(), nnz, buf.data() + guard, spec, why);
  guards_ok = true;
  for (std::size_t i = 0; i < guard; ++i)
    guards_ok = guards_ok && buf[i] == fill && buf[buf.size() - 1 - i] == fill;
  if (!ok) REQUIRE(!why.empty());
  out.assign(buf.begin() + guard, buf.end() - guard);
  return ok;
}

}  // namespace

TEST_CASE("sparse forms round-trip and the smallest is chosen", "[codec]") {
  const Spec spec{1000, 4, agx::ElementKind::float32};
  struct Case {
    std::size_t every;
    Form form;
  };
  for (const Case c : {Case{1000, Form::positions}, Case{1, Form::dense}, Case{5, Form::bitmap},
                       Case{100, Form::positions}}) {
    const auto b = block_of(spec.count, c.every);
    std::vector<std::byte> enc, out;
    std::uint64_t nnz = 0;
    const Form f = agx::codec::encode_sparse(b.data(), spec, enc, nnz);
    CHECK(f == c.form);
    CHECK(enc.size() <= spec.bytes());
    bool guards = false;
    REQUIRE(decode_guarded(f, enc, nnz, spec, out, guards));
    CHECK(guards);
    CHECK(std::memcmp(out.data(), b.data(), b.size()) == 0);
  }
}

TEST_CASE("damaged sparse payloads never write past the block", "[codec]") {
  const Spec spec{203, 4, agx::ElementKind::float32};
  for (std::size_t every : {7, 40}) {  // bitmap and positions
    const auto b = block_of(spec.count, every);
    std::vector<std::byte> enc, out;
    std::uint64_t nnz = 0;
    const Form f = agx::codec::encode_sparse(b.data(), spec, enc, nnz);
    REQUIRE(f != Form::dense);
    for (std::size_t i = 0; i < enc.size(); ++i)
      for (unsigned bit = 0; bit < 8; ++bit) {
        auto bad = enc;
        bad[i] ^= std::byte{static_cast<unsigned char>(1u << bit)};
        bool guards = false;
        decode_guarded(f, bad, nnz, spec, out, guards);
        REQUIRE(guards);
      }
    for (std::size_t len = 0; len < enc.size(); ++len) {  // truncated
      std::vector<std::byte> cut(enc.begin(), enc.begin() + static_cast<std::ptrdiff_t>(len));
      bool guards = false;
      CHECK_FALSE(decode_guarded(f, cut, nnz, spec, out, guards));
      CHECK(guards);
    }
    for (std::uint64_t lie : {nnz + 1, nnz - 1, std::uint64_t{1} << 62}) {  // a count that lies
      bool guards = false;
      CHECK_FALSE(decode_guarded(f, enc, lie, spec, out, guards));
      CHECK(guards);
    }
  }
}
