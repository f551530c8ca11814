#pragma once
// The tuning file: measured α/β per level, copy and sync costs, and optionally the
// measured fastest algorithm per (ranks, ranks per node, size class). Written by
// agx-tune, read from AGX_TUNING_FILE (docs/tuning.md has the format).

#include <agx/algorithm.hpp>

#include "core/cost_model.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace agx {

/// A measured winner: for calls on `ranks` ranks with `ranks_per_node` ranks on the
/// largest node, and a mean block of at most `max_bytes`, `algorithm` was fastest.
struct MeasuredBest {
  int ranks = 0;
  int ranks_per_node = 0;
  std::size_t max_bytes = 0;
  AlgorithmChoice algorithm;  ///< with its parameters ("bruck:k=4" in the file)
};

struct Tuning {
  CostParams params;                ///< built-in defaults unless the file sets them
  /// Nodes per group for the cost model's group term (0: none): nodes, numbered as the
  /// placement numbers them, are grouped K at a time; needs params.group_link_s_per_byte.
  int group_nodes = 0;
  std::vector<MeasuredBest> best;   ///< sorted by (ranks, ranks_per_node, max_bytes)
  /// Compressor speeds (bytes of input per second, the slowest rank's) measured by
  /// agx-tune; 0: not in the file (lib/codec/speed.cpp measures once per process).
  double compress_lz4_bytes_per_s = 0;
  double compress_zstd_bytes_per_s = 0;
  std::string source = "built-in defaults";
  std::vector<std::string> header;  ///< machine, mpi, date, command lines of the file

  /// The measured winner for this call, or Algorithm::automatic when none applies.
  AlgorithmChoice measured(int ranks, int ranks_per_node, std::size_t mean_block_bytes) const;
};

/// Parses tuning text; throws agx::Error (MPI_ERR_ARG) naming the bad line.
Tuning parse_tuning(const std::string& text, const std::string& source);

/// Serializes (the inverse of parse_tuning, header lines included).
std::string format_tuning(const Tuning& t);

/// parse_tuning, at most once per process for each text (a communicator's tuning is
/// rank 0's text, the same for every communicator of a job): later calls with a text
/// already parsed return that result. Errors are not kept (the caller keeps those).
Tuning parse_tuning_once(const std::string& text, const std::string& source);

/// How many times parse_tuning has run in this process (the test seam of "the tuning
/// file is parsed once": test/mpi/test_settings.cpp).
std::size_t tuning_parse_count();

/// AGX_TUNING_FILE's text, read at most once per process ("" when unset); an unreadable
/// file is agx::Error (MPI_ERR_FILE), every time it is asked for.
const std::string& tuning_file_text();

/// AGX_TUNING_FILE if set (an unreadable or malformed file is an error), else built-in
/// defaults: parse_tuning_once(tuning_file_text()).
Tuning load_tuning();

}  // namespace agx
