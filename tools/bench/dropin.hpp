#pragma once
// The drop-in candidate's view of agx's interposer: whether libagx_pmpi.so is loaded into
// this process (its counters agx_pmpi_calls / agx_pmpi_passthrough_calls are found with
// dlsym, docs/interposer.md) and, from the counters around one call, who took the call.

#include <string>
#include <vector>

namespace bench {

class Interposer {
 public:
  /// Looks the counters up; loaded() is false when they are not in the process.
  Interposer();
  bool loaded() const { return calls_ != nullptr && passthrough_ != nullptr; }

  /// This process's counts: per algorithm of agx's registry, and calls passed to MPI.
  struct Counts {
    std::vector<unsigned long long> calls;
    unsigned long long passthrough = 0;
  };
  Counts counts() const;

  /// Who took the calls between two snapshots: an algorithm's name when agx ran exactly
  /// one call, "mpi" when the interposer passed one call to the MPI library, "" else
  /// (not loaded, or counts that do not fit one call).
  std::string took(const Counts& before, const Counts& after) const;

 private:
  using CallsFn = unsigned long long (*)(const char*);
  using PassthroughFn = unsigned long long (*)();
  CallsFn calls_ = nullptr;
  PassthroughFn passthrough_ = nullptr;
};

}  // namespace bench
