#pragma once
// Settings read once from the environment (documented in docs/environment.md).

#include <agx/algorithm.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace agx {

/// AGX_TEST_FLIP=<rank>:<round>: the test seam of AGX_INTEGRITY (integrity.hpp).
struct FlipSeam {
  int rank = 0;
  int round = 0;
};

struct Config {
  /// AGX_ALGO: algorithm (and parameters, "bruck:k=4") forced for calls whose options
  /// say `automatic`.
  std::optional<AlgorithmChoice> forced;
  /// AGX_ALGO's text when it is not valid, and why (reported as an error at the call).
  std::string invalid_algo;
  std::string invalid_algo_reason;
  /// AGX_MAX_MESSAGE_BYTES: largest single MPI message; bigger transfers are split.
  std::size_t max_message_bytes = default_max_message_bytes;
  /// AGX_CHECK=1: ranks agree on every call's sizes, algorithm and in-place use first.
  bool check = false;
  /// AGX_TIMEOUT: seconds a wait may make no progress before agx reports a hang; 0: off.
  double timeout_seconds = 0;
  /// AGX_TIMEOUT_ACTION: `abort` (MPI_Abort, the default) or `error` (agx::Error).
  bool timeout_abort = true;
  /// AGX_INTEGRITY=1: a CRC32C per block travels with it and is checked on receipt.
  bool integrity = false;
  /// AGX_TEST_FLIP: flip one bit of a received block (test seam, integrity.hpp).
  std::optional<FlipSeam> flip;
  /// AGX_DESCRIPTOR_CACHE: compiled schedules (message descriptors and their datatypes,
  /// descriptors.hpp) kept per communicator, least recently used out; 0: none (every
  /// call plans its messages anew).
  std::size_t descriptor_cache = default_descriptor_cache;
  /// AGX_TUNING_FILE: the tuning file's name (empty: built-in defaults); select.cpp reads it.
  std::string tuning_file;
  /// AGX_VERBOSE (is_set_flag): device calls say which path they take (lib/cuda); the
  /// interposer reads the same variable with the same rule (lib/pmpi/settings.cpp).
  bool verbose = false;
  /// Settings above whose text could not be read; an MPI_ERR_ARG at the next call.
  std::string invalid;

  static constexpr std::size_t default_descriptor_cache = 16;
  static constexpr std::size_t default_max_message_bytes = std::size_t{1} << 30;  // 1 GiB
};

/// The truthiness of an on/off variable: "1", "yes", "true", "on" (all lower case, all
/// upper case, or capitalised) are set; anything else, or unset (nullptr), is not.
bool is_set_flag(const char* text);

/// The process-wide configuration, read from the environment on first use.
const Config& config();

/// Throws agx::Error (MPI_ERR_ARG) naming the settings that could not be read.
void check_config();

}  // namespace agx
