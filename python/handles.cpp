// agx.Request and agx.Plan (handles.hpp).

#include "handles.hpp"

#include <agx/algorithm.hpp>

#include <utility>

namespace agx::python {

namespace {

/// Destroys a request or plan; its destructor waits for a running call, so it runs
/// without the GIL then (other Python threads go on meanwhile).
template <class Handle>
void destroy(std::unique_ptr<Handle>& h) {
  if (h && h->active() && PyGILState_Check()) {
    py::gil_scoped_release nogil;
    h.reset();
  }
  h.reset();
}

}  // namespace

PyRequest::PyRequest(Request request, Call call)
    : send_(std::move(call.send)),
      recv_(std::move(call.recv)),
      request_(std::make_unique<Request>(std::move(request))) {}

PyRequest::~PyRequest() { destroy(request_); }

bool PyRequest::test() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread waits for it
  return request_->test();
}

py::object PyRequest::wait() {
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(mutex_);
    request_->wait();
  }
  return recv_;
}

std::string PyRequest::algorithm() const { return std::string(to_string(request_->algorithm())); }

PyPlan::PyPlan(Plan plan, Call call)
    : send_(std::move(call.send)),
      recv_(std::move(call.recv)),
      plan_(std::make_unique<Plan>(std::move(plan))) {}

PyPlan::~PyPlan() { destroy(plan_); }

void PyPlan::start() {
  py::gil_scoped_release nogil;
  std::lock_guard lock(mutex_);
  plan_->start();
}

bool PyPlan::test() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  return plan_->test();
}

py::object PyPlan::wait() {
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(mutex_);
    plan_->wait();
  }
  return recv_;
}

std::string PyPlan::algorithm() const { return std::string(to_string(plan_->algorithm())); }

}  // namespace agx::python
