// POSIX shared memory for a node (shm_segment.hpp).

#include "hier/shm_segment.hpp"

#include "core/mpi_check.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace agx::hier {

std::size_t page_round(std::size_t bytes) {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

SharedSegment::SharedSegment(MPI_Comm node_comm, std::size_t bytes) : bytes_(page_round(bytes)) {
  if (bytes_ == 0) return;
  static std::atomic<unsigned> counter{0};
  int local = 0;
  check_mpi(MPI_Comm_rank(node_comm, &local), "MPI_Comm_rank");
  char name[64] = {};
  std::string error;
  if (local == 0) {
    std::snprintf(name, sizeof name, "/agx-%d-%u", static_cast<int>(getpid()), counter++);
    const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      error = std::string("shm_open: ") + std::strerror(errno);
    } else {
      if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0)
        error = std::string("ftruncate: ") + std::strerror(errno);
      close(fd);
      if (!error.empty()) shm_unlink(name);
    }
    if (!error.empty()) name[0] = '\0';
  }
  check_mpi(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, node_comm), "MPI_Bcast");
  if (name[0] == '\0' && error.empty()) error = "local rank 0 could not create the segment";
  if (error.empty()) {
    const int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
      error = std::string("shm_open: ") + std::strerror(errno);
    } else {
      void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      close(fd);
      if (p == MAP_FAILED) error = std::string("mmap: ") + std::strerror(errno);
      else data_ = static_cast<std::byte*>(p);
    }
  }
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm), "MPI_Allreduce");
  if (local == 0 && name[0] != '\0') shm_unlink(name);
  if (!all_ok) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = nullptr;
    throw Error(MPI_ERR_NO_MEM, "agx: cannot create a shared segment of " + std::to_string(bytes_) +
                                    " bytes" + (error.empty() ? std::string(" on another rank") : ": " + error));
  }
}

SharedSegment::~SharedSegment() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

}  // namespace agx::hier
