#pragma once
// Values of the tools' command lines (agx-bench, agx-info, agx-tune, agx-sim), read with
// CLI11: a value is taken whole or refused as a CLI::ValidationError naming the option,
// which the tool prints with exit status 2. Header-only; the tools only, never libagx.

#include <CLI/CLI.hpp>

#include <charconv>
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
