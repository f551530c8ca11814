// agx::torch::Work (work.hpp).

#include "work.hpp"

#include <agx/error.hpp>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <string>
#include <thread>
#include <utility>

namespace agx::torch {

namespace {

/// An agx request or fused request (the same test/wait).
template <class Request>
class AgxPending final : public Pending {
 public:
  explicit AgxPending(Request r) : r_(std::move(r)) {}
  bool test() override { return r_.test(); }
  void wait() override { r_.wait(); }

 private:
  Request r_;
};

class MpiPending final : public Pending {
 public:
  MpiPending(std::vector<MPI_Request> r, const char* what)
      : r_(std::move(r)), statuses_(r_.size()), what_(what) {}
  ~MpiPending() override {
    // Buffers must not be released under a running MPI request.
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && !r_.empty())
      MPI_Waitall(static_cast<int>(r_.size()), r_.data(), MPI_STATUSES_IGNORE);
  }
  bool test() override {
    int flag = 0;
    check(MPI_Testall(static_cast<int>(r_.size()), r_.data(), &flag, statuses_.data()));
    if (flag) settle();
    return flag != 0;
  }
  void wait() override {
    check(MPI_Waitall(static_cast<int>(r_.size()), r_.data(), statuses_.data()));
    settle();
  }
  int source() const override { return source_; }

 private:
  void settle() {
    if (!statuses_.empty()) source_ = statuses_.front().MPI_SOURCE;
    r_.clear();
  }
  void check(int rc) const {  // (statuses_ hold the errors of MPI_ERR_IN_STATUS)
    if (rc == MPI_SUCCESS) return;
    if (rc == MPI_ERR_IN_STATUS)  // the request that failed says why
      for (const MPI_Status& st : statuses_)
        if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) {
          rc = st.MPI_ERROR;
          break;
        }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = MPI_ERR_OTHER;
    MPI_Error_string(rc, text, &len);
    MPI_Error_class(rc, &cls);
    throw agx::Error(cls, std::string("agx: ") + what_ + ": the MPI library failed: " +
                              std::string(text, static_cast<std::size_t>(len)));
  }
  std::vector<MPI_Request> r_;
  std::vector<MPI_Status> statuses_;
  const char* what_;
  int source_ = -1;
};

class Done final : public Pending {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<Pending> pending(agx::Request r) {
  return std::make_unique<AgxPending<agx::Request>>(std::move(r));
}
std::unique_ptr<Pending> pending(agx::FusedRequest r) {
  return std::make_unique<AgxPending<agx::FusedRequest>>(std::move(r));
}
std::unique_ptr<Pending> pending(std::vector<MPI_Request> r, const char* what) {
  return std::make_unique<MpiPending>(std::move(r), what);
}
std::unique_ptr<Pending> done() { return std::make_unique<Done>(); }

Work::Work(int rank, c10d::OpType type, const char* title, std::unique_ptr<Pending> p,
           std::vector<at::Tensor> keep, std::vector<at::Tensor> outputs,
           std::function<void()> finish, std::shared_ptr<void> hold)
    : c10d::Work(rank, type, title),
      pending_(std::move(p)),
      keep_(std::move(keep)),
      outputs_(std::move(outputs)),
      finish_(std::move(finish)),
      hold_(std::move(hold)) {}

Work::~Work() {
  // An unfinished call still writes into the tensors this work holds: wait for it (as
  // agx::Request does), without the GIL.
  try {
    if (!ended_ && pending_) {
      if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        pending_.reset();
      }
      pending_.reset();
    }
  } catch (...) {
  }
}

void Work::advance(bool block) {
  std::unique_lock lock(progress_, std::defer_lock);
  if (block) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;  // another thread waits for it: is_completed() does not block
  }
  if (ended_) return;
  std::exception_ptr failure;
  try {
    bool complete = false;
    if (block) {
      pending_->wait();
      complete = true;
    } else {
      complete = pending_->test();
    }
    if (!complete) return;
    source_ = pending_->source();
    if (finish_) finish_();
  } catch (...) {
    failure = std::current_exception();
  }
  ended_ = true;
  pending_.reset();
  finish_ = {};
  keep_.clear();
  hold_.reset();
  finish(failure);
}

bool Work::isCompleted() {
  advance(false);
  std::lock_guard lock(mutex_);
  return completed_;
}

bool Work::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

bool Work::wait(std::chrono::milliseconds timeout) {
  auto run = [&] {
    if (timeout == kNoTimeout) {
      advance(true);
      return;
    }
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      advance(false);
      {
        std::lock_guard lock(mutex_);
        if (completed_) return;
      }
      if (std::chrono::steady_clock::now() >= until)
        TORCH_CHECK(false, "agx: ", opTypeToString(retrieveOpType()), " did not complete within ",
                    timeout.count(), " ms (it goes on; wait() again to wait for it)");
      std::this_thread::yield();
    }
  };
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    run();
  } else {
    run();
  }
  std::lock_guard lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int Work::sourceRank() const {
  TORCH_CHECK(source_ >= 0, "agx: sourceRank() is only known for a completed recv from any source");
  return source_;
}

std::vector<at::Tensor> Work::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() {
  wait();
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(outputs_));
  return future;
}

}  // namespace agx::torch
