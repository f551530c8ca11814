// DeviceCall: memory kinds agreed per call (a nonblocking allreduce, progressed by the
// caller's test/wait), then one of the three paths (docs/gpu.md). Once per communicator,
// in its set-up exchange, the ranks share whether any sees a GPU and the settings that
// must match. Every
// rank takes the same decisions from the same agreed inputs:
//   agreed = MAX over ranks of {has device buffers, recv not IPC-able, MPI not aware}
//   nobody has device buffers          -> false (host path, unchanged)
//   forced path (AGX_CUDA_PATH)        -> that path when it can serve, else staging
//   otherwise                          -> cheapest path by path_cost.hpp
// Ranks whose own buffers are host memory take part in aware/staging calls with the
// host executor and the same message size, which is the same traffic on the wire.

#include "cuda/device_path.hpp"

#include <agx/error.hpp>

#include "core/choose.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/mpi_check.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"
#include "cuda/backend.hpp"
#include "cuda/ipc.hpp"
#include "cuda/memory.hpp"
#include "cuda/path_cost.hpp"
#include "cuda/settings.hpp"
#include "cuda/staging.hpp"
#include "hier/hier.hpp"

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <deque>
#include <mutex>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

namespace agx::cuda {
namespace {

/// Per communicator, from its set-up exchange: whether calls agree on memory kinds.
struct CommState {
  bool device_calls = false;  ///< some rank sees a GPU and AGX_CUDA is not off
  bool settings_differ = false;
  std::mutex mutex;  ///< of `unsettled` (the progress thread may test calls too)
  std::deque<const DeviceCall*> unsettled;  ///< in call order
};

int delete_state(MPI_Comm, int, void* attr, void*) {
  delete static_cast<CommState*>(attr);
  return MPI_SUCCESS;
}

/// The settings every rank of a call must share, as one exact number.
long long settings_word(const CudaSettings& s) {
  const long long path = s.forced ? static_cast<long long>(*s.forced) + 1 : 0;
  const bool invalid_path = process_settings().invalid_of("AGX_CUDA_PATH") != nullptr;
  return (s.off ? 1 : 0) | (invalid_path ? 2 : 0) | path << 2 |
         static_cast<long long>(s.chunk_bytes) << 4;
}

int state_keyval() {
  static int keyval = MPI_KEYVAL_INVALID;
  if (keyval == MPI_KEYVAL_INVALID)
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, nullptr),
              "MPI_Comm_create_keyval");
  return keyval;
}

// The state adopt_setup_words recorded at the communicator's set-up (every context is
// made by api/context.cpp's set-up, which records it).
CommState& state_of(CommContext& ctx) {
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(ctx.comm(), state_keyval(), &attr, &found), "MPI_Comm_get_attr");
  if (!found) throw Error(MPI_ERR_INTERN, "agx: the communicator has no device state");
  return *static_cast<CommState*>(attr);
}

/// Whether this process's MPI library moves device memory itself.
bool mpi_is_cuda_aware() {
  if (const auto& forced = cuda_settings().mpi_aware) return *forced;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;  // Open MPI built without CUDA, or MPICH (no query: AGX_CUDA_AWARE_MPI=1)
#endif
}

std::optional<Path> last;
std::optional<DeviceRun> last_ran;

void announce(const CommContext& ctx, Path p, const AlgorithmChoice& a, const char* note,
              DeviceRun& ran) {
  last = p;
  ran = DeviceRun{p, a.id};
  last_ran = ran;
  static std::set<std::string> said;
  if (!config().verbose || ctx.rank() != 0) return;  // AGX_VERBOSE (core/config.hpp)
  const std::string line = std::string(to_string(p)) + "/" + full_name(a) + note;
  if (said.insert(line).second)
    std::fprintf(stderr, "agx: device buffers: path %s\n", line.c_str());
}

}  // namespace

struct DeviceCall::Run {
  virtual ~Run() = default;
  /// Advances without waiting for peers; true once this rank's part is complete.
  virtual bool test() = 0;
};

namespace {

/// A schedule on the host executor: host ranks of a device call (same piece size as
/// the device ranks), and the aware path (device pointers handed to MPI).
class ExecutionRun final : public DeviceCall::Run {
 public:
  ExecutionRun(const Schedule& s, const Buffers& b, const Layout& layout, MPI_Comm comm, int tag,
               std::size_t piece)
      : e_(s, b, layout, comm, tag, piece) {
    e_.start();
  }
  bool test() override { return e_.test(); }

 private:
  Execution e_;
};

/// A node algorithm (lib/hier) on host buffers `b` in a device call: its node schedule on
/// the round engine, as the device ranks run its staged form (StagedNodeCall), blocking
/// calls too, so that every rank of the call runs the same kind of node call.
class NodeRun final : public DeviceCall::Run {
 public:
  NodeRun(CommContext& ctx, Algorithm a, const Buffers& b, const Layout& layout)
      : node_(hier::start_node_call(ctx, a, b, layout)) {}
  bool test() override { return hier::test_node_call(*node_); }

 private:
  hier::NodeCallPtr node_;
};

/// A node algorithm on device buffers: its node schedule staged (StagedNodeCall).
class StagedNodeRun final : public DeviceCall::Run {
 public:
  StagedNodeRun(CommContext& ctx, Algorithm a, const Buffers& b, const Layout& layout,
                const StagingSettings& st)
      : call_(backend::device_ops(), backend::pinned_pool(), ctx, a, b, layout, st) {}
  bool test() override { return call_.test(); }

 private:
  StagedNodeCall call_;
};

/// A staging call (StagingCall on device buffers, HostStagingCall on host buffers).
template <class Call>
class StagingRun final : public DeviceCall::Run {
 public:
  template <class... Args>
  explicit StagingRun(Args&&... args) : call_(std::forward<Args>(args)...) {}
  bool test() override { return call_.test(); }

 private:
  Call call_;
};

/// This rank's part of an aware or staging call (`tag` taken when the call settled).
std::unique_ptr<DeviceCall::Run> start_local(CommContext& ctx, Path p, const AlgorithmChoice& choice,
                                             const Buffers& b, const Layout& layout,
                                             bool local_device, const StagingSettings& st, int tag) {
  const Algorithm a = choice.id;
  // Staging calls carry the host calls' checks (AGX_INTEGRITY, AGX_TEST_FLIP) on every
  // rank, device or host buffers; aware calls none (MPI reads device memory there).
  Checks checks = Checks::of(a);
  checks.stage = "staging, device buffers";  // named in AGX_TIMEOUT and AGX_INTEGRITY lines
  if (!local_device) {  // host buffers in a device call: the host path, same messages
    if (is_node_path(a)) return std::make_unique<NodeRun>(ctx, a, b, layout);
    if (p == Path::staging)  // in the staging call's slices
      return std::make_unique<StagingRun<HostStagingCall>>(ctx.schedule(choice), b, layout, ctx.comm(),
                                                           tag, st, checks);
    return std::make_unique<ExecutionRun>(ctx.schedule(choice), b, layout, ctx.comm(), tag,
                                          st.piece_bytes);
  }
  if (p == Path::aware && !is_node_path(a)) {
    const std::size_t own = layout.bytes(ctx.rank());
    if (!b.in_place && own > 0)
      backend::copy_sync(static_cast<std::byte*>(b.recv) + layout.offset(ctx.rank()), b.send, own);
    else
      backend::wait_caller_stream();
    return std::make_unique<ExecutionRun>(ctx.schedule(choice), Buffers{nullptr, b.recv, true},
                                          layout, ctx.comm(), tag, st.piece_bytes);
  }
  if (is_node_path(a)) return std::make_unique<StagedNodeRun>(ctx, a, b, layout, st);
  return std::make_unique<StagingRun<StagingCall>>(backend::device_ops(), backend::pinned_pool(),
                                                   ctx.staged_schedule(choice), b, layout, ctx.comm(), tag,
                                                   st, checks);
}

/// The IPC path; when some rank cannot map a peer, every rank falls back to staging
/// with a point-to-point schedule (a node algorithm would start its node call later
/// than the calls that settled meanwhile, out of call order).
class IpcRun final : public DeviceCall::Run {
 public:
  IpcRun(CommContext& ctx, const AlgorithmChoice& a, const Buffers& b, const Layout& layout,
         bool local_device, const StagingSettings& st, int tag, bool blocking, DeviceRun& ran)
      : ctx_(ctx), a_(a), b_(b), layout_(layout), local_device_(local_device), st_(st), tag_(tag),
        blocking_(blocking), ran_(ran), ipc_(ctx, b, layout, tag) {}
  bool test() override {
    if (fallback_) return fallback_->test();
    const std::optional<bool> done = ipc_.test();
    if (!done) return false;
    if (*done) {  // shared_memory's IPC schedule: every rank read every peer's block itself
      announce(ctx_, Path::ipc, AlgorithmChoice{Algorithm::shared_memory, 0}, "", ran_);
      return true;
    }
    const bool whole_blocks = blocking_ && slicing_of(layout_, st_.mirror_bytes).slices == 1;
    const AlgorithmChoice p2p =
        is_node_path(a_.id) && !whole_blocks ? AlgorithmChoice{Algorithm::ring, 0} : a_;
    announce(ctx_, Path::staging, p2p, " (ipc cannot serve)", ran_);
    fallback_ = start_local(ctx_, Path::staging, p2p, b_, layout_, local_device_, st_, tag_);
    return fallback_->test();
  }

 private:
  CommContext& ctx_;
  AlgorithmChoice a_;
  Buffers b_;
  Layout layout_;
  bool local_device_;
  StagingSettings st_;
  int tag_;
  bool blocking_;
  DeviceRun& ran_;
  IpcCall ipc_;
  std::unique_ptr<DeviceCall::Run> fallback_;
};

}  // namespace

SetupWord own_setup_word() {
  SetupWord w;
  if (!built_with_cuda()) return w;
  const CudaSettings& s = cuda_settings();
  w.device = device_count() > 0 ? 1 : 0;
  w.settings = settings_word(s);
  w.staging = static_cast<std::int64_t>(s.staging_bytes);
  return w;
}

void adopt_setup_words(CommContext& ctx, const std::vector<SetupWord>& all) {
  auto st = std::make_unique<CommState>();
  for (const SetupWord& w : all) {
    st->device_calls = st->device_calls || w.device != 0;
    st->settings_differ = st->settings_differ || w.settings != all.front().settings ||
                          w.staging != all.front().staging;
  }
  st->device_calls = st->device_calls && !cuda_settings().off;
  ctx.set_host_only(!st->device_calls && !st->settings_differ);
  check_mpi(MPI_Comm_set_attr(ctx.comm(), state_keyval(), st.get()), "MPI_Comm_set_attr");
  st.release();  // the attribute's delete callback frees it with the communicator
}

std::optional<Path> last_path() { return last; }

DeviceCall::DeviceCall(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                       const Layout& layout, HostStart host_start)
    : ctx_(ctx), choice_(a), buffers_(buffers), layout_(layout), host_start_(std::move(host_start)) {
  if (!built_with_cuda()) {
    settle_host();
    return;
  }
  CommState& state = state_of(ctx);
  if (state.settings_differ)
    throw Error(MPI_ERR_ARG,
                "agx: AGX_CUDA, AGX_CUDA_PATH, AGX_CUDA_CHUNK_BYTES and AGX_CUDA_STAGING_BYTES must "
                "be the same on every rank of the communicator; they differ");
  if (!state.device_calls) {
    settle_host();
    return;
  }
  const int me = ctx.rank();
  bool any_bytes = false;
  for (int r = 0; r < layout.nranks() && !any_bytes; ++r) any_bytes = layout.bytes(r) > 0;
  const MemoryKind send_kind = !buffers.in_place && layout.bytes(me) > 0
                                   ? memory_kind(buffers.send) : MemoryKind::host;
  const MemoryKind recv_kind = any_bytes ? memory_kind(buffers.recv) : MemoryKind::host;
  local_device_ = needs_device_path(send_kind) || needs_device_path(recv_kind);
  if (local_device_) device_ = backend::current_device();
  mine_[0] = local_device_ ? 1 : 0;
  mine_[1] = recv_kind != MemoryKind::device ? 1 : 0;
  mine_[2] = mpi_is_cuda_aware() ? 0 : 1;
  check_mpi(MPI_Iallreduce(mine_, agreed_, 3, MPI_INT, MPI_MAX, ctx.comm(), &request_),
            "MPI_Iallreduce");
  const std::lock_guard lock(state.mutex);
  state.unsettled.push_back(this);
  queued_ = true;
}

DeviceCall::~DeviceCall() {
  if (queued_) {
    CommState& state = state_of(ctx_);
    const std::lock_guard lock(state.mutex);
    state.unsettled.erase(std::find(state.unsettled.begin(), state.unsettled.end(), this));
  }
  run_.reset();  // an unfinished path withdraws its requests first
  // A collective request cannot be cancelled: one left open (an exception elsewhere)
  // is completed, and every rank posted it.
  if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
}

void DeviceCall::settle_host() {
  result_ = false;
  if (host_start_) host_start_();
}

std::optional<bool> DeviceCall::test() {
  if (result_) return result_;
  if (!run_) {
    if (request_ != MPI_REQUEST_NULL) {
      int done = 0;
      check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return std::nullopt;
    }
    {  // the calls of a communicator settle in call order
      CommState& state = state_of(ctx_);
      const std::lock_guard lock(state.mutex);
      if (state.unsettled.empty() || state.unsettled.front() != this) return std::nullopt;
      state.unsettled.pop_front();
      queued_ = false;
    }
    settle();
    if (!run_) return result_;
  }
  // Whichever thread advances the call (the caller's, or AGX_PROGRESS_THREAD's, which
  // starts on device 0) does its CUDA work on the caller's device.
  if (local_device_) backend::set_device(device_);
  if (!run_->test()) return std::nullopt;
  run_.reset();
  result_ = true;
  return result_;
}

void DeviceCall::settle() {
  if (agreed_[0] == 0) {  // nobody has device buffers
    settle_host();
    return;
  }
  if (const InvalidSetting* bad = process_settings().invalid_of("AGX_CUDA_PATH"))
    throw Error(MPI_ERR_ARG, "agx: " + bad->message());
  const CudaSettings& s = cuda_settings();
  CommContext& ctx = ctx_;
  const Layout& layout = layout_;
  if (local_device_) backend::set_device(device_);  // the caller's, on any thread

  PathOptions allowed;
  // Node algorithms run on host memory (lib/hier's segment): never on the aware path;
  // such a call stages, and is priced and reported as staging.
  allowed.aware = agreed_[2] == 0 && !is_node_path(choice_.id);
  allowed.ipc = agreed_[1] == 0 && ctx.selector().placement().nodes() == 1 && ctx.size() > 1;
  StagingSettings st;
  st.chunk_bytes = s.chunk_bytes;
  st.piece_bytes = std::min(config().max_message_bytes, s.chunk_bytes);
  st.mirror_bytes = s.staging_bytes;

  Path p = Path::staging;
  if (s.forced) {
    p = *s.forced;
    if ((p == Path::aware && !allowed.aware) || (p == Path::ipc && !allowed.ipc)) p = Path::staging;
  } else {
    // Every algorithm is priced as planned: staged, its schedule with its device copies
    // (predict_staged; a node algorithm's node schedule with its puts and gets).
    const Placement& placement = ctx.selector().placement();
    ScheduleTimes t;
    t.schedule_s = predict_algorithm(choice_, layout, placement, ctx.selector().tuning().params,
                                     buffers_.in_place, ctx.selector().stage());
    CostParams staged = ctx.selector().tuning().params;
    staged.device = device_level();
    staged.device_chunk_bytes = st.chunk_bytes;
    t.staged_s = predict_staged(choice_, layout, placement, staged, buffers_.in_place, ctx.selector().stage());
    if (allowed.ipc) {  // the IPC schedule, priced as planned (path_cost.hpp)
      CostParams ipc = ctx.selector().tuning().params;
      ipc.device_peer = device_peer_level();
      t.ipc_s = predict_ipc(layout, placement, ipc, buffers_.in_place);
    }
    p = choose_path(allowed, t, layout);
  }
  const int tag = ctx.next_tag();  // taken here, in call order, whatever runs
  const bool blocking = !host_start_;
  AlgorithmChoice a = choice_;
  // lib/hier's algorithms take whole blocks and run on the staging mirror: where the
  // mirror would exceed the staging bound, ring runs instead, in slices under staging
  // (the same on every rank).
  if (p != Path::ipc && is_node_path(a.id) && slicing_of(layout, st.mirror_bytes).slices > 1)
    a = AlgorithmChoice{Algorithm::ring, 0};
  if (p == Path::ipc) {
    run_ = std::make_unique<IpcRun>(ctx, a, buffers_, layout, local_device_, st, tag, blocking, ran_);
    return;
  }
  announce(ctx, p, a, s.forced && *s.forced != p ? " (forced path cannot serve)" : "", ran_);
  run_ = start_local(ctx, p, a, buffers_, layout, local_device_, st, tag);
}

std::optional<DeviceRun> DeviceCall::ran() const {
  if (result_ && *result_) return ran_;
  return std::nullopt;
}

std::optional<DeviceRun> last_run() { return last_ran; }

std::optional<DeviceRun> run_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                                    const Layout& layout) {
  // Host-only jobs (no CUDA built, or no rank sees a GPU) settle at once: no call object
  // (it copies the layout), nothing allocated on the blocking path.
  if (!built_with_cuda() || ctx.host_only()) return std::nullopt;
  DeviceCall call(ctx, a, buffers, layout);
  progress_until([&] { return call.test().has_value(); });
  return call.ran();
}

bool host_only(CommContext& ctx) { return !built_with_cuda() || ctx.host_only(); }

bool run_if_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                   const Layout& layout) {
  return run_device(ctx, a, buffers, layout).has_value();
}

}  // namespace agx::cuda
