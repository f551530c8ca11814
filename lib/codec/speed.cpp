// The compressor speed of the automatic compression rule (docs/fused.md), measured
// instead of assumed: once per process and packer, lazily, the packer compresses a
// 64 KiB sample of fp32 weights with few distinct exponents (what ML all-gathers move)
// and unpacks it again for about two milliseconds; each speed is the sample's bytes over
// the best repetition.
// A communicator's ranks then agree on the slowest rank's speed (one MPI_Allreduce on
// agx's private communicator, cached as an attribute of the user's), so that the rule
// chooses the same on every rank. A tuning file's speed (agx-tune measures it: the
// `compress.lz4_bytes_per_s` and `compress.zstd_bytes_per_s` lines) replaces the
// measurement, and AGX_COMPRESS_BYTES_PER_S replaces both.

#include <agx/error.hpp>

#include "codec/codec.hpp"
#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace agx::codec {

namespace {

constexpr std::size_t sample_bytes = 64 * 1024;

std::vector<std::byte> weight_sample() {
  std::vector<float> v(sample_bytes / sizeof(float));
  std::uint32_t x = 12345;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    const int e = static_cast<int>((x >> 28) & 3u) - 3;  // 2^-3 .. 2^0
    const float m = 1.0f + static_cast<float>((x >> 8) & 0xffu) / 256.0f;
    f = ((x & 1u) ? -m : m) * static_cast<float>(1.0 / (1 << -e));
  }
  std::vector<std::byte> b(sample_bytes);
  std::memcpy(b.data(), v.data(), sample_bytes);
  return b;
}

/// {pack, unpack} bytes per second over the sample: the best repetition of each.
std::array<double, 2> measure(Packer p) {
  const std::vector<std::byte> sample = weight_sample();
  std::vector<std::byte> out, back(sample.size());
  std::string why;
  using clock = std::chrono::steady_clock;
  const auto begin = clock::now();
  double best = 0, best_unpack = 0;
  for (int rep = 0; rep < 64; ++rep) {
    const auto t0 = clock::now();
    const bool packed = pack(p, sample.data(), sample.size(), out);
    const auto t1 = clock::now();
    if (packed && unpack(p, out.data(), out.size(), back.data(), back.size(), why)) {
      const double u = std::chrono::duration<double>(clock::now() - t1).count();
      if (u > 0 && (best_unpack == 0 || u < best_unpack)) best_unpack = u;
    }
    const double s = std::chrono::duration<double>(t1 - t0).count();
    if (s > 0 && (best == 0 || s < best)) best = s;
    if (rep >= 2 && clock::now() - begin > std::chrono::milliseconds(2)) break;
  }
  const auto speed = [](double sec) { return sec > 0 ? static_cast<double>(sample_bytes) / sec : 0.0; };
  return {speed(best), speed(best_unpack)};
}

const std::array<double, 2>& local_speeds(Packer p) {
  static std::array<std::array<double, 2>, 3> speeds{};
  static std::array<std::once_flag, 3> once;
  const auto i = static_cast<std::size_t>(p);
  std::call_once(once[i], [&] { speeds[i] = measure(p); });
  return speeds[i];
}

int speed_keyval() {
  static int keyval = MPI_KEYVAL_INVALID;
  static std::once_flag once;
  std::call_once(once, [] {
    auto del = [](MPI_Comm, int, void* attr, void*) -> int {
      delete static_cast<std::array<double, 3>*>(attr);
      return MPI_SUCCESS;
    };
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del, &keyval, nullptr),
              "MPI_Comm_create_keyval");
  });
  return keyval;
}

}  // namespace

double local_pack_speed(Packer p) {
  if (!packer_available(p) || p == Packer::none) return 0;
  return local_speeds(p)[0];
}

double local_unpack_speed(Packer p) {
  if (!packer_available(p) || p == Packer::none) return 0;
  return local_speeds(p)[1];
}

double agreed_pack_speed(MPI_Comm comm, Packer p) {
  check_config();  // an unreadable AGX_COMPRESS_BYTES_PER_S is MPI_ERR_ARG (core/settings.hpp)
  if (const std::optional<double>& v = config().compress_bytes_per_s) return *v;
  if (!packer_available(p) || p == Packer::none) return 0;
  // The tuning file's speed: the communicator's tuning is rank 0's, the same everywhere.
  const Tuning& tuning = context(comm).selector().tuning();
  const double tuned = p == Packer::lz4 ? tuning.compress_lz4_bytes_per_s : tuning.compress_zstd_bytes_per_s;
  if (tuned > 0) return tuned;
  const int key = speed_keyval();
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm, key, &attr, &found), "MPI_Comm_get_attr");
  auto* cached = static_cast<std::array<double, 3>*>(found ? attr : nullptr);
  const auto i = static_cast<std::size_t>(p);
  if (cached != nullptr && (*cached)[i] > 0) return (*cached)[i];
  // Collective: every rank of a call asks for the same packer at the same call.
  double mine = local_pack_speed(p), slowest = 0;
  check_mpi(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MIN, context(comm).comm()),
            "MPI_Allreduce");
  if (cached == nullptr) {
    cached = new std::array<double, 3>{};
    const int rc = MPI_Comm_set_attr(comm, key, cached);
    if (rc != MPI_SUCCESS) delete cached;
    check_mpi(rc, "MPI_Comm_set_attr");
  }
  (*cached)[i] = slowest;
  return slowest;
}

bool pack_speed_known(MPI_Comm comm, Packer p) {
  check_config();
  if (config().compress_bytes_per_s || !packer_available(p) || p == Packer::none) return true;
  const Tuning& tuning = context(comm).selector().tuning();
  if ((p == Packer::lz4 ? tuning.compress_lz4_bytes_per_s : tuning.compress_zstd_bytes_per_s) > 0)
    return true;
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm, speed_keyval(), &attr, &found), "MPI_Comm_get_attr");
  return found && (*static_cast<std::array<double, 3>*>(attr))[static_cast<std::size_t>(p)] > 0;
}

}  // namespace agx::codec

namespace agx {

double compressor_bytes_per_s(MPI_Comm comm, Lossless l) {
  using codec::Packer;
  const Packer p = l == Lossless::lz4    ? Packer::lz4
                   : l == Lossless::zstd ? Packer::zstd
                   : l == Lossless::automatic
                       ? (codec::packer_available(Packer::lz4) ? Packer::lz4 : Packer::zstd)
                       : Packer::none;
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  return codec::agreed_pack_speed(comm, p);
}

}  // namespace agx
