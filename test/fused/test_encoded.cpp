// The encoded all-gather (agx/encoded.hpp) under mpirun, checked against the MPI
// library's own MPI_Allgather of the same data:
//   sparse at densities 0, 0.1%, 10%, 50%, 100% for float, double, bytes and 12-byte
//     elements, with NaN payloads, -0.0 and negative values; bit-identical, and fewer
//     bytes on the wire while sparse; in place too; auto, ring and bruck;
//   lossless LZ4 / Zstandard (forced): exact, smaller for low-entropy data, at most the
//     header more for random data, and the plain call when no block gained (random on
//     every rank; one compressible block keeps the call encoded); `automatic` compresses
//     only where the link is slower than the compressor (one node: never);
//   lossy ZFP in fixed-accuracy mode: max error <= bound on smooth and random data, every
//     rank holds the same result; fixed rate: the wire bytes follow the rate;
//   bad options are MPI_ERR_ARG;
//   the v form (uneven blocks, a zero block, displacements in reverse order with gaps):
//     sparse, LZ4 and the plain call, out of place and in place, against MPI_Allgatherv;
//   the measured compressor speed: positive, agreed by every rank, and what `automatic`
//     compares with the link (--auto-compress yes|no: what a tuning file's link should
//     make `automatic` do on two virtual nodes; --tuned-speed V: the tuning file's
//     compressor speed V replaces the measurement).
//   --priced (two virtual nodes, a 50 MB/s link, a 200 MB/s compressor): the priced rule
//     of `automatic` packs what saves more link time than it costs (low-entropy integers),
//     and sends a block that packs to about 3/4 plain, at 64 KiB (packed, then priced)
//     and at 2 MiB (sampled), the data arriving exactly either way; --half yes|no: also
//     a block that packs to about half, and whether it must be packed (4 ranks: one rank
//     per virtual node packs it; two per virtual node pinned to one core, share 2, do not);
//   the nonblocking form (start_encoded_allgather*): bit-identical to MPI_Allgather(v) and
//     encoded as the blocking call (same wire bytes), in place and out of place, zero-size
//     blocks, two calls outstanding at once completed in opposite orders on even and odd
//     ranks, and a blocking call between a start and its wait on ranks that start late;
// --expect-corrupt R (with AGX_TEST_CORRUPT_BLOCK=R:kind): every rank's call fails with
// an agx::Error naming block R and its origin, and no byte past the receive buffer moves;
// the nonblocking call's wait() fails with the same class and message.

#include <agx/agx.hpp>
#include <agx/encoded.hpp>

#include "../mpi/pattern.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace agx_test;

namespace {

int rank = 0, nranks = 1;
long passed = 0, failed = 0;
const char* auto_compress = nullptr;  // --auto-compress yes|no
double tuned_speed = 0;               // --tuned-speed V: the tuning file's compressor speed

void expect(bool ok, const std::string& what) {
  if (ok) { ++passed; return; }
  ++failed;
  if (failed <= 20) std::fprintf(stderr, "FAIL rank %d N=%d: %s\n", rank, nranks, what.c_str());
}

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

/// Rank r's block: element i is non-zero with probability `density`; non-zero values
/// cycle through NaN with a payload, -0.0, negatives and ordinary values.
template <class T>
std::vector<T> sparse_block(int r, std::size_t count, double density) {
  std::vector<T> v(count, T{});
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t h = mix(static_cast<std::uint64_t>(r) << 32 ^ i ^ 0x1234);
    if (static_cast<double>(h % 1000000) >= density * 1e6) continue;
    if constexpr (std::is_floating_point_v<T>) {
      switch (h % 5) {
        case 0: v[i] = std::numeric_limits<T>::quiet_NaN(); break;
        case 1: v[i] = -T(0); break;
        case 2: v[i] = -T(h % 977) / T(7); break;
        default: v[i] = T(h % 10007) + T(0.25);
      }
      if (h % 5 == 0) {  // a NaN with its own payload bits
        unsigned char b[sizeof(T)];
        std::memcpy(b, &v[i], sizeof(T));
        b[0] ^= static_cast<unsigned char>(h >> 8 | 1);
        std::memcpy(&v[i], b, sizeof(T));
      }
    } else {
      std::memset(&v[i], 0, sizeof(T));
      auto* b = reinterpret_cast<unsigned char*>(&v[i]);
      b[h % sizeof(T)] = static_cast<unsigned char>(h >> 16 | 1);
    }
  }
  return v;
}

template <class T>
void reference(const std::vector<T>& mine, std::vector<T>& all) {
  all.resize(mine.size() * static_cast<std::size_t>(nranks));
  const int bytes = static_cast<int>(mine.size() * sizeof(T));
  MPI_Allgather(mine.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, MPI_COMM_WORLD);
}

template <class T>
void run_sparse(const char* type, const agx::Options& o, const std::string& algo) {
  for (double density : {0.0, 0.001, 0.1, 0.5, 1.0}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{4099}}) {
      const std::string what = std::string("sparse ") + type + " " + algo + " density " +
                               std::to_string(density) + " count " + std::to_string(count);
      const std::vector<T> mine = sparse_block<T>(rank, count, density);
      std::vector<T> want, got(mine.size() * static_cast<std::size_t>(nranks));
      reference(mine, want);
      agx::EncodedResult r;
      try {
        r = agx::sparse_allgather(MPI_COMM_WORLD, std::span<const T>(mine), std::span<T>(got), o);
      } catch (const agx::Error& e) {
        expect(false, what + ": " + e.what());
        continue;
      }
      expect(std::memcmp(want.data(), got.data(), want.size() * sizeof(T)) == 0,
             what + ": differs from MPI_Allgather");
      // Encoded unless no block gained (every block dense: then the plain call ran).
      expect(r.encoded || r.wire_bytes == r.plain_bytes, what + ": encoded, or plain with nothing gained");
      if (count == 0 || (count == 4099 && density <= 0.5)) expect(r.encoded, what + ": encoded");
      if (count == 4099 && density == 1.0 && nranks > 0)
        expect(!r.encoded, what + ": every block dense, so the plain call ran");
      if (count == 4099 && density <= 0.1)
        expect(r.wire_bytes < r.plain_bytes / 2, what + ": sparse blocks are smaller on the wire (" +
                                                     std::to_string(r.wire_bytes) + " of " +
                                                     std::to_string(r.plain_bytes) + ")");
      if (count == 4099 && density == 1.0)
        expect(r.wire_bytes <= r.plain_bytes + 24 * static_cast<std::size_t>(nranks),
               what + ": a dense block goes dense");
      // In place.
      std::vector<T> inplace(got.size(), T{});
      std::memcpy(inplace.data() + count * static_cast<std::size_t>(rank), mine.data(), count * sizeof(T));
      agx::encoded_allgather_in_place(MPI_COMM_WORLD, std::span<T>(inplace),
                                      agx::EncodeOptions{.sparse = true}, o);
      expect(std::memcmp(want.data(), inplace.data(), want.size() * sizeof(T)) == 0,
             what + " in place: differs from MPI_Allgather");
    }
  }
}

template <class T>
void run_lossless(agx::Lossless l, const char* name) {
  const std::size_t count = 20000;
  // 0: every block low-entropy; 1: every block random; 2: rank 0's low-entropy, the
  // others random (a block gains: the call stays encoded).
  for (int data : {0, 1, 2}) {
    const bool compressible = data == 0 || (data == 2 && rank == 0);
    std::vector<T> mine(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t h = mix(static_cast<std::uint64_t>(rank) * 1000003 + i);
      mine[i] = compressible ? static_cast<T>(i / 64 % 7 + static_cast<std::size_t>(rank))
                             : static_cast<T>(h);
    }
    std::vector<T> want, got(count * static_cast<std::size_t>(nranks));
    reference(mine, want);
    const agx::EncodeOptions e{.lossless = l, .min_bytes = 0};
    const std::string what = std::string(name) + (data == 0 ? " low-entropy" : data == 1 ? " random" : " mixed");
    const agx::EncodedResult r = agx::encoded_allgather(MPI_COMM_WORLD, std::span<const T>(mine),
                                                        std::span<T>(got), e);
    expect(std::memcmp(want.data(), got.data(), want.size() * sizeof(T)) == 0,
           what + ": differs from MPI_Allgather");
    if (data == 0)
      expect(r.wire_bytes < r.plain_bytes / 4, what + ": compressed (" + std::to_string(r.wire_bytes) +
                                                   " of " + std::to_string(r.plain_bytes) + ")");
    else if (data == 1)  // no block gained: the data phase was the plain call
      expect(!r.encoded && r.wire_bytes == r.plain_bytes,
             what + ": nothing compressed, so the plain call ran (encoded " +
                 std::to_string(r.encoded) + ", wire " + std::to_string(r.wire_bytes) + " of " +
                 std::to_string(r.plain_bytes) + ")");
    else
      expect(r.encoded && (nranks == 1 || r.wire_bytes < r.plain_bytes),
             what + ": rank 0's block compressed, the call stays encoded");
  }
}

template <class T>
void run_lossy(const char* type, double bound) {
  const std::size_t count = 10000;
  for (bool smooth : {true, false}) {
    std::vector<T> mine(count);
    for (std::size_t i = 0; i < count; ++i) {
      const double x = static_cast<double>(i) / 100.0 + rank;
      mine[i] = smooth ? static_cast<T>(std::sin(x) * 3.0 + std::cos(0.3 * x))
                       : static_cast<T>(static_cast<double>(mix(i * 77 + rank) % 2000001) / 1e6 - 1.0);
    }
    std::vector<T> want, got(count * static_cast<std::size_t>(nranks));
    reference(mine, want);
    const agx::EncodeOptions e{.lossy = {agx::Lossy::Mode::accuracy, bound}};
    const agx::EncodedResult r =
        agx::encoded_allgather(MPI_COMM_WORLD, std::span<const T>(mine), std::span<T>(got), e);
    double max_err = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      max_err = std::max(max_err, std::fabs(static_cast<double>(want[i]) - static_cast<double>(got[i])));
    const std::string what = std::string("zfp accuracy ") + type + (smooth ? " smooth" : " random");
    expect(max_err <= bound, what + ": max error " + std::to_string(max_err) + " > bound " +
                                 std::to_string(bound));
    if (smooth)
      expect(r.wire_bytes < r.plain_bytes / 2, what + ": fewer bytes on the wire (" +
                                                   std::to_string(r.wire_bytes) + " of " +
                                                   std::to_string(r.plain_bytes) + ")");
    // Every rank decoded the same bytes.
    unsigned long h = 0, lo = 0, hi = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      unsigned long b = 0;
      std::memcpy(&b, &got[i], sizeof(T) < sizeof(b) ? sizeof(T) : sizeof(b));
      h = h * 1099511628211ul ^ b;
    }
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    expect(lo == hi, what + ": every rank holds the same result");
  }
  // Fixed rate: 8 bits per value.
  std::vector<T> mine(4096, T(1.5)), got(4096 * static_cast<std::size_t>(nranks));
  const agx::EncodedResult r = agx::encoded_allgather(
      MPI_COMM_WORLD, std::span<const T>(mine), std::span<T>(got),
      agx::EncodeOptions{.lossy = {agx::Lossy::Mode::rate, 8}});
  expect(r.wire_bytes <= (4096 + 64) * static_cast<std::size_t>(nranks),
         std::string("zfp rate 8 ") + type + ": about one byte per value, got " +
             std::to_string(r.wire_bytes));
}

int error_of(auto&& f) {
  try {
    f();
  } catch (const agx::Error& e) {
    return e.error_class();
  }
  return MPI_SUCCESS;
}

void run_bad_options() {
  std::vector<int> mi(4), ai(4 * static_cast<std::size_t>(nranks));
  std::vector<float> mf(4), af(4 * static_cast<std::size_t>(nranks));
  expect(error_of([&] {
           agx::encoded_allgather(MPI_COMM_WORLD, std::span<const int>(mi), std::span<int>(ai),
                                  agx::EncodeOptions{.lossy = {agx::Lossy::Mode::accuracy, 1e-3}});
         }) == MPI_ERR_ARG,
         "lossy on int elements: MPI_ERR_ARG");
  expect(error_of([&] {
           agx::encoded_allgather(MPI_COMM_WORLD, std::span<const float>(mf), std::span<float>(af),
                                  agx::EncodeOptions{.lossy = {agx::Lossy::Mode::accuracy, 0}});
         }) == MPI_ERR_ARG,
         "lossy bound 0: MPI_ERR_ARG");
  expect(error_of([&] {
           agx::encoded_allgather(MPI_COMM_WORLD, std::span<const float>(mf),
                                  std::span<float>(af).first(3), agx::EncodeOptions{.sparse = true});
         }) == MPI_ERR_COUNT,
         "receive buffer too small: MPI_ERR_COUNT");
  // The nonblocking start checks as the blocking call does (same classes).
  const agx::EncodeOptions sparse{.sparse = true};
  const agx::Options radix_alone{.radix = 3};
  const int blocking_radix = error_of([&] {
    agx::encoded_allgather(MPI_COMM_WORLD, std::span<const int>(mi), std::span<int>(ai), sparse, radix_alone);
  });
  const int started_radix = error_of([&] {
    agx::start_encoded_allgather(MPI_COMM_WORLD, std::span<const int>(mi), std::span<int>(ai), sparse,
                                 radix_alone).wait();
  });
  expect(blocking_radix == MPI_ERR_ARG && started_radix == blocking_radix,
         "a radix without its algorithm: MPI_ERR_ARG, blocking " + std::to_string(blocking_radix) +
             ", nonblocking " + std::to_string(started_radix));
  expect(error_of([&] {
           agx::start_encoded_allgather(MPI_COMM_WORLD, std::span<const int>(mi), std::span<int>(ai),
                                        agx::EncodeOptions{.lossy = {agx::Lossy::Mode::accuracy, 1e-3}});
         }) == MPI_ERR_ARG,
         "nonblocking: lossy on int elements: MPI_ERR_ARG");
  expect(error_of([&] {
           agx::start_encoded_allgather(MPI_COMM_WORLD, std::span<const float>(mf),
                                        std::span<float>(af).first(3), sparse);
         }) == MPI_ERR_COUNT,
         "nonblocking: receive buffer too small: MPI_ERR_COUNT");
  // Non-finite values: ZFP is skipped for that block, which then arrives exactly.
  mf[1] = std::numeric_limits<float>::infinity();
  std::vector<float> want;
  reference(mf, want);
  agx::encoded_allgather(MPI_COMM_WORLD, std::span<const float>(mf), std::span<float>(af),
                         agx::EncodeOptions{.lossy = {agx::Lossy::Mode::accuracy, 1e-2}});
  expect(std::memcmp(want.data(), af.data(), af.size() * 4) == 0,
         "a block with infinity arrives exactly under lossy mode");
  // automatic on one node: the link is memory, nothing is compressed.
  std::vector<int> big(1 << 16, 7), all(big.size() * static_cast<std::size_t>(nranks));
  const agx::EncodedResult r = agx::encoded_allgather(
      MPI_COMM_WORLD, std::span<const int>(big), std::span<int>(all),
      agx::EncodeOptions{.lossless = agx::Lossless::automatic});
  const char* forced = std::getenv("AGX_COMPRESS_BYTES_PER_S");
  bool want_auto = forced != nullptr;
  if (auto_compress != nullptr) want_auto = std::string(auto_compress) == "yes";
  want_auto = want_auto && agx::lossless_available(agx::Lossless::automatic);
  expect(r.encoded == want_auto, "automatic compresses only where the rule says the link is slower");
  expect(std::memcmp(all.data() + big.size() * static_cast<std::size_t>(nranks - 1), big.data(),
                     big.size() * 4) == 0, "automatic: the last block arrived");
}

/// The v form: rank i holds 1500 * (i + 1) elements, except rank 1 which holds none;
/// blocks lie in reverse rank order with a 3-element gap before each. Sparse, LZ4
/// (when built) and the plain call, out of place and in place, against MPI_Allgatherv;
/// the gaps keep their fill.
template <class T>
void run_v(const char* type) {
  std::vector<int> counts, displs(static_cast<std::size_t>(nranks));
  for (int i = 0; i < nranks; ++i) counts.push_back(i == 1 ? 0 : 1500 * (i + 1));
  int at = 0;
  for (int i = nranks - 1; i >= 0; --i) {
    at += 3;
    displs[static_cast<std::size_t>(i)] = at;
    at += counts[static_cast<std::size_t>(i)];
  }
  const std::size_t total = static_cast<std::size_t>(at) + 2;
  const auto me = static_cast<std::size_t>(rank);
  const std::vector<T> mine = sparse_block<T>(rank, static_cast<std::size_t>(counts[me]), 0.05);
  std::vector<T> want(total);
  std::memset(want.data(), 0x5a, total * sizeof(T));
  {
    std::vector<int> bc, bd;
    for (int i = 0; i < nranks; ++i) {
      bc.push_back(counts[static_cast<std::size_t>(i)] * static_cast<int>(sizeof(T)));
      bd.push_back(displs[static_cast<std::size_t>(i)] * static_cast<int>(sizeof(T)));
    }
    MPI_Allgatherv(mine.data(), bc[me], MPI_BYTE, want.data(), bc.data(), bd.data(), MPI_BYTE,
                   MPI_COMM_WORLD);
  }
  struct Way {
    const char* name;
    agx::EncodeOptions e;
    bool encoded;
  };
  std::vector<Way> ways{{"sparse", {.sparse = true}, true},
                        {"plain", {}, false}};
  if (agx::lossless_available(agx::Lossless::lz4))
    ways.push_back({"lz4", {.lossless = agx::Lossless::lz4, .min_bytes = 4096}, true});
  for (const Way& w : ways)
    for (bool in_place : {false, true}) {
      const std::string what = std::string("v ") + type + " " + w.name + (in_place ? " in place" : "");
      std::vector<T> got(total);
      std::memset(got.data(), 0x5a, total * sizeof(T));
      agx::EncodedResult r;
      try {
        if (in_place) {
          std::memcpy(got.data() + displs[me], mine.data(), mine.size() * sizeof(T));
          r = agx::encoded_allgatherv_in_place(MPI_COMM_WORLD, std::span<T>(got), counts, displs, w.e);
        } else {
          r = agx::encoded_allgatherv(MPI_COMM_WORLD, std::span<const T>(mine), std::span<T>(got),
                                      counts, displs, w.e);
        }
      } catch (const agx::Error& e) {
        expect(false, what + ": " + e.what());
        continue;
      }
      expect(std::memcmp(want.data(), got.data(), total * sizeof(T)) == 0,
             what + ": differs from MPI_Allgatherv (gaps included)");
      expect(r.encoded == w.encoded, what + ": encoded as asked");
      if (w.encoded && nranks > 1)
        expect(r.wire_bytes < r.plain_bytes, what + ": fewer bytes on the wire (" +
                                                 std::to_string(r.wire_bytes) + " of " +
                                                 std::to_string(r.plain_bytes) + ")");
    }
  // Bad v input: the checks of a v call.
  std::vector<int> short_counts(counts.begin(), counts.end() - 1);
  std::vector<T> got(total);
  expect(error_of([&] {
           agx::encoded_allgatherv(MPI_COMM_WORLD, std::span<const T>(mine), std::span<T>(got),
                                   short_counts, displs, agx::EncodeOptions{.sparse = true});
         }) != MPI_SUCCESS,
         std::string("v ") + type + ": counts of the wrong length are an error");
  const int small = error_of([&] {
    agx::encoded_allgatherv(MPI_COMM_WORLD, std::span<const T>(mine),
                            std::span<T>(got).first(total - 3), counts, displs,
                            agx::EncodeOptions{.sparse = true});
  });
  const int plain = error_of([&] {  // what the plain v call says for the same input
    agx::Allgather<T>(MPI_COMM_WORLD).v(std::span<const T>(mine), std::span<T>(got).first(total - 3),
                                        counts, displs);
  });
  expect(small != MPI_SUCCESS && small == plain,
         std::string("v ") + type + ": a receive buffer too small is the v call's error (" +
             std::to_string(plain) + "), got " + std::to_string(small));
}

/// The nonblocking form against MPI_Allgather(v) and the blocking encoded call.
template <class T>
void run_nonblocking(const char* type) {
  const auto un = static_cast<std::size_t>(nranks);
  const auto me = static_cast<std::size_t>(rank);
  // A: uniform, out of place, sparse; B: the v layout of run_v, in place, LZ4 where built
  // (else sparse); Z: zero-size blocks. A and B outstanding together.
  const std::size_t count = 4099;
  const std::vector<T> a_mine = sparse_block<T>(rank, count, 0.02);
  std::vector<T> a_want, a_got(count * un);
  reference(a_mine, a_want);
  const agx::EncodedResult a_blocking = agx::sparse_allgather(
      MPI_COMM_WORLD, std::span<const T>(a_mine), std::span<T>(a_got));
  std::vector<int> counts, displs(un);
  for (int i = 0; i < nranks; ++i) counts.push_back(i == 1 ? 0 : 1500 * (i + 1));
  int at = 0;
  for (int i = nranks - 1; i >= 0; --i) {
    at += 3;
    displs[static_cast<std::size_t>(i)] = at;
    at += counts[static_cast<std::size_t>(i)];
  }
  const std::size_t total = static_cast<std::size_t>(at) + 2;
  std::vector<T> b_mine(static_cast<std::size_t>(counts[me]));
  for (std::size_t i = 0; i < b_mine.size(); ++i)  // low entropy: LZ4 shrinks it
    std::memset(&b_mine[i], static_cast<int>(i / 97 % 5 + me), sizeof(T));
  std::vector<T> b_want(total);
  std::memset(b_want.data(), 0x5a, total * sizeof(T));
  {
    std::vector<int> bc, bd;
    for (std::size_t i = 0; i < un; ++i) {
      bc.push_back(counts[i] * static_cast<int>(sizeof(T)));
      bd.push_back(displs[i] * static_cast<int>(sizeof(T)));
    }
    MPI_Allgatherv(b_mine.data(), bc[me], MPI_BYTE, b_want.data(), bc.data(), bd.data(), MPI_BYTE,
                   MPI_COMM_WORLD);
  }
  const agx::EncodeOptions b_enc = agx::lossless_available(agx::Lossless::lz4)
                                       ? agx::EncodeOptions{.lossless = agx::Lossless::lz4, .min_bytes = 1024}
                                       : agx::EncodeOptions{.sparse = true};
  for (int order = 0; order < 2; ++order) {
    const std::string what = std::string("nonblocking ") + type + (order ? " B first" : " A first");
    std::fill(a_got.begin(), a_got.end(), T{});
    std::vector<T> b_got(total);
    std::memset(b_got.data(), 0x5a, total * sizeof(T));
    std::memcpy(b_got.data() + displs[me], b_mine.data(), b_mine.size() * sizeof(T));
    try {
      agx::EncodedRequest a = agx::start_encoded_allgather(
          MPI_COMM_WORLD, std::span<const T>(a_mine), std::span<T>(a_got), agx::EncodeOptions{.sparse = true});
      agx::EncodedRequest b = agx::start_encoded_allgatherv_in_place(
          MPI_COMM_WORLD, std::span<T>(b_got), counts, displs, b_enc);
      // Opposite orders on even and odd ranks (and swapped on the second pass).
      if ((rank + order) % 2 == 0) {
        a.wait();
        while (!b.test()) {}
      } else {
        while (!b.test()) {}
        a.wait();
      }
      expect(!a.active() && !b.active(), what + ": complete");
      expect(std::memcmp(a_want.data(), a_got.data(), a_want.size() * sizeof(T)) == 0,
             what + ": A differs from MPI_Allgather");
      expect(std::memcmp(b_want.data(), b_got.data(), total * sizeof(T)) == 0,
             what + ": B (in place, v) differs from MPI_Allgatherv (gaps included)");
      const agx::EncodedResult ra = a.result(), rb = b.result();
      expect(ra.encoded && ra.wire_bytes == a_blocking.wire_bytes && ra.plain_bytes == a_blocking.plain_bytes,
             what + ": A encoded as the blocking call (" + std::to_string(ra.wire_bytes) + " vs " +
                 std::to_string(a_blocking.wire_bytes) + " bytes)");
      expect(rb.encoded && (nranks == 1 || rb.wire_bytes < rb.plain_bytes),
             what + ": B encoded, fewer bytes on the wire (" + std::to_string(rb.wire_bytes) +
                 " of " + std::to_string(rb.plain_bytes) + ")");
    } catch (const agx::Error& e) {
      expect(false, what + ": " + e.what());
    }
  }
  // Zero-size blocks (sparse: every block is its header) and a plain call (nothing to encode).
  try {
    std::vector<T> none, all_none;
    agx::EncodedRequest z = agx::start_encoded_allgather(
        MPI_COMM_WORLD, std::span<const T>(none), std::span<T>(all_none), agx::EncodeOptions{.sparse = true});
    z.wait();
    expect(z.result().encoded && z.result().plain_bytes == 0 && z.result().wire_bytes == 24 * un,
           std::string("nonblocking ") + type + " zero-size blocks: headers only, got " +
               std::to_string(z.result().wire_bytes));
    std::fill(a_got.begin(), a_got.end(), T{});
    std::copy(a_mine.begin(), a_mine.end(), a_got.begin() + static_cast<std::ptrdiff_t>(count * me));
    agx::EncodedRequest p = agx::start_encoded_allgather_in_place(MPI_COMM_WORLD, std::span<T>(a_got),
                                                                  agx::EncodeOptions{});
    p.wait();
    expect(!p.result().encoded && std::memcmp(a_want.data(), a_got.data(), a_want.size() * sizeof(T)) == 0,
           std::string("nonblocking ") + type + " plain in place: not encoded, exact");
  } catch (const agx::Error& e) {
    expect(false, std::string("nonblocking ") + type + " zero/plain: " + e.what());
  }
  // A blocking call between a start and its wait, odd ranks starting late: the second
  // phase's tag was taken at start, not when the sizes happened to arrive on this rank.
  try {
    if (rank % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::fill(a_got.begin(), a_got.end(), T{});
    agx::EncodedRequest a = agx::start_encoded_allgather(
        MPI_COMM_WORLD, std::span<const T>(a_mine), std::span<T>(a_got), agx::EncodeOptions{.sparse = true});
    std::vector<int> mid(3, rank), mid_all(3 * un);
    agx::Allgather<int>(MPI_COMM_WORLD)(std::span<const int>(mid), std::span<int>(mid_all));
    a.wait();
    bool mid_ok = true;
    for (std::size_t i = 0; i < mid_all.size(); ++i) mid_ok = mid_ok && mid_all[i] == static_cast<int>(i / 3);
    expect(mid_ok, std::string("nonblocking ") + type + ": the blocking call in between is exact");
    expect(std::memcmp(a_want.data(), a_got.data(), a_want.size() * sizeof(T)) == 0,
           std::string("nonblocking ") + type + ": a call with a blocking one in between is exact");
  } catch (const agx::Error& e) {
    expect(false, std::string("nonblocking ") + type + " with a blocking call between: " + e.what());
  }
}

/// The compressor speed of the automatic rule: measured (not a constant), agreed by
/// every rank, quick.
void run_speed() {
  if (!agx::lossless_available(agx::Lossless::automatic)) return;
  const double t0 = MPI_Wtime();
  const double v = agx::compressor_bytes_per_s(MPI_COMM_WORLD, agx::Lossless::automatic);
  const double took = MPI_Wtime() - t0;
  if (tuned_speed > 0)
    expect(v == tuned_speed, "the tuning file's compressor speed replaces the measurement: " + std::to_string(v));
  else
    expect(v > 1e6 && std::isfinite(v), "the compressor speed is measured: " + std::to_string(v));
  double lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  expect(lo == hi, "every rank uses the same compressor speed (" + std::to_string(lo) + " .. " +
                       std::to_string(hi) + ")");
  expect(took < 0.5, "the measurement is short: " + std::to_string(took) + " s");
  const double again = agx::compressor_bytes_per_s(MPI_COMM_WORLD, agx::Lossless::automatic);
  expect(again == v, "the speed is measured once per communicator");
  if (const char* forced = std::getenv("AGX_COMPRESS_BYTES_PER_S"))
    expect(v == std::strtod(forced, nullptr), "AGX_COMPRESS_BYTES_PER_S replaces the measurement");
  if (rank == 0) std::printf("compressor speed: %.3g B/s\n", v);
}

int run_corrupt(int victim) {
  std::vector<float> mine = sparse_block<float>(rank, 3000, 0.05);
  const std::size_t bytes = mine.size() * 4 * static_cast<std::size_t>(nranks);
  Guarded recv(bytes);
  std::string msg;
  int code = MPI_SUCCESS;
  try {
    agx::sparse_allgather(MPI_COMM_WORLD, std::span<const float>(mine),
                          std::span<float>(reinterpret_cast<float*>(recv.data()), bytes / 4));
  } catch (const agx::Error& e) {
    code = e.error_class();
    msg = e.what();
  }
  const std::string name = "block " + std::to_string(victim) + " (from rank " + std::to_string(victim) + ")";
  expect(code == MPI_ERR_OTHER, "a corrupt block is MPI_ERR_OTHER, got " + std::to_string(code));
  expect(msg.find(name) != std::string::npos, "the error names " + name + ": '" + msg + "'");
  long where = 0;
  expect(recv.guards_intact(where), "nothing past the receive buffer changed");
  if (rank == 0) std::printf("corrupt block error: %s\n", msg.c_str());
  // The nonblocking call: wait() raises what the blocking call raised.
  std::string nb_msg;
  int nb_code = MPI_SUCCESS;
  try {
    agx::EncodedRequest r = agx::start_encoded_allgather(
        MPI_COMM_WORLD, std::span<const float>(mine),
        std::span<float>(reinterpret_cast<float*>(recv.data()), bytes / 4), agx::EncodeOptions{.sparse = true});
    r.wait();
  } catch (const agx::Error& e) {
    nb_code = e.error_class();
    nb_msg = e.what();
  }
  expect(nb_code == code && nb_msg == msg, "the nonblocking call fails as the blocking one: '" +
                                               nb_msg + "' (class " + std::to_string(nb_code) + ")");
  expect(recv.guards_intact(where), "nonblocking: nothing past the receive buffer changed");
  return 0;
}

/// --priced [half yes|no]: see the header. Patterns, in periods of 4 KiB: low-entropy
/// (every byte 7), 3/4 (3 KiB of LCG bytes, then 1 KiB of zeros; LZ4 and Zstandard keep
/// about 3/4 of it) and, with an expectation, half (2 KiB of LCG bytes, 2 KiB of zeros).
void run_priced(const char* half) {
  struct Kind {
    const char* name;
    std::size_t random_bytes;  // of every 4096
    bool packed;
  };
  std::vector<Kind> kinds{{"low-entropy", 0, true}, {"3/4-packable", 3072, false}};
  if (half != nullptr) kinds.push_back({"half-packable", 2048, std::string(half) == "yes"});
  for (const std::size_t bytes : {std::size_t{64} << 10, std::size_t{2} << 20}) {
    for (const Kind& k : kinds) {
      std::vector<std::uint8_t> mine(bytes, 7);
      std::uint32_t x = 977u * static_cast<std::uint32_t>(rank + 1);
      for (std::size_t i = 0; i < bytes && k.random_bytes > 0; ++i) {
        x = x * 1664525u + 1013904223u;
        mine[i] = i % 4096 < k.random_bytes ? static_cast<std::uint8_t>(x >> 24) : 0;
      }
      std::vector<std::uint8_t> all(bytes * static_cast<std::size_t>(nranks)), want(all.size());
      MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, want.data(),
                    static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
      const agx::EncodedResult r = agx::encoded_allgather(
          MPI_COMM_WORLD, std::span<const std::uint8_t>(mine), std::span<std::uint8_t>(all),
          agx::EncodeOptions{.lossless = agx::Lossless::automatic});
      const std::string what = std::string(k.name) + " " + std::to_string(bytes >> 10) + " KiB";
      expect(all == want, "priced rule: " + what + " arrives exactly");
      expect(r.encoded == (k.packed && agx::lossless_available(agx::Lossless::automatic)),
             "priced rule: " + what + (k.packed ? " is packed" : " goes plain"));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int victim = -1;
  bool priced = false;
  const char* half = nullptr;  // --half yes|no (with --priced)
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--expect-corrupt" && i + 1 < argc) victim = std::atoi(argv[++i]);
    else if (std::string(argv[i]) == "--auto-compress" && i + 1 < argc) auto_compress = argv[++i];
    else if (std::string(argv[i]) == "--tuned-speed" && i + 1 < argc) tuned_speed = std::strtod(argv[++i], nullptr);
    else if (std::string(argv[i]) == "--priced") priced = true;
    else if (std::string(argv[i]) == "--half" && i + 1 < argc) half = argv[++i];
  if (victim >= 0) {
    run_corrupt(victim);
  } else if (priced) {
    run_priced(half);
  } else if (auto_compress != nullptr) {
    run_speed();
    run_bad_options();
  } else {
    run_speed();
    run_v<float>("float");
    run_v<Vec3>("vec3");
    run_nonblocking<float>("float");
    run_nonblocking<Vec3>("vec3");
    for (const auto& [o, name] : {std::pair{agx::Options{}, "auto"},
                                  std::pair{agx::Options{.algorithm = agx::Algorithm::ring}, "ring"},
                                  std::pair{agx::Options{.algorithm = agx::Algorithm::bruck}, "bruck"}}) {
      run_sparse<float>("float", o, name);
      run_sparse<double>("double", o, name);
      run_sparse<unsigned char>("uint8", o, name);
      run_sparse<Vec3>("vec3", o, name);
    }
    if (agx::lossless_available(agx::Lossless::lz4)) run_lossless<std::int32_t>(agx::Lossless::lz4, "lz4");
    if (agx::lossless_available(agx::Lossless::zstd)) run_lossless<std::int64_t>(agx::Lossless::zstd, "zstd");
    if (agx::codecs_built().find("zfp") != std::string::npos) {
      run_lossy<float>("float", 1e-3);
      run_lossy<double>("double", 1e-6);
    }
    run_bad_options();
    if (rank == 0) std::printf("codecs built: %s\n", agx::codecs_built().c_str());
  }
  long totals[2] = {passed, failed}, sums[2] = {0, 0};
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("test_encoded N=%d: %ld checks passed, %ld failed\n", nranks, sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] == 0 ? 0 : 1;
}
