#pragma once
// Encoded all-gather (docs/fused.md): every rank encodes its block once, at its origin;
// the encoded sizes are exchanged, the encoded blocks are all-gathered as a v layout by
// whatever schedule runs, and every rank decodes every block into the dense receive
// buffer. Encodings, chosen per block (each block says which it uses):
//   sparse     positions + values or a bitmap + values, whichever is smaller; a block
//              denser than the break-even point goes dense. Bit-identical (an element is
//              zero when all its bytes are: -0.0 and NaN are kept).
//   lossless   LZ4 or Zstandard over the (sparse or dense) block, kept when smaller.
//   lossy      ZFP, float and double only, opt-in with a stated bound: fixed accuracy
//              (|decoded - original| <= tolerance for every element) or fixed rate
//              (bits per value). Never chosen by default; never by the interposer.
// Every encoded block carries a CRC32C: a corrupt or truncated block is an agx::Error
// naming the block and its origin, never an overrun of the receive buffer.
//
//   agx::EncodeOptions e{.sparse = true};
//   agx::encoded_allgather(comm, std::span<const float>(mine), std::span<float>(all), e);
//   agx::encoded_allgatherv(comm, std::span<const float>(mine), std::span<float>(all),
//                           counts, displs, e);        // uneven blocks (v layout)
//   agx::EncodedRequest r = agx::start_encoded_allgather(comm, std::span<const float>(mine),
//                                                        std::span<float>(all), e);
//   ... compute ...; r.wait();                         // nonblocking (docs/fused.md)

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/allgather.hpp>
#include <agx/error.hpp>
#include <agx/fused.hpp>
#include <agx/options.hpp>
#include <agx/request.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

namespace agx {

/// Lossless compression of blocks. `automatic`: LZ4 (else Zstandard) where the rule of
/// docs/fused.md says the link is slower than the compressor; lz4/zstd: always (blocks
/// of at least min_bytes). A compressor not built in is an agx::Error (MPI_ERR_ARG).
enum class Lossless { off, automatic, lz4, zstd };

/// Lossy ZFP compression (float and double only).
struct Lossy {
  enum class Mode { off, accuracy, rate };
  Mode mode = Mode::off;
  /// accuracy: the absolute error bound (> 0); rate: bits per value (0 < rate <= 64).
  double value = 0;
};

struct EncodeOptions {
  bool sparse = false;
  Lossless lossless = Lossless::off;
  Lossy lossy = {};
  /// Blocks smaller than this are never compressed (sparse encoding still applies).
  std::size_t min_bytes = 64 * 1024;
};

/// What an encoded all-gather did.
struct EncodedResult {
  Algorithm algorithm = Algorithm::automatic;  ///< of the all-gather of encoded blocks
  bool encoded = false;         ///< false: the rule chose the plain call (nothing encoded)
  std::size_t plain_bytes = 0;  ///< the dense blocks of all ranks, bytes
  std::size_t wire_bytes = 0;   ///< the encoded blocks of all ranks, bytes
};

/// How the encoder may treat an element.
enum class ElementKind { bytes, float32, float64 };

/// The byte-level entry point: `count` elements of `elem_bytes` per rank; rank i's block
/// lands at recv + i * count * elem_bytes. `send` null: in place.
EncodedResult encoded_allgather_bytes(MPI_Comm comm, const void* send, void* recv,
                                      std::size_t count, std::size_t elem_bytes,
                                      ElementKind kind, const EncodeOptions& encode,
                                      const Options& options = {});

/// The v form in bytes: rank i's block is block_bytes[i] bytes (a whole number of
/// elements) at buffers.recv + offsets[i]; buffers.in_place as for allgather_bytes (an
/// explicit flag: an empty send block may well be a null pointer). Every rank passes
/// the same block sizes (AGX_CHECK compares them).
EncodedResult encoded_allgatherv_bytes(MPI_Comm comm, const Buffers& buffers,
                                       std::span<const std::size_t> block_bytes,
                                       std::span<const std::size_t> offsets,
                                       std::size_t elem_bytes, ElementKind kind,
                                       const EncodeOptions& encode, const Options& options = {});

/// A started encoded all-gather (start_encoded_allgather and the like). Move-only; an
/// empty request is complete. Like agx::Request: advanced by test()/wait() (and any agx
/// call, or the progress thread); the destructor of an unfinished request waits for it.
class EncodedRequest {
 public:
  EncodedRequest() = default;
  EncodedRequest(Request request, std::shared_ptr<const EncodedResult> result)
      : result_(std::move(result)), request_(std::move(request)) {}

  /// Advances without blocking; true once every block is decoded into the receive
  /// buffer. Throws agx::Error as the blocking call would (a corrupt block:
  /// MPI_ERR_OTHER naming the block and its origin).
  bool test() { return request_.test(); }
  /// Blocks until complete (throws as test()).
  void wait() { request_.wait(); }
  bool active() const { return request_.active(); }
  /// What the call did (as the blocking call's EncodedResult), read once complete:
  /// `encoded` and `plain_bytes` are known at start, `wire_bytes` and `algorithm` once
  /// the encoded sizes are in.
  EncodedResult result() const { return result_ ? *result_ : EncodedResult{}; }

 private:
  std::shared_ptr<const EncodedResult> result_;
  Request request_;  // destroyed (waited for) first
};

/// Nonblocking encoded_allgatherv_bytes: the same checks and encodings. start() checks,
/// encodes the own block and posts the exchange of encoded sizes; test() then posts the
/// all-gather of the encoded blocks (a point-to-point schedule on the round engine: a
/// forced point-to-point algorithm, else the one predicted fastest for the encoded
/// layout) and decodes once they are in. Collective in start order, as every agx
/// nonblocking call: the calls of a communicator may be outstanding together and advance
/// in any order. Blocking inside start() only where the blocking call communicates before
/// encoding: AGX_CHECK's agreement, and the first `automatic` call on a communicator
/// across nodes (the compressor's speed is agreed once). Buffers stay alive and untouched
/// until the request completes.
EncodedRequest start_encoded_allgatherv_bytes(MPI_Comm comm, const Buffers& buffers,
                                              std::span<const std::size_t> block_bytes,
                                              std::span<const std::size_t> offsets,
                                              std::size_t elem_bytes, ElementKind kind,
                                              const EncodeOptions& encode,
                                              const Options& options = {});
/// Nonblocking encoded_allgather_bytes (`send` null: in place).
EncodedRequest start_encoded_allgather_bytes(MPI_Comm comm, const void* send, void* recv,
                                             std::size_t count, std::size_t elem_bytes,
                                             ElementKind kind, const EncodeOptions& encode,
                                             const Options& options = {});

/// The compression speed (bytes per second) the automatic rule compares with the link
/// on `comm`: measured once per process (about a millisecond, on the first call that
/// needs it), the slowest rank's value agreed across the communicator, or
/// AGX_COMPRESS_BYTES_PER_S. `automatic`: of the packer it would use. 0 when not built
/// in. Collective on the first call per communicator and compressor.
double compressor_bytes_per_s(MPI_Comm comm, Lossless l);

/// "lz4 zstd zfp": the codecs this libagx was built with (agx-info prints it).
std::string codecs_built();
/// Whether a lossless compressor (lz4 or zstd; automatic: either) is built in.
bool lossless_available(Lossless l);

namespace detail {
template <class T>
constexpr ElementKind element_kind() {
  return std::is_same_v<T, float>    ? ElementKind::float32
         : std::is_same_v<T, double> ? ElementKind::float64
                                     : ElementKind::bytes;
}
}  // namespace detail

namespace detail {
/// The checks of the typed out-of-place encoded call (agx::Allgather<T>'s).
template <class T>
void check_encoded(MPI_Comm comm, std::span<const T> send, std::span<T> recv) {
  static_assert(std::is_trivially_copyable_v<T>, "the encoded all-gather needs a trivially copyable T");
  const int n = comm_size(comm);
  check_not_null(send, "send");
  check_not_null(recv, "receive");
  checked_bytes(send.size(), sizeof(T), "count", 0);
  std::size_t need = 0;
  if (__builtin_mul_overflow(send.size(), static_cast<std::size_t>(n), &need) ||
      recv.size() < need)
    throw Error(MPI_ERR_COUNT, "agx: receive buffer holds " + std::to_string(recv.size()) +
                                   " elements, needs " + std::to_string(send.size()) + " x " +
                                   std::to_string(n));
  check_total(send.size() * sizeof(T), n);
  check_no_overlap(send, recv);
}
/// The checks of the typed in-place call; returns the block's element count.
template <class T>
std::size_t check_encoded_in_place(MPI_Comm comm, std::span<T> recv) {
  static_assert(std::is_trivially_copyable_v<T>, "the encoded all-gather needs a trivially copyable T");
  const int n = comm_size(comm);
  check_not_null(recv, "receive");
  if (recv.size() % static_cast<std::size_t>(n) != 0)
    throw Error(MPI_ERR_COUNT, "agx: in-place receive size " + std::to_string(recv.size()) +
                                   " is not a multiple of the rank count " + std::to_string(n));
  return recv.size() / static_cast<std::size_t>(n);
}
}  // namespace detail

/// Typed form: same checks as agx::Allgather<T>'s operator() and in_place().
template <class T>
EncodedResult encoded_allgather(MPI_Comm comm, std::span<const T> send, std::span<T> recv,
                                const EncodeOptions& encode, const Options& options = {}) {
  detail::check_encoded(comm, send, recv);
  return encoded_allgather_bytes(comm, send.data(), recv.data(), send.size(), sizeof(T),
                                 detail::element_kind<T>(), encode, options);
}

/// In place: rank r's block (recv.size() / N elements) is already at its place.
template <class T>
EncodedResult encoded_allgather_in_place(MPI_Comm comm, std::span<T> recv,
                                         const EncodeOptions& encode, const Options& options = {}) {
  const std::size_t count = detail::check_encoded_in_place(comm, recv);
  return encoded_allgather_bytes(comm, nullptr, recv.data(), count, sizeof(T),
                                 detail::element_kind<T>(), encode, options);
}

/// Nonblocking encoded_allgather (same checks).
template <class T>
EncodedRequest start_encoded_allgather(MPI_Comm comm, std::span<const T> send, std::span<T> recv,
                                       const EncodeOptions& encode, const Options& options = {}) {
  detail::check_encoded(comm, send, recv);
  return start_encoded_allgather_bytes(comm, send.data(), recv.data(), send.size(), sizeof(T),
                                       detail::element_kind<T>(), encode, options);
}

/// Nonblocking encoded_allgather_in_place.
template <class T>
EncodedRequest start_encoded_allgather_in_place(MPI_Comm comm, std::span<T> recv,
                                                const EncodeOptions& encode,
                                                const Options& options = {}) {
  const std::size_t count = detail::check_encoded_in_place(comm, recv);
  return start_encoded_allgather_bytes(comm, nullptr, recv.data(), count, sizeof(T),
                                       detail::element_kind<T>(), encode, options);
}

/// The v form: rank i's block is counts[i] elements at recv[displs[i]], checked exactly
/// as agx::Allgather<T>::v() checks them (same error classes).
template <class T, IntegralRange C, IntegralRange D>
EncodedResult encoded_allgatherv(MPI_Comm comm, std::span<const T> send, std::span<T> recv,
                                 const C& counts, const D& displs, const EncodeOptions& encode,
                                 const Options& options = {}) {
  static_assert(std::is_trivially_copyable_v<T>, "encoded_allgatherv needs a trivially copyable T");
  Group g(comm, options);  // the member checks of a v call, and its layout in bytes
  g.add_v(send, recv, counts, displs);
  const FusedPart& p = g.parts().front();
  return encoded_allgatherv_bytes(comm, p.buffers, p.bytes, p.offsets, sizeof(T),
                                  detail::element_kind<T>(), encode, options);
}

/// The v form in place: rank r's block is already at recv[displs[r]].
template <class T, IntegralRange C, IntegralRange D>
EncodedResult encoded_allgatherv_in_place(MPI_Comm comm, std::span<T> recv, const C& counts,
                                          const D& displs, const EncodeOptions& encode,
                                          const Options& options = {}) {
  static_assert(std::is_trivially_copyable_v<T>, "encoded_allgatherv needs a trivially copyable T");
  Group g(comm, options);
  g.add_v_in_place(recv, counts, displs);
  const FusedPart& p = g.parts().front();
  return encoded_allgatherv_bytes(comm, p.buffers, p.bytes, p.offsets, sizeof(T),
                                  detail::element_kind<T>(), encode, options);
}

/// Nonblocking encoded_allgatherv (same checks).
template <class T, IntegralRange C, IntegralRange D>
EncodedRequest start_encoded_allgatherv(MPI_Comm comm, std::span<const T> send, std::span<T> recv,
                                        const C& counts, const D& displs,
                                        const EncodeOptions& encode, const Options& options = {}) {
  static_assert(std::is_trivially_copyable_v<T>, "encoded_allgatherv needs a trivially copyable T");
  Group g(comm, options);
  g.add_v(send, recv, counts, displs);
  const FusedPart& p = g.parts().front();
  return start_encoded_allgatherv_bytes(comm, p.buffers, p.bytes, p.offsets, sizeof(T),
                                        detail::element_kind<T>(), encode, options);
}

/// Nonblocking encoded_allgatherv_in_place.
template <class T, IntegralRange C, IntegralRange D>
EncodedRequest start_encoded_allgatherv_in_place(MPI_Comm comm, std::span<T> recv, const C& counts,
                                                 const D& displs, const EncodeOptions& encode,
                                                 const Options& options = {}) {
  static_assert(std::is_trivially_copyable_v<T>, "encoded_allgatherv needs a trivially copyable T");
  Group g(comm, options);
  g.add_v_in_place(recv, counts, displs);
  const FusedPart& p = g.parts().front();
  return start_encoded_allgatherv_bytes(comm, p.buffers, p.bytes, p.offsets, sizeof(T),
                                        detail::element_kind<T>(), encode, options);
}

/// The sparse all-gather: encoded_allgather with only the sparse encoding.
template <class T>
EncodedResult sparse_allgather(MPI_Comm comm, std::span<const T> send, std::span<T> recv,
                               const Options& options = {}) {
  return encoded_allgather(comm, send, recv, EncodeOptions{.sparse = true}, options);
}

}  // namespace agx
