#pragma once
// Values of the tools' command lines (agx-bench, agx-info, agx-tune, agx-sim), read with
// CLI11: a value is taken whole or refused as a CLI::ValidationError naming the option,
// which the tool prints with exit status 2. Header-only; the tools only, never libagx.

#include <CLI/CLI.hpp>

#include <charconv>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

namespace agx_tools {

/// The comma-separated items of `text`; empty items are skipped ("8,,16," is 8, 16).
inline std::vector<std::string> split(const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t end = text.find(sep, at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

/// The whole of `text` as a T (integers: digits only, no sign, space or suffix).
template <class T>
T number(const std::string& option, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || stop != end)
    throw CLI::ValidationError(option, "not a number: '" + text + "'");
  return value;
}

/// A size in bytes: digits, then optionally K, M or G (powers of 1024, either case) with
/// or without "B"/"iB" after it, or "B" alone: "4096", "16M", "64KiB", "1G". agx-bench's
/// sizes and agx-tune's --max-bytes.
inline std::size_t parse_bytes(const std::string& option, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw CLI::ValidationError(option, "not a size: '" + text + "'");
  const auto value = number<unsigned long long>(option, text.substr(0, digits));
  std::string suffix = text.substr(digits);
  unsigned shift = 0;
  if (!suffix.empty() && std::string("KkMmGg").find(suffix[0]) != std::string::npos) {
    shift = suffix[0] == 'K' || suffix[0] == 'k' ? 10 : suffix[0] == 'M' || suffix[0] == 'm' ? 20 : 30;
    suffix.erase(0, 1);
    if (suffix == "iB" || suffix == "B") suffix.clear();
  } else if (suffix == "B") {
    suffix.clear();
  }
  if (!suffix.empty()) throw CLI::ValidationError(option, "not a size: '" + text + "'");
  if (value > (std::numeric_limits<std::size_t>::max() >> shift))
    throw CLI::ValidationError(option, "too large: '" + text + "'");
  return static_cast<std::size_t>(value) << shift;
}

/// Every comma-separated item of `text` as a T; `want` items exactly unless 0.
template <class T>
std::vector<T> numbers(const std::string& option, const std::string& text, std::size_t want = 0) {
  std::vector<T> out;
  for (const std::string& item : split(text)) out.push_back(number<T>(option, item));
  if (want != 0 && out.size() != want)
    throw CLI::ValidationError(option, "needs " + std::to_string(want) +
                                           " comma-separated numbers, not '" + text + "'");
  return out;
}

}  // namespace agx_tools
