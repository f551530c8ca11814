// The nonblocking encoded all-gather (include/agx/encoded.hpp, docs/fused.md): the
// blocking call's steps (encoded_call.hpp) as one operation of lib/core's nonblocking
// engine, so that agx::Request, wait(), the progress thread and every other agx call
// advance it.
//
//   start()   checks, encodes the own block, takes two tags of the communicator's
//             sequence (one per phase) and posts the exchange of the encoded sizes;
//   test()    sizes in: checks them, lays the encoded blocks out and posts their
//             all-gather with the second tag; blocks in: decodes every block.
//
// Both tags are taken at start(), in start order, which is the same on every rank: two
// calls outstanding on one communicator match phase by phase however differently they
// progress on each rank. Both phases run point-to-point schedules on the round engine
// (core/executor.hpp), chosen without state that depends on the order of progress: a
// forced point-to-point algorithm, else the selector's best point-to-point for the
// phase's layout (a pure function of the layout and the agreed tuning).

#include <agx/encoded.hpp>
#include <agx/error.hpp>
#include <agx/request.hpp>

#include "api/context.hpp"
#include "api/dispatch.hpp"
#include "codec/encoded_call.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agx {
namespace {

class EncodedOperation final : public detail::Operation {
 public:
  EncodedOperation(CommContext& ctx, codec::EncodedCall call, std::optional<AlgorithmChoice> forced,
                   std::shared_ptr<EncodedResult> result)
      : Operation(forced.value_or(AlgorithmChoice{}),
                  Layout::varying(call.block_bytes, call.offsets)),
        ctx_(ctx.share()),
        call_(std::move(call)),
        forced_(forced),
        result_(std::move(result)),
        sizes_(static_cast<std::size_t>(call_.n)),
        sizes_layout_(Layout::uniform(call_.n, sizeof(std::uint64_t))) {}

 private:
  /// The phase's algorithm (the one chooser; a phase runs messages only): the same on
  /// every rank, whatever else ran before it here.
  AlgorithmChoice choice_for(const Layout& layout) {
    if (ctx_->size() == 1) return {Algorithm::direct, 0};
    CallFacts facts;
    facts.kind = CallKind::nonblocking;
    facts.messages_only = true;
    const Options o = forced_ ? Options{forced_->id, false, forced_->radix}
                              : Options{Algorithm::automatic, false};
    return choose(ctx_->selector(), layout, o, facts).algorithm;
  }

  void run(std::optional<Execution>& e, const AlgorithmChoice& a, const Buffers& b,
           const Layout& layout, int tag) {
    e.emplace(ctx_->schedule(a), b, layout, ctx_->comm(), tag, config().max_message_bytes,
              Checks::of(a.id));
    e->start();
  }

  void do_start() override {
    sizes_tag_ = ctx_->next_tag();
    data_tag_ = ctx_->next_tag();
    run(sizes_run_, choice_for(sizes_layout_), {&call_.announced, sizes_.data(), false},
        sizes_layout_, sizes_tag_);
  }

  bool do_test() override {
    if (!data_run_) {
      if (!sizes_run_->test()) return false;
      // A size outside its block's bounds is corrupt (raised here, as the blocking
      // call raises it, on every rank: the sizes are the same everywhere).
      result_->wire_bytes = codec::encoded_layout(call_, sizes_, bytes_, at_);
      if (codec::nothing_gained(call_, sizes_)) {  // the plain call, as the blocking one
        result_->encoded = false;
        result_->wire_bytes = result_->plain_bytes;
        plain_ = true;
        const Layout plain = call_.plain_layout();
        const AlgorithmChoice a = choice_for(plain);
        result_->algorithm = a.id;
        run(data_run_, a, call_.buffers, plain, data_tag_);
        return data_run_->test();
      }
      arena_.resize(result_->wire_bytes);
      data_layout_ = Layout::varying(bytes_, at_);
      const AlgorithmChoice a = choice_for(data_layout_);
      result_->algorithm = a.id;
      // The own block travels with what it announced (a truncating seam sends less).
      run(data_run_, a, {call_.own.data(), arena_.data(), false}, data_layout_, data_tag_);
    }
    if (!data_run_->test()) return false;
    if (plain_) return true;
    codec::decode_all(call_, arena_.data(), bytes_, at_);
    return true;
  }

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  codec::EncodedCall call_;
  std::optional<AlgorithmChoice> forced_;
  std::shared_ptr<EncodedResult> result_;
  int sizes_tag_ = 0, data_tag_ = 0;
  bool plain_ = false;  // nothing gained: the data phase is the plain call
  std::vector<std::uint64_t> sizes_;
  Layout sizes_layout_;
  std::vector<std::size_t> bytes_, at_;  // the encoded blocks' layout (data_layout_'s arrays)
  Layout data_layout_;
  std::vector<std::byte> arena_;
  std::optional<Execution> sizes_run_, data_run_;  // last: destroyed first
};

}  // namespace

EncodedRequest start_encoded_allgatherv_bytes(MPI_Comm comm, const Buffers& buffers,
                                              std::span<const std::size_t> block_bytes,
                                              std::span<const std::size_t> offsets,
                                              std::size_t elem_bytes, ElementKind kind,
                                              const EncodeOptions& encode,
                                              const Options& options) {
  check_config();
  detail::progress_from_environment();
  // A communicator agx has not set up: its set-up (and the compressor's agreed speed) are
  // collectives, which a start must not wait for. The call runs plain, as the MPI
  // library's own nonblocking all-gather (start_allgather_bytes' first-call rule), and its
  // result says nothing was encoded. AGX_CHECK's agreement synchronizes anyway: it sets up.
  const bool fresh = existing_context(comm) == nullptr && !config().check;
  codec::EncodedCall c = codec::prepare_call(comm, buffers, block_bytes, offsets, elem_bytes,
                                             kind, encode, options, fresh);
  auto result = std::make_shared<EncodedResult>(c.result);
  if (c.plain)  // nothing to encode: the plain nonblocking call
    return EncodedRequest(start_allgather_bytes(comm, buffers, c.plain_layout(), options), result);
  CommContext& ctx = context(comm);
  // The options and AGX_ALGO checked as any call's (a radix without its algorithm, an
  // unreadable AGX_ALGO, an algorithm that cannot serve: MPI_ERR_ARG), in start order.
  const AlgorithmChoice sized =
      choose_call(ctx, Layout::uniform(c.n, sizeof(std::uint64_t)), options, false,
                  CallKind::query)
          .algorithm;
  std::optional<AlgorithmChoice> forced;
  if (!is_automatic(options)) forced = sized;
  detail::OperationPtr op(new EncodedOperation(ctx, std::move(c), forced, result));
  detail::progress_register(op.get());
  op->start();
  return EncodedRequest(Request(std::move(op)), result);
}

EncodedRequest start_encoded_allgather_bytes(MPI_Comm comm, const void* send, void* recv,
                                             std::size_t count, std::size_t elem_bytes,
                                             ElementKind kind, const EncodeOptions& encode,
                                             const Options& options) {
  std::vector<std::size_t> bytes, offsets;
  codec::uniform_blocks(comm, count, elem_bytes, bytes, offsets);
  return start_encoded_allgatherv_bytes(comm, {send, recv, send == nullptr}, bytes, offsets,
                                        elem_bytes, kind, encode, options);
}

}  // namespace agx
