#pragma once
// Settings read once from the environment (documented in docs/environment.md).

#include <agx/algorithm.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace agx {

struct Config {
  /// AGX_ALGO: algorithm forced for calls whose options say `automatic`.
  std::optional<Algorithm> forced;
  /// AGX_ALGO's text when it names no algorithm (reported as an error at the call).
  std::string invalid_algo;
  /// AGX_MAX_MESSAGE_BYTES: largest single MPI message; bigger transfers are split.
  std::size_t max_message_bytes = default_max_message_bytes;
  /// AGX_CHECK=1: ranks agree on every call's sizes, algorithm and in-place use first.
  bool check = false;

  static constexpr std::size_t default_max_message_bytes = std::size_t{1} << 30;  // 1 GiB
};

/// The process-wide configuration, read from the environment on first use.
const Config& config();

}  // namespace agx
