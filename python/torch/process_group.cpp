// agx::torch::ProcessGroup (process_group.hpp).

#include "process_group.hpp"

#include "mpi_types.hpp"

#include <agx/bytes.hpp>
#include <agx/fused.hpp>
#include <agx/request.hpp>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>

namespace agx::torch {

namespace {

constexpr int kGroupTag = 0x6167;  // MPI_Comm_create_group's tag ("ag")
MPI_Comm torch_world = MPI_COMM_NULL;  // MPI_COMM_WORLD in torch's rank order

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  TORCH_CHECK(false, "agx: ", what, " failed: ", std::string(text, static_cast<std::size_t>(len)));
}

int comm_rank(MPI_Comm c) {
  int r = 0;
  mpi_check(MPI_Comm_rank(c, &r), "MPI_Comm_rank");
  return r;
}
int comm_size(MPI_Comm c) {
  int n = 0;
  mpi_check(MPI_Comm_size(c, &n), "MPI_Comm_size");
  return n;
}

std::size_t nbytes(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * static_cast<std::size_t>(t.element_size());
}

int int_count(std::size_t n, const char* what) {
  TORCH_CHECK(n <= static_cast<std::size_t>(INT_MAX), "agx: ", what, ": a count of ", n,
              " exceeds what one call of the MPI library takes (2^31 - 1 elements, or bytes "
              "for the calls that move bytes)");
  return static_cast<int>(n);
}

/// Tensors for the MPI library's operations live in host memory.
void host_only(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "agx: ", what, " of a tensor on ", t.device(),
              ": the agx backend hands this operation to the MPI library, for CPU tensors "
              "only (the all-gather calls take device tensors in a CUDA build)");
}

/// The all-gathers take host tensors, and device tensors where agx is built with CUDA:
/// the current stream is synchronized first, so that the data agx reads is written.
void ready_for_agx(const at::Tensor& t, const char* what) {
  if (t.device().is_cpu()) return;
#ifdef AGX_TORCH_DEVICE
  if (t.device().is_cuda()) {
    c10::impl::VirtualGuardImpl guard(t.device().type());
    guard.synchronizeStream(guard.getStream(t.device()));
    return;
  }
#endif
#ifdef AGX_TORCH_DEVICE
  constexpr const char* takes = ": agx takes CPU and CUDA tensors";
#else
  constexpr const char* takes = ": this agx is built without CUDA, so it takes CPU tensors only";
#endif
  TORCH_CHECK(false, "agx: ", what, " of a tensor on ", t.device(), takes);
}

void same_kind(const at::Tensor& t, const at::Tensor& ref, const char* what, const char* name,
               std::size_t index) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), "agx: ", what, ": ", name, "[", index,
                   "] is ", c10::toString(t.scalar_type()), ", the input ",
                   c10::toString(ref.scalar_type()));
  TORCH_CHECK(t.device() == ref.device(), "agx: ", what, ": ", name, "[", index, "] is on ",
              t.device(), ", the input on ", ref.device());
}

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto* a0 = static_cast<const char*>(a);
  const auto* b0 = static_cast<const char*>(b);
  return an != 0 && bn != 0 && a0 < b0 + bn && b0 < a0 + an;
}

}  // namespace

/// Byte tensors handed out for staging and given back when their call ends: at most
/// kEntries kept, kBytes in all, the oldest given back leaving first; a request takes the
/// smallest kept one that holds it and is at most twice its size, else a new one.
class StagingPool {
 public:
  at::Tensor take(std::size_t bytes, const at::TensorOptions& options) {
    {
      std::lock_guard lock(mutex_);
      auto best = kept_.end();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        const auto size = static_cast<std::size_t>(it->numel());
        if (it->device() == options.device() && size >= bytes && size <= 2 * bytes + 4096 &&
            (best == kept_.end() || size < static_cast<std::size_t>(best->numel())))
          best = it;
      }
      if (best != kept_.end()) {
        at::Tensor t = std::move(*best);
        kept_.erase(best);
        return t;
      }
    }
    return at::empty({static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))},
                     options.dtype(at::kByte));
  }
  /// Keeps `t` as the newest; the oldest kept ones go while more than kEntries or kBytes
  /// are kept (a working set of sizes stays, not only the sizes seen first).
  void give(at::Tensor t) {
    std::lock_guard lock(mutex_);
    if (static_cast<std::size_t>(t.numel()) > kBytes) return;
    kept_.push_back(std::move(t));
    std::size_t total = 0;
    for (const auto& k : kept_) total += static_cast<std::size_t>(k.numel());
    while (kept_.size() > kEntries || total > kBytes) {
      total -= static_cast<std::size_t>(kept_.front().numel());
      kept_.erase(kept_.begin());
    }
  }

 private:
  static constexpr std::size_t kEntries = 4, kBytes = std::size_t{256} << 20;
  std::mutex mutex_;
  std::vector<at::Tensor> kept_;
};

namespace {

/// One all-gather's buffers and layout in bytes. The output tensors are addressed where
/// they are when they lie in one storage, dense and apart (a list of chunks of one tensor,
/// the output of all_gather_into_tensor); else the call gathers into a staging buffer and
/// copy_out() copies the blocks into them.
struct Gather {
  agx::Buffers buffers;
  std::vector<std::size_t> bytes, offsets;
  at::Tensor input, staging;
  std::vector<at::Tensor> outs;
  std::shared_ptr<StagingPool> pool;

  agx::Layout layout() const {
    const std::size_t b = bytes.empty() ? 0 : bytes.front();
    bool uniform = true;
    for (std::size_t i = 0; i < bytes.size() && uniform; ++i)
      uniform = bytes[i] == b && offsets[i] == i * b;
    return uniform ? agx::Layout::uniform(static_cast<int>(bytes.size()), b)
                   : agx::Layout::varying(bytes, offsets);
  }
  void copy_out() const {
    if (!staging.defined()) return;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      if (bytes[i] == 0) continue;
      outs[i].copy_(staging.narrow(0, static_cast<std::int64_t>(offsets[i]),
                                   static_cast<std::int64_t>(bytes[i]))
                        .view(outs[i].scalar_type())
                        .view(outs[i].sizes()));
    }
  }
  /// Where agx writes: "in place" (the input is this rank's output), "direct" (the
  /// outputs where they are), "staging" (a staging buffer, then copies).
  std::string way() const {
    return staging.defined() ? "staging" : buffers.in_place ? "in place" : "direct";
  }
  /// copy_out(), then the staging buffer goes back to the pool.
  void finish() {
    copy_out();
    if (!staging.defined() || !pool) return;
    if (!staging.device().is_cpu()) {  // the copies are queued on the stream: let them run
      c10::impl::VirtualGuardImpl guard(staging.device().type());
      guard.synchronizeStream(guard.getStream(staging.device()));
    }
    pool->give(std::move(staging));
  }
};

std::shared_ptr<Gather> plan_gather(const at::Tensor& input, const std::vector<at::Tensor>& outs,
                                    int rank, const std::shared_ptr<StagingPool>& pool) {
  auto g = std::make_shared<Gather>();
  g->input = input.contiguous();
  ready_for_agx(g->input, "all-gather");  // device: the stream synchronized after the copy
  g->outs = outs;
  const std::size_t n = outs.size();
  g->bytes.resize(n);
  g->offsets.resize(n);
  for (std::size_t i = 0; i < n; ++i) g->bytes[i] = nbytes(outs[i]);

  // Addressed where they are?
  bool direct = true;
  const char* base = nullptr;
  for (std::size_t i = 0; i < n && direct; ++i) {
    if (g->bytes[i] == 0) continue;
    direct = outs[i].is_contiguous() && outs[i].storage().is_alias_of(outs[0].storage());
    const char* p = static_cast<const char*>(outs[i].data_ptr());
    if (base == nullptr || p < base) base = p;
  }
  if (direct && base != nullptr) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n; ++i) {
      g->offsets[i] = g->bytes[i] == 0 ? 0
                                       : static_cast<std::size_t>(
                                             static_cast<const char*>(outs[i].data_ptr()) - base);
      if (g->bytes[i] != 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return g->offsets[a] < g->offsets[b]; });
    for (std::size_t k = 1; k < order.size() && direct; ++k)
      direct = g->offsets[order[k - 1]] + g->bytes[order[k - 1]] <= g->offsets[order[k]];
  }
  const auto r = static_cast<std::size_t>(rank);
  const bool in_place = direct && g->bytes[r] != 0 &&
                        g->input.data_ptr() == outs[r].data_ptr();
  if (direct && base != nullptr && !in_place) {
    // The input must not overlap the blocks agx writes.
    for (std::size_t i = 0; i < n && direct; ++i)
      direct = !overlaps(g->input.data_ptr(), nbytes(g->input), outs[i].data_ptr(), g->bytes[i]);
  }
  if (direct && base != nullptr) {
    g->buffers = {in_place ? nullptr : g->input.data_ptr(), const_cast<char*>(base), in_place};
    return g;
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    g->offsets[i] = total;
    total += g->bytes[i];
  }
  g->pool = pool;
  g->staging = pool->take(total, g->input.options());
  g->buffers = {g->input.data_ptr(), g->staging.data_ptr(), false};
  return g;
}

bool check_from_environment() {
  const char* v = std::getenv("AGX_CHECK");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

// --- groups -------------------------------------------------------------------------

c10::intrusive_ptr<ProcessGroup> ProcessGroup::create_world(int rank, int size) {
  const int world = comm_size(MPI_COMM_WORLD);
  TORCH_CHECK(size == world, "agx: the default group has ", size, " ranks but MPI_COMM_WORLD has ",
              world, ": launch one process per rank with mpirun (or srun)");
  TORCH_CHECK(rank >= 0 && rank < size, "agx: rank ", rank, " is outside the group of ", size);
  MPI_Comm comm = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm), "MPI_Comm_split");
  if (comm_rank(comm) != rank) {  // two processes with one torch rank
    MPI_Comm_free(&comm);
    TORCH_CHECK(false, "agx: torch rank ", rank, " is given to more than one process");
  }
  // The numbering of this default group is the one later groups use (a default group
  // made again after destroy_process_group may number the ranks otherwise).
  if (torch_world != MPI_COMM_NULL) MPI_Comm_free(&torch_world);
  mpi_check(MPI_Comm_dup(comm, &torch_world), "MPI_Comm_dup");
  return c10::make_intrusive<ProcessGroup>(comm);
}

c10::intrusive_ptr<ProcessGroup> ProcessGroup::create_group(const std::vector<int64_t>& ranks,
                                                            int rank) {
  MPI_Comm parent = torch_world != MPI_COMM_NULL ? torch_world : MPI_COMM_WORLD;
  const int parent_size = comm_size(parent);
  std::vector<int> members;
  for (const auto r : ranks) {
    TORCH_CHECK(r >= 0 && r < parent_size, "agx: group rank ", r, " is outside the world of ",
                parent_size);
    members.push_back(static_cast<int>(r));
  }
  MPI_Group all = MPI_GROUP_NULL, some = MPI_GROUP_NULL;
  mpi_check(MPI_Comm_group(parent, &all), "MPI_Comm_group");
  mpi_check(MPI_Group_incl(all, static_cast<int>(members.size()), members.data(), &some),
            "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(parent, some, kGroupTag, &comm);
  MPI_Group_free(&some);
  MPI_Group_free(&all);
  mpi_check(rc, "MPI_Comm_create_group");
  TORCH_CHECK(comm != MPI_COMM_NULL, "agx: this process is not a member of the new group");
  TORCH_CHECK(comm_rank(comm) == rank, "agx: this process is rank ", comm_rank(comm),
              " of the new group's communicator, torch says ", rank);
  return c10::make_intrusive<ProcessGroup>(comm);
}

ProcessGroup::ProcessGroup(MPI_Comm comm)
    : c10d::ProcessGroup(comm_rank(comm), comm_size(comm)),
      comm_(comm),
      staging_(std::make_shared<StagingPool>()) {
  check_ = check_from_environment();
  try {
    mpi_check(MPI_Comm_dup(comm_, &mpi_), "MPI_Comm_dup");
    // Sets agx up on the communicator now, while every rank makes the group (collective),
    // so that the first all-gather is agx's and no start waits for another rank.
    agx::choose_algorithm(comm_, agx::Layout::uniform(getSize(), 1));
  } catch (...) {  // (the destructor does not run for a constructor that throws)
    if (mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
    MPI_Comm_free(&comm_);
    throw;
  }
}

ProcessGroup::~ProcessGroup() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void ProcessGroup::served(const char* what, const std::string& algorithm, const std::string& way) {
  std::lock_guard lock(served_mutex_);
  ++calls_[what];
  if (!algorithm.empty()) {
    last_algorithm_ = algorithm;
    last_way_ = way;
  }
}

std::map<std::string, std::uint64_t> ProcessGroup::calls() const {
  std::lock_guard lock(served_mutex_);
  return calls_;
}

std::string ProcessGroup::last_algorithm() const {
  std::lock_guard lock(served_mutex_);
  return last_algorithm_;
}

std::string ProcessGroup::last_way() const {
  std::lock_guard lock(served_mutex_);
  return last_way_;
}

void ProcessGroup::agree(const char* what, at::ScalarType type, std::int64_t count,
                         const std::vector<std::int64_t>& expected, std::int64_t root) {
  if (!check_) return;
  const int n = getSize();
  const std::size_t width = 4 + static_cast<std::size_t>(n);
  std::vector<std::int64_t> mine(width, -1), all(width * static_cast<std::size_t>(n));
  mine[0] = static_cast<std::int64_t>(std::hash<std::string>{}(what) & 0x7fffffff);
  mine[1] = static_cast<std::int64_t>(type);
  mine[2] = count;
  mine[3] = root;
  std::copy(expected.begin(), expected.end(), mine.begin() + 4);
  mpi_check(MPI_Allgather(mine.data(), static_cast<int>(width), MPI_INT64_T, all.data(),
                          static_cast<int>(width), MPI_INT64_T, mpi_),
            "MPI_Allgather (AGX_CHECK)");
  auto at = [&](int r, std::size_t k) { return all[static_cast<std::size_t>(r) * width + k]; };
  for (int r = 0; r < n; ++r) {
    TORCH_CHECK(at(r, 0) == at(0, 0), "agx: ", what, ": rank ", r,
                " makes another call than rank 0 (calls out of order)");
    TORCH_CHECK(at(r, 3) == at(0, 3), "agx: ", what, ": rank ", r, " names root ", at(r, 3),
                ", rank 0 root ", at(0, 3));
    TORCH_CHECK_TYPE(at(r, 1) == at(0, 1), "agx: ", what, ": rank ", r, " passes ",
                     c10::toString(static_cast<at::ScalarType>(at(r, 1))), ", rank 0 ",
                     c10::toString(static_cast<at::ScalarType>(at(0, 1))));
  }
  for (int r = 0; r < n; ++r) {
    if (expected.empty()) {
      TORCH_CHECK(at(r, 2) == at(0, 2), "agx: ", what, ": rank ", r, " passes ", at(r, 2),
                  " elements, rank 0 passes ", at(0, 2));
      continue;
    }
    for (int i = 0; i < n; ++i)
      TORCH_CHECK(at(r, 4 + static_cast<std::size_t>(i)) == at(i, 2), "agx: ", what, ": rank ", r,
                  "'s output for rank ", i, " holds ", at(r, 4 + static_cast<std::size_t>(i)),
                  " elements, but rank ", i, " sends ", at(i, 2));
  }
}

// --- agx's all-gather ---------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const char* what = "all_gather";
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "agx: ", what,
              " takes one input tensor and one output list (one device per process)");
  const at::Tensor& in = inputs[0];
  auto& outs = outputs[0];
  TORCH_CHECK(outs.size() == static_cast<std::size_t>(getSize()), "agx: ", what,
              ": the output list has ", outs.size(), " tensors, the group has ", getSize(),
              " ranks");
  ready_for_agx(in, what);
  std::vector<std::int64_t> expected;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    same_kind(outs[i], in, what, "output_tensors", i);
    expected.push_back(outs[i].numel());
  }
  const auto r = static_cast<std::size_t>(getRank());
  TORCH_CHECK(outs[r].numel() == in.numel(), "agx: ", what, ": output_tensors[", r, "] holds ",
              outs[r].numel(), " elements, this rank's input ", in.numel(),
              " (uneven shapes are fine: each output tensor has its rank's input's shape)");
  agree(what, in.scalar_type(), in.numel(), expected);
  auto g = plan_gather(in, outs, getRank(), staging_);
  agx::Request request = agx::start_allgather_bytes(comm_, g->buffers, g->layout());
  served(what, agx::full_name(request.choice()), g->way());
  std::vector<at::Tensor> keep{g->input};
  if (g->staging.defined()) keep.push_back(g->staging);
  return c10::make_intrusive<Work>(getRank(), c10d::OpType::ALLGATHER, "agx:all_gather",
                                   pending(std::move(request)), std::move(keep), outs,
                                   [g] { g->finish(); }, g);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::_allgather_base(at::Tensor& output,
                                                             at::Tensor& input,
                                                             const c10d::AllgatherOptions&) {
  const char* what = "all_gather_into_tensor";
  ready_for_agx(input, what);
  same_kind(output, input, what, "output", 0);
  const std::int64_t n = getSize(), k = input.numel();
  TORCH_CHECK(output.numel() == n * k, "agx: ", what, ": the output holds ", output.numel(),
              " elements, ", n, " ranks x ", k, " need ", n * k);
  agree(what, input.scalar_type(), k, std::vector<std::int64_t>(static_cast<std::size_t>(n), k));
  // The output's N chunks (a dense output is addressed where it is; else a dense copy is
  // gathered into and copied back).
  at::Tensor dense = output.is_contiguous() ? output : at::empty(output.sizes(), output.options());
  std::vector<at::Tensor> chunks;
  const at::Tensor flat = dense.view({-1});
  for (std::int64_t i = 0; i < n; ++i) chunks.push_back(flat.narrow(0, i * k, k));
  auto g = plan_gather(input, chunks, getRank(), staging_);
  agx::Request request = agx::start_allgather_bytes(comm_, g->buffers, g->layout());
  served(what, agx::full_name(request.choice()), g->way());
  std::vector<at::Tensor> keep{g->input, dense};
  if (g->staging.defined()) keep.push_back(g->staging);
  const bool copy_back = !dense.is_same(output);
  return c10::make_intrusive<Work>(
      getRank(), c10d::OpType::_ALLGATHER_BASE, "agx:all_gather_into_tensor",
      pending(std::move(request)), std::move(keep), std::vector<at::Tensor>{output},
      [g, copy_back, dense, output]() mutable {
        g->finish();
        if (copy_back) output.copy_(dense);
      },
      g);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const char* what = "all_gather_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "agx: ", what, ": ", inputs.size(),
              " inputs but ", outputs.size(), " output lists");
  agree(what, at::kByte, static_cast<std::int64_t>(inputs.size()));  // as many lists everywhere
  auto gathers = std::make_shared<std::vector<std::shared_ptr<Gather>>>();
  std::vector<agx::FusedPart> parts;
  std::vector<at::Tensor> keep, results;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& in = inputs[k];
    auto& outs = outputs[k];
    TORCH_CHECK(in.device().is_cpu(), "agx: ", what, " of a tensor on ", in.device(),
                ": agx's fused all-gather takes host buffers (all_gather takes device tensors)");
    TORCH_CHECK(outs.size() == static_cast<std::size_t>(getSize()), "agx: ", what,
                ": output list ", k, " has ", outs.size(), " tensors, the group has ", getSize(),
                " ranks");
    std::vector<std::int64_t> expected;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      same_kind(outs[i], in, what, "output_lists[k]", i);
      expected.push_back(outs[i].numel());
    }
    TORCH_CHECK(outs[static_cast<std::size_t>(getRank())].numel() == in.numel(), "agx: ", what,
                ": output list ", k, " holds ", outs[static_cast<std::size_t>(getRank())].numel(),
                " elements for this rank, its input ", k, " has ", in.numel());
    agree(what, in.scalar_type(), in.numel(), expected);
    auto g = plan_gather(in, outs, getRank(), staging_);
    parts.push_back({g->buffers, g->bytes, g->offsets});
    keep.push_back(g->input);
    if (g->staging.defined()) keep.push_back(g->staging);
    results.insert(results.end(), outs.begin(), outs.end());
    gathers->push_back(std::move(g));
  }
  agx::FusedRequest request = agx::start_fused_allgather_bytes(comm_, parts);
  std::string ways;
  for (const auto& g : *gathers) {
    if (!ways.empty()) ways.push_back(',');
    ways.append(g->way());
  }
  served(what,
         std::string(agx::to_string(request.algorithm())) + " (" + agx::to_string(request.way()) +
             ", " + std::to_string(request.calls()) + (request.calls() == 1 ? " call)" : " calls)"),
         ways);
  return c10::make_intrusive<Work>(getRank(), c10d::OpType::ALLGATHER_COALESCED,
                                   "agx:all_gather_coalesced", pending(std::move(request)),
                                   std::move(keep), std::move(results),
                                   [gathers] {
                                     for (const auto& g : *gathers) g->finish();
                                   },
                                   gathers);
}

// --- the MPI library's operations ---------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroup::mpi_work(c10d::OpType type, const char* what,
                                                      std::vector<MPI_Request> requests,
                                                      std::vector<at::Tensor> keep,
                                                      std::vector<at::Tensor> outputs,
                                                      std::function<void()> finish) {
  served(what);
  return c10::make_intrusive<Work>(getRank(), type, what, pending(std::move(requests), what),
                                   std::move(keep), std::move(outputs), std::move(finish));
}

namespace {

/// A dense tensor to hand to MPI for `t`, and the copy back into `t` where it is not `t`.
struct Dense {
  at::Tensor user, work;
  explicit Dense(const at::Tensor& t) : user(t), work(t.contiguous()) {}
  std::function<void()> copy_back() const {
    if (work.is_same(user)) return {};
    return [u = user, w = work]() mutable { u.copy_(w); };
  }
};

/// The one host tensor of a call of the MPI library's.
const at::Tensor& one_host_tensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "agx: ", what, " takes one tensor per process");
  host_only(tensors[0], what);
  return tensors[0];
}

void check_root(std::int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "agx: ", what, ": root ", root,
              " is outside the group of ", size);
}

at::Tensor flat_cat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

std::function<void()> scatter_into(std::vector<at::Tensor> outs, at::Tensor from) {
  return [outs = std::move(outs), from]() mutable {
    std::int64_t at_ = 0;
    for (auto& o : outs) {
      o.copy_(from.narrow(0, at_, o.numel()).view(o.sizes()));
      at_ += o.numel();
    }
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  const char* what = "broadcast";
  one_host_tensor(tensors, what);
  check_root(opts.rootRank, getSize(), what);
  agree(what, tensors[0].scalar_type(), tensors[0].numel(), {}, opts.rootRank);
  Dense d(tensors[0]);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ibcast(d.work.data_ptr(), int_count(nbytes(d.work), what), MPI_BYTE,
                       static_cast<int>(opts.rootRank), mpi_, req.data()),
            "MPI_Ibcast");
  // (the root's tensor is only read: nothing to copy back there)
  return mpi_work(c10d::OpType::BROADCAST, what, std::move(req), {d.work}, tensors,
                  getRank() == opts.rootRank ? std::function<void()>{} : d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  const char* what = "all_reduce";
  one_host_tensor(tensors, what);
  const MPI_Datatype type = reduce_type(tensors[0].scalar_type());
  const MPI_Op op = reduce_op(opts.reduceOp, tensors[0].scalar_type(), what);
  agree(what, tensors[0].scalar_type(), tensors[0].numel());
  Dense d(tensors[0]);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, d.work.data_ptr(),
                           int_count(static_cast<std::size_t>(d.work.numel()), what), type, op,
                           mpi_, req.data()),
            "MPI_Iallreduce");
  return mpi_work(c10d::OpType::ALLREDUCE, what, std::move(req), {d.work}, tensors, d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* what = "all_reduce_coalesced";
  // Every tensor checked (and agreed) before the first request is posted: a check that
  // throws must leave nothing running over the dense copies.
  agree(what, at::kByte, static_cast<std::int64_t>(tensors.size()));  // as many tensors everywhere
  std::vector<MPI_Datatype> types;
  std::vector<MPI_Op> ops;
  std::vector<int> counts;
  for (const auto& t : tensors) {
    host_only(t, what);
    types.push_back(reduce_type(t.scalar_type()));
    ops.push_back(reduce_op(opts.reduceOp, t.scalar_type(), what));
    counts.push_back(int_count(static_cast<std::size_t>(t.numel()), what));
    agree(what, t.scalar_type(), t.numel());
  }
  std::vector<MPI_Request> req(tensors.size(), MPI_REQUEST_NULL);
  std::vector<at::Tensor> keep;
  std::vector<std::function<void()>> backs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Dense d(tensors[i]);
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, d.work.data_ptr(), counts[i], types[i], ops[i],
                                  mpi_, &req[i]);
    if (rc != MPI_SUCCESS) {  // the posted ones end before their buffers go
      MPI_Waitall(static_cast<int>(i), req.data(), MPI_STATUSES_IGNORE);
      mpi_check(rc, "MPI_Iallreduce");
    }
    keep.push_back(d.work);
    if (auto b = d.copy_back()) backs.push_back(std::move(b));
  }
  return mpi_work(c10d::OpType::ALLREDUCE_COALESCED, what, std::move(req), std::move(keep), tensors,
                  [backs]() {
                    for (const auto& b : backs) b();
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::ReduceOptions& opts) {
  const char* what = "reduce";
  one_host_tensor(tensors, what);
  check_root(opts.rootRank, getSize(), what);
  const MPI_Datatype type = reduce_type(tensors[0].scalar_type());
  const MPI_Op op = reduce_op(opts.reduceOp, tensors[0].scalar_type(), what);
  agree(what, tensors[0].scalar_type(), tensors[0].numel(), {}, opts.rootRank);
  Dense d(tensors[0]);
  const bool root = getRank() == opts.rootRank;
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ireduce(root ? MPI_IN_PLACE : d.work.data_ptr(), root ? d.work.data_ptr() : nullptr,
                        int_count(static_cast<std::size_t>(d.work.numel()), what), type, op,
                        static_cast<int>(opts.rootRank), mpi_, req.data()),
            "MPI_Ireduce");
  return mpi_work(c10d::OpType::REDUCE, what, std::move(req), {d.work}, tensors,
                  root ? d.copy_back() : std::function<void()>{});
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  TORCH_CHECK(inputs.size() == 1, "agx: ", what, " takes one input tensor per process");
  host_only(inputs[0], what);
  check_root(opts.rootRank, getSize(), what);
  const bool root = getRank() == opts.rootRank;
  const at::Tensor in = inputs[0].contiguous();
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<std::size_t>(getSize()),
                "agx: ", what, ": the root needs a list of ", getSize(), " output tensors");
    for (std::size_t i = 0; i < outputs[0].size(); ++i) {
      same_kind(outputs[0][i], in, what, "gather_list", i);
      TORCH_CHECK(outputs[0][i].numel() == in.numel(), "agx: ", what, ": gather_list[", i,
                  "] holds ", outputs[0][i].numel(), " elements, the input ", in.numel());
    }
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "agx: ", what,
                ": only the root passes output tensors");
  }
  agree(what, in.scalar_type(), in.numel(), {}, opts.rootRank);
  at::Tensor staging = root ? at::empty({getSize() * in.numel()}, in.options()) : at::Tensor();
  const int count = int_count(nbytes(in), what);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Igather(in.data_ptr(), count, MPI_BYTE, root ? staging.data_ptr() : nullptr, count,
                        MPI_BYTE, static_cast<int>(opts.rootRank), mpi_, req.data()),
            "MPI_Igather");
  std::vector<at::Tensor> keep{in};
  if (root) keep.push_back(staging);
  return mpi_work(c10d::OpType::GATHER, what, std::move(req), std::move(keep), outs,
                  root ? scatter_into(outs, staging) : std::function<void()>{});
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  TORCH_CHECK(outputs.size() == 1, "agx: ", what, " takes one output tensor per process");
  host_only(outputs[0], what);
  check_root(opts.rootRank, getSize(), what);
  const bool root = getRank() == opts.rootRank;
  at::Tensor staging;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<std::size_t>(getSize()),
                "agx: ", what, ": the root needs a list of ", getSize(), " input tensors");
    for (std::size_t i = 0; i < inputs[0].size(); ++i) {
      same_kind(inputs[0][i], outputs[0], what, "scatter_list", i);
      TORCH_CHECK(inputs[0][i].numel() == outputs[0].numel(), "agx: ", what, ": scatter_list[", i,
                  "] holds ", inputs[0][i].numel(), " elements, the output ", outputs[0].numel());
    }
    staging = flat_cat(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "agx: ", what,
                ": only the root passes input tensors");
  }
  agree(what, outputs[0].scalar_type(), outputs[0].numel(), {}, opts.rootRank);
  Dense d(outputs[0]);
  const int count = int_count(nbytes(d.work), what);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Iscatter(root ? staging.data_ptr() : nullptr, count, MPI_BYTE, d.work.data_ptr(),
                         count, MPI_BYTE, static_cast<int>(opts.rootRank), mpi_, req.data()),
            "MPI_Iscatter");
  std::vector<at::Tensor> keep{d.work};
  if (root) keep.push_back(staging);
  return mpi_work(c10d::OpType::SCATTER, what, std::move(req), std::move(keep), outputs,
                  d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 &&
                  inputs[0].size() == static_cast<std::size_t>(getSize()),
              "agx: ", what, " takes one output tensor and a list of ", getSize(), " inputs");
  host_only(outputs[0], what);
  for (std::size_t i = 0; i < inputs[0].size(); ++i) {
    same_kind(inputs[0][i], outputs[0], what, "input_list", i);
    TORCH_CHECK(inputs[0][i].numel() == outputs[0].numel(), "agx: ", what, ": input_list[", i,
                "] holds ", inputs[0][i].numel(), " elements, the output ", outputs[0].numel());
  }
  const MPI_Datatype type = reduce_type(outputs[0].scalar_type());
  const MPI_Op op = reduce_op(opts.reduceOp, outputs[0].scalar_type(), what);
  agree(what, outputs[0].scalar_type(), outputs[0].numel());
  const at::Tensor staging = flat_cat(inputs[0]);
  Dense d(outputs[0]);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ireduce_scatter_block(staging.data_ptr(), d.work.data_ptr(),
                                      int_count(static_cast<std::size_t>(d.work.numel()), what),
                                      type, op, mpi_, req.data()),
            "MPI_Ireduce_scatter_block");
  return mpi_work(c10d::OpType::REDUCE_SCATTER, what, std::move(req), {staging, d.work}, outputs,
                  d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor";
  host_only(input, what);
  same_kind(output, input, what, "output", 0);
  TORCH_CHECK(input.numel() == getSize() * output.numel(), "agx: ", what, ": the input holds ",
              input.numel(), " elements, ", getSize(), " ranks x ", output.numel(), " need ",
              getSize() * output.numel());
  const MPI_Datatype type = reduce_type(output.scalar_type());
  const MPI_Op op = reduce_op(opts.reduceOp, output.scalar_type(), what);
  agree(what, output.scalar_type(), output.numel());
  const at::Tensor in = input.contiguous();
  Dense d(output);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ireduce_scatter_block(in.data_ptr(), d.work.data_ptr(),
                                      int_count(static_cast<std::size_t>(d.work.numel()), what),
                                      type, op, mpi_, req.data()),
            "MPI_Ireduce_scatter_block");
  return mpi_work(c10d::OpType::_REDUCE_SCATTER_BASE, what, std::move(req), {in, d.work}, {output},
                  d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_splits,
                                                           std::vector<int64_t>& input_splits,
                                                           const c10d::AllToAllOptions&) {
  const char* what = "all_to_all_single";
  host_only(input, what);
  same_kind(output, input, what, "output", 0);
  const int n = getSize();
  const at::Tensor in = input.contiguous();
  Dense d(output);
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* name) {
    std::vector<int> c(static_cast<std::size_t>(n)), o(static_cast<std::size_t>(n));
    const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const std::size_t row = rows == 0 ? 0 : nbytes(t) / static_cast<std::size_t>(rows);
    std::size_t at_ = 0;
    for (int i = 0; i < n; ++i) {
      std::int64_t r = 0;
      if (splits.empty()) {
        TORCH_CHECK(rows % n == 0, "agx: ", what, ": the ", name, "'s first dimension ", rows,
                    " is not divisible by the group size ", n, " (pass split sizes)");
        r = rows / n;
      } else {
        TORCH_CHECK(splits.size() == static_cast<std::size_t>(n), "agx: ", what, ": ", name,
                    " split sizes need ", n, " entries");
        r = splits[static_cast<std::size_t>(i)];
      }
      c[static_cast<std::size_t>(i)] = int_count(static_cast<std::size_t>(r) * row, what);
      o[static_cast<std::size_t>(i)] = int_count(at_, what);
      at_ += static_cast<std::size_t>(r) * row;
    }
    TORCH_CHECK(at_ <= nbytes(t), "agx: ", what, ": the ", name, " split sizes add up to more ",
                "rows than the ", name, " has");
    return std::make_pair(c, o);
  };
  // The counts and displacements MPI reads until the call ends: held by the work.
  auto hold = std::make_shared<std::vector<std::vector<int>>>();
  auto [sc, sd] = counts(in, input_splits, "input");
  auto [rc, rd] = counts(d.work, output_splits, "output");
  *hold = {std::move(sc), std::move(sd), std::move(rc), std::move(rd)};
  auto& h = *hold;
  agree(what, input.scalar_type(), 0);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ialltoallv(in.data_ptr(), h[0].data(), h[1].data(), MPI_BYTE, d.work.data_ptr(),
                           h[2].data(), h[3].data(), MPI_BYTE, mpi_, req.data()),
            "MPI_Ialltoallv");
  auto back = d.copy_back();
  return mpi_work(c10d::OpType::ALLTOALL_BASE, what, std::move(req), {in, d.work}, {output},
                  [hold, back] {
                    if (back) back();
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions&) {
  const char* what = "all_to_all";
  const int n = getSize();
  TORCH_CHECK(outputs.size() == static_cast<std::size_t>(n) &&
                  inputs.size() == static_cast<std::size_t>(n),
              "agx: ", what, " takes lists of ", n, " input and ", n, " output tensors");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    host_only(inputs[i], what);
    same_kind(inputs[i], inputs[0], what, "input_tensor_list", i);
    same_kind(outputs[i], inputs[0], what, "output_tensor_list", i);
  }
  const at::Tensor send = flat_cat(inputs);
  std::int64_t total = 0;
  for (const auto& o : outputs) total += o.numel();
  const at::Tensor recv = at::empty({total}, inputs[0].options());
  std::vector<int> sc, sd, rc, rd;
  std::size_t s_at = 0, r_at = 0;
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    sc.push_back(int_count(nbytes(inputs[u]), what));
    sd.push_back(int_count(s_at, what));
    s_at += nbytes(inputs[u]);
    rc.push_back(int_count(nbytes(outputs[u]), what));
    rd.push_back(int_count(r_at, what));
    r_at += nbytes(outputs[u]);
  }
  agree(what, inputs[0].scalar_type(), 0);
  // The counts and displacements MPI reads until the call ends: held by the work.
  auto hold = std::make_shared<std::vector<std::vector<int>>>(
      std::vector<std::vector<int>>{std::move(sc), std::move(sd), std::move(rc), std::move(rd)});
  auto& h = *hold;
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ialltoallv(send.data_ptr(), h[0].data(), h[1].data(), MPI_BYTE, recv.data_ptr(),
                           h[2].data(), h[3].data(), MPI_BYTE, mpi_, req.data()),
            "MPI_Ialltoallv");
  auto into = scatter_into(outputs, recv);
  return mpi_work(c10d::OpType::ALLTOALL, what, std::move(req), {send, recv}, outputs,
                  [hold, into] { into(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::send(std::vector<at::Tensor>& tensors, int dst,
                                                  int tag) {
  const char* what = "send";
  one_host_tensor(tensors, what);
  const at::Tensor t = tensors[0].contiguous();
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Isend(t.data_ptr(), int_count(nbytes(t), what), MPI_BYTE, dst, tag, mpi_,
                      req.data()),
            "MPI_Isend");
  return mpi_work(c10d::OpType::SEND, what, std::move(req), {t}, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::recv(std::vector<at::Tensor>& tensors, int src,
                                                  int tag) {
  const char* what = "recv";
  one_host_tensor(tensors, what);
  Dense d(tensors[0]);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Irecv(d.work.data_ptr(), int_count(nbytes(d.work), what), MPI_BYTE, src, tag,
                      mpi_, req.data()),
            "MPI_Irecv");
  return mpi_work(c10d::OpType::RECV, what, std::move(req), {d.work}, tensors, d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::recvAnysource(std::vector<at::Tensor>& tensors,
                                                           int tag) {
  const char* what = "recv";
  one_host_tensor(tensors, what);
  Dense d(tensors[0]);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Irecv(d.work.data_ptr(), int_count(nbytes(d.work), what), MPI_BYTE,
                      MPI_ANY_SOURCE, tag, mpi_, req.data()),
            "MPI_Irecv");
  return mpi_work(c10d::OpType::RECVANYSOURCE, what, std::move(req), {d.work}, tensors,
                  d.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::barrier(const c10d::BarrierOptions&) {
  const char* what = "barrier";
  agree(what, at::kByte, 0);
  std::vector<MPI_Request> req(1);
  mpi_check(MPI_Ibarrier(mpi_, req.data()), "MPI_Ibarrier");
  return mpi_work(c10d::OpType::BARRIER, what, std::move(req), {}, {});
}

}  // namespace agx::torch
