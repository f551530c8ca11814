#include "core/tuning.hpp"

#include <agx/error.hpp>

#include "core/config.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

namespace agx {

AlgorithmChoice Tuning::measured(int ranks, int ranks_per_node, std::size_t mean_block_bytes) const {
  // Entries for exactly this shape, smallest size class that covers the call.
  for (const MeasuredBest& b : best)
    if (b.ranks == ranks && b.ranks_per_node == ranks_per_node && mean_block_bytes <= b.max_bytes)
      return b.algorithm;
  return {};
}

namespace {
std::atomic<std::size_t> parses{0};
}  // namespace

Tuning parse_tuning(const std::string& text, const std::string& source) {
  parses.fetch_add(1, std::memory_order_relaxed);
  Tuning t;
  t.source = source;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool versioned = false;
  bool line_of[2] = {false, false}, rendezvous[2] = {false, false};  // node, network
  bool copy_line = false;
  CopyRates copy_rates;
  auto bad = [&](const std::string& why) {
    throw Error(MPI_ERR_ARG, "agx: tuning file " + source + " line " + std::to_string(lineno) +
                                 ": " + why + ": '" + line + "'");
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "agx-tuning") {
      int v = 0;
      if (!(words >> v) || v != 1) bad("unsupported version");
      versioned = true;
    } else if (key == "machine" || key == "mpi" || key == "date" || key == "command") {
      t.header.push_back(line);
    } else if (key == "best") {
      MeasuredBest b;
      std::string name;
      if (!(words >> b.ranks >> b.ranks_per_node >> b.max_bytes >> name)) bad("expected: best RANKS RANKS_PER_NODE MAX_BYTES ALGORITHM");
      std::string why;
      const auto a = parse_algorithm_choice(name, &why);
      if (!a) bad(why);
      if (a->id == Algorithm::automatic) bad("'auto' is not a measured winner");
      b.algorithm = *a;
      t.best.push_back(b);
    } else if (key == "copy.rate") {
      CopyRate c;
      if (!(words >> c.bytes >> c.s_per_byte) || c.bytes == 0 || c.s_per_byte <= 0)
        bad("expected: copy.rate BYTES S_PER_BYTE (both positive)");
      if (!copy_rates.empty() && c.bytes <= copy_rates.back().bytes) bad("copy.rate sizes must increase");
      if (copy_rates.full()) bad("more than " + std::to_string(CopyRates::capacity) + " copy.rate lines");
      copy_rates.push_back(c);
    } else {
      double v = 0;
      if (!(words >> v) || v < 0) bad("expected a non-negative number");
      if (key == "node.alpha_s" || key == "node.beta_s_per_byte") line_of[0] = true;
      if (key == "network.alpha_s" || key == "network.beta_s_per_byte") line_of[1] = true;
      if (key == "node.alpha_s") t.params.node.alpha_s = v;
      else if (key == "node.beta_s_per_byte") t.params.node.beta_s_per_byte = v;
      else if (key == "node.overhead_s") t.params.node.overhead_s = v;
      else if (key == "network.overhead_s") t.params.network.overhead_s = v;
      else if (key == "network.alpha_s") t.params.network.alpha_s = v;
      else if (key == "network.beta_s_per_byte") t.params.network.beta_s_per_byte = v;
      else if (key == "node.rendezvous_s") t.params.node.rendezvous_s = v, rendezvous[0] = true;
      else if (key == "network.rendezvous_s") t.params.network.rendezvous_s = v, rendezvous[1] = true;
      else if (key == "node.eager_bytes") t.params.node.eager_bytes = static_cast<std::size_t>(v);
      else if (key == "network.eager_bytes") t.params.network.eager_bytes = static_cast<std::size_t>(v);
      else if (key == "copy_s_per_byte") t.params.copy_s_per_byte = v, copy_line = true;
      else if (key == "node_sync_s") t.params.node_sync_s = v;
      else if (key == "group.beta_s_per_byte") t.params.group_link_s_per_byte = v;
      else if (key == "compress.lz4_bytes_per_s") t.compress_lz4_bytes_per_s = v;
      else if (key == "compress.zstd_bytes_per_s") t.compress_zstd_bytes_per_s = v;
      else if (key == "group.nodes") {
        if (v != static_cast<double>(static_cast<int>(v)) || v < 1) bad("expected a whole number of nodes, 1 or more");
        t.group_nodes = static_cast<int>(v);
      }
      else bad("unknown key");
    }
  }
  if (!versioned) throw Error(MPI_ERR_ARG, "agx: tuning file " + source + " lacks the 'agx-tuning 1' line");
  // A file's own α-β line without a rendezvous step (files of earlier agx-tune) stands
  // alone: the built-in step belongs to the built-in line.
  if (line_of[0] && !rendezvous[0]) t.params.node.rendezvous_s = 0, t.params.node.eager_bytes = 0;
  if (line_of[1] && !rendezvous[1]) t.params.network.rendezvous_s = 0, t.params.network.eager_bytes = 0;
  // Likewise a file's copy rate without copy.rate points is the rate at every size.
  if (!copy_rates.empty() || copy_line) t.params.copy_rates = copy_rates;
  std::sort(t.best.begin(), t.best.end(), [](const MeasuredBest& a, const MeasuredBest& b) {
    return std::tie(a.ranks, a.ranks_per_node, a.max_bytes) < std::tie(b.ranks, b.ranks_per_node, b.max_bytes);
  });
  return t;
}

std::string format_tuning(const Tuning& t) {
  std::ostringstream out;
  out.precision(6);
  out << "agx-tuning 1\n";
  for (const auto& h : t.header) out << h << '\n';
  out << "node.alpha_s " << t.params.node.alpha_s << '\n'
      << "node.beta_s_per_byte " << t.params.node.beta_s_per_byte << '\n'
      << "node.overhead_s " << t.params.node.overhead_s << '\n'
      << "network.alpha_s " << t.params.network.alpha_s << '\n'
      << "network.overhead_s " << t.params.network.overhead_s << '\n'
      << "network.beta_s_per_byte " << t.params.network.beta_s_per_byte << '\n'
      << "node.rendezvous_s " << t.params.node.rendezvous_s << '\n'
      << "node.eager_bytes " << t.params.node.eager_bytes << '\n'
      << "network.rendezvous_s " << t.params.network.rendezvous_s << '\n'
      << "network.eager_bytes " << t.params.network.eager_bytes << '\n'
      << "copy_s_per_byte " << t.params.copy_s_per_byte << '\n';
  for (const CopyRate& c : t.params.copy_rates) out << "copy.rate " << c.bytes << ' ' << c.s_per_byte << '\n';
  out << "node_sync_s " << t.params.node_sync_s << '\n';
  if (t.group_nodes > 0)
    out << "group.nodes " << t.group_nodes << '\n'
        << "group.beta_s_per_byte " << t.params.group_link_s_per_byte << '\n';
  if (t.compress_lz4_bytes_per_s > 0) out << "compress.lz4_bytes_per_s " << t.compress_lz4_bytes_per_s << '\n';
  if (t.compress_zstd_bytes_per_s > 0) out << "compress.zstd_bytes_per_s " << t.compress_zstd_bytes_per_s << '\n';
  if (!t.best.empty()) out << "# best RANKS RANKS_PER_NODE MAX_MEAN_BLOCK_BYTES ALGORITHM (measured)\n";
  for (const auto& b : t.best)
    out << "best " << b.ranks << ' ' << b.ranks_per_node << ' ' << b.max_bytes << ' '
        << to_string(b.algorithm) << '\n';
  return out.str();
}

std::size_t tuning_parse_count() { return parses.load(std::memory_order_relaxed); }

Tuning parse_tuning_once(const std::string& text, const std::string& source) {
  static std::mutex mutex;
  static std::map<std::string, Tuning> parsed;  // by text; one entry in a normal job
  std::lock_guard lock(mutex);
  if (auto it = parsed.find(text); it != parsed.end() && it->second.source == source) return it->second;
  Tuning t = parse_tuning(text, source);
  parsed.insert_or_assign(text, t);
  return t;
}

const std::string& tuning_file_text() {
  const std::string& path = config().tuning_file;
  // The file is read once per process (by whichever rank 0 of a communicator gets here
  // first); later communicators use the same text, or report the same failure.
  static const std::optional<std::string> text = [&]() -> std::optional<std::string> {
    if (path.empty()) return std::string();
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::stringstream all;
    all << f.rdbuf();
    return all.str();
  }();
  if (!text) throw Error(MPI_ERR_FILE, "agx: cannot read AGX_TUNING_FILE " + path);
  return *text;
}

Tuning load_tuning() {
  if (config().tuning_file.empty()) return {};
  return parse_tuning_once(tuning_file_text(), config().tuning_file);
}

}  // namespace agx
