#pragma once
// The interposer's settings, read once from the environment (docs/interposer.md):
// AGX_DISABLE, AGX_VERBOSE, AGX_SUMMARY, and its own reading of AGX_ALGO (a bad
// value is a warning and a fallback here, not an error as in the C++ API).

#include <agx/algorithm.hpp>
#include <agx/encoded.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace agx::pmpi {

struct Settings {
  /// AGX_DISABLE=1: every call goes to the MPI library untouched.
  bool disabled = false;
  /// AGX_VERBOSE=1: one line per communicator and size class naming the algorithm.
  bool verbose = false;
  /// AGX_SUMMARY=1: calls, bytes and time per algorithm, printed at MPI_Finalize.
  bool summary = false;
  /// AGX_ALGO names a concrete algorithm (with its parameters: "bruck:k=4").
  std::optional<AlgorithmChoice> forced;
  /// Why AGX_ALGO is not valid (a name or parameter it cannot read); empty when it is.
  std::string algo_error;
  /// AGX_ALGO is set to something other than "auto" (valid or not).
  bool algo_set = false;
  /// AGX_ALGO's text, for messages.
  std::string algo_text;
  /// AGX_COMPRESS: lossless compression of blocking MPI_Allgather blocks (never lossy).
  Lossless compress = Lossless::off;
  /// AGX_COMPRESS_MIN_BYTES: blocks smaller than this are never compressed.
  std::size_t compress_min_bytes = 64 * 1024;
  /// Why AGX_COMPRESS or AGX_COMPRESS_MIN_BYTES is not valid; empty when they are.
  std::string compress_error;
};

/// The process-wide settings, read on first use.
const Settings& settings();

}  // namespace agx::pmpi
