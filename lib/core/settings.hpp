#pragma once
// Every AGX_* environment variable agx reads, parsed once per process in settings.cpp
// (docs/environment.md lists them). Plain data, one section per part of the library;
// the old accessors (config(), hier::settings(), cuda::cuda_settings(), pmpi::settings())
// are one-line aliases to these sections.
//
// One error policy: a value that cannot be read goes into `invalid` (variable, text,
// reason) and its section keeps the default. check_config() (config.hpp) raises every
// entry as MPI_ERR_ARG at the next call of the C++ API or the interposer; AGX_ALGO is
// the one exception, raised only by the calls that read it (an `auto` C++ call: error;
// the interposer: one warning, then the automatic choice).

#include <agx/algorithm.hpp>
#include <agx/encoded.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agx {

/// AGX_TEST_FLIP=<rank>:<round>: the test seam of AGX_INTEGRITY (integrity.hpp).
struct FlipSeam {
  int rank = 0;
  int round = 0;
};

/// AGX_TEST_CORRUPT_BLOCK=<rank>:<flip|lie|truncate|huge> (lib/codec/encoded.cpp).
struct CorruptSeam {
  int rank = 0;
  std::string kind;
};

/// AGX_TEST_KILL_SEGMENT=<local rank>:<created|mapped|agreed>:<n> (lib/hier/shm_segment.cpp);
/// point 0, 1, 2 in that order.
struct KillSeam {
  int local = -1, point = -1;
  unsigned n = 0;
};

/// A setting whose text could not be read: its section keeps the default.
struct InvalidSetting {
  std::string variable;  ///< "AGX_TIMEOUT"
  std::string text;      ///< the value as given
  std::string reason;    ///< "is not a number of seconds (0: off)"

  /// "AGX_TIMEOUT='x' is not a number of seconds (0: off)".
  std::string message() const { return variable + "='" + text + "' " + reason; }
};

/// lib/core: algorithm choice, messages, checks and reliability, nonblocking progress.
struct CoreSettings {
  /// AGX_ALGO: algorithm (and parameters, "bruck:k=4") forced for calls whose options
  /// say `automatic`; AGX_ALGO=auto leaves it unset.
  std::optional<AlgorithmChoice> forced;
  /// AGX_ALGO's text as given (empty: unset); for messages.
  std::string algo_text;
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
  /// AGX_TEST_SPLIT_FLAGS=1: node schedules run split_flags'd (test seam, schedule.hpp).
  bool split_flags = false;
  /// AGX_TEST_CORRUPT_BLOCK: damage one rank's encoded block (test seam).
  std::optional<CorruptSeam> corrupt;
  /// AGX_DESCRIPTOR_CACHE: compiled schedules kept per communicator (descriptors.hpp),
  /// least recently used out; 0: none.
  std::size_t descriptor_cache = default_descriptor_cache;
  /// AGX_TUNING_FILE: the tuning file's name (empty: built-in defaults); tuning.cpp reads
  /// and parses it once per process.
  std::string tuning_file;
  /// AGX_COMPRESS_BYTES_PER_S: the compressor speed `Lossless::automatic` weighs.
  std::optional<double> compress_bytes_per_s;
  /// AGX_PROGRESS_THREAD=1: a progress thread for nonblocking calls.
  bool progress_thread = false;
  /// AGX_VERBOSE (is_set_flag): device calls and the interposer say what they ran.
  bool verbose = false;

  static constexpr std::size_t default_descriptor_cache = 16;
  static constexpr std::size_t default_max_message_bytes = std::size_t{1} << 30;  // 1 GiB
};

/// lib/hier: the shared-memory and hierarchical paths (docs/hierarchy.md).
struct NodeSettings {
  /// AGX_HIER_INTER: the inter-node schedule of `hierarchical` ("bruck:k=4" takes
  /// parameters); unset: the rule of hier_allgather.cpp.
  std::optional<AlgorithmChoice> inter;
  /// AGX_HIER_LEADERS: leaders per node (1 … 1024; capped at the smallest node).
  int leaders = 1;
  /// AGX_SHM_CHUNK_BYTES: copy-in/copy-out chunk of large blocks (4 KiB … 1 GiB).
  std::size_t chunk_bytes = 64 * 1024;
  bool chunk_set = false;  ///< AGX_SHM_CHUNK_BYTES given (else whole blocks when oversubscribed)
  /// AGX_CMA: a number; 0 forbids the single-copy path.
  bool cma = true;
  /// AGX_CMA_MIN_BYTES; unset: decided by the setup probe.
  std::optional<std::size_t> cma_min_bytes;
  /// AGX_WAIT: how a rank waits for its node's flags (wait.hpp).
  enum class Wait { automatic, yield, sleep } wait = Wait::automatic;
  /// AGX_NODE_DETECT=mpi (default host).
  bool node_detect_mpi = false;
  /// AGX_VIRTUAL_NODES and AGX_VIRTUAL_NODE_SIZE texts (empty: unset), parsed per
  /// communicator by virtual_nodes.cpp (they depend on its size).
  std::string virtual_nodes;
  std::string virtual_node_size;
  /// AGX_DIRECT_WRITE: anything but 0 allows direct write (direct_write.cpp).
  bool direct_write = true;
  /// AGX_DIRECT_WRITE_MIN_BYTES: smallest mean block direct write serves.
  std::size_t direct_write_min_bytes = 256 * 1024;
  /// AGX_TEST_KILL_SEGMENT (test seam).
  KillSeam kill_segment;
};

/// The three device paths (docs/gpu.md).
enum class DevicePath { aware, staging, ipc };

constexpr std::string_view to_string(DevicePath p) {
  return p == DevicePath::aware ? "aware" : p == DevicePath::staging ? "staging" : "ipc";
}

/// Parses a path name; nullopt when unknown.
std::optional<DevicePath> parse_device_path(std::string_view name);

/// lib/cuda: device buffers (docs/gpu.md).
struct DeviceSettings {
  /// AGX_CUDA_PATH=aware|staging|ipc forces a path (auto when unset or "auto").
  std::optional<DevicePath> forced;
  /// AGX_CUDA_CHUNK_BYTES: staging chunk and message size of device calls (1 … 1 GiB).
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// AGX_CUDA_STAGING_BYTES: most pinned bytes of one staging call's mirror (4 KiB … 1 TiB).
  std::size_t staging_bytes = std::size_t{64} << 20;
  /// AGX_CUDA_AWARE_MPI=0|1: overrides the query of the MPI library (MPICH has none).
  std::optional<bool> mpi_aware;
  /// AGX_CUDA=off (or 0): promise that no buffer is device memory.
  bool off = false;
};

/// lib/pmpi: the interposer's own variables (docs/interposer.md). AGX_ALGO and
/// AGX_VERBOSE are read from the core section, the same as the C++ API's.
struct InterposerSettings {
  /// AGX_DISABLE (is_set_flag): every call goes to the MPI library untouched.
  bool disabled = false;
  /// AGX_SUMMARY (is_set_flag): calls, bytes and time per algorithm at MPI_Finalize.
  bool summary = false;
  /// AGX_COMPRESS: lossless compression of blocking MPI_Allgather blocks.
  Lossless compress = Lossless::off;
  /// AGX_COMPRESS_MIN_BYTES: blocks smaller than this are never compressed.
  std::size_t compress_min_bytes = 64 * 1024;
  /// AGX_ALLOC_MEM: anything but 0 serves MPI_Alloc_mem from agx's shared regions.
  bool alloc_mem = true;
};

struct ProcessSettings {
  CoreSettings core;
  NodeSettings node;
  DeviceSettings device;
  InterposerSettings interposer;
  /// Every setting that could not be read, in the order they are read.
  std::vector<InvalidSetting> invalid;

  /// The entry of `variable`; nullptr when it was read (or unset).
  const InvalidSetting* invalid_of(std::string_view variable) const;
  /// "agx: A='x' is not ...; B='y' is not ..." of every entry but AGX_ALGO; empty when none.
  std::string invalid_message() const;
};

/// Looks a variable up: its text, or nullptr when unset.
using Environment = std::function<const char*(const char*)>;

/// Reads every variable through `env` (a pure function of it: the unit tests pass a map).
ProcessSettings read_settings(const Environment& env);

namespace detail {
/// Set once the settings are read (settings.cpp), then never changed.
extern std::atomic<const ProcessSettings*> read_once;
const ProcessSettings& read_process_settings();  ///< reads them (once) and sets read_once
}  // namespace detail

/// The process-wide settings, read from the real environment on first use. Inline: the
/// hot path reads them several times per call (one load each, not a call and a guard).
inline const ProcessSettings& process_settings() {
  if (const ProcessSettings* s = detail::read_once.load(std::memory_order_acquire)) return *s;
  return detail::read_process_settings();
}

/// The truthiness of an on/off variable: "1", "yes", "true", "on" (all lower case, all
/// upper case, or capitalised) are set; anything else, or unset (nullptr), is not.
bool is_set_flag(const char* text);

}  // namespace agx
