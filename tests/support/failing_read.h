// A descriptor whose reads give some bytes and then fail (EIO), as a disk that fails midway
// does, without a special file system: /proc/self/mem at a mapping of a one-page file that
// is two pages long. The first page reads; the second lies beyond the file's end, and a read
// of it fails. Used by the tests that a read error is never taken for the end of a file.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

#include "support.h"

namespace quota::test {

class FailingRead {
 public:
  // Reads give `readable` (padded with spaces to a whole page), then fail. `dir` holds the
  // file behind the mapping.
  FailingRead(const TempDir& dir, std::string readable) {
    page_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    if (readable.size() > page_) throw std::logic_error("FailingRead: more than a page");
    readable.resize(page_, ' ');
    const std::string path = dir.file("failing-read.bin");
    std::ofstream(path, std::ios::binary) << readable;
    const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file < 0) throw std::runtime_error("FailingRead: open");
    mapping_ = ::mmap(nullptr, 2 * page_, PROT_READ, MAP_SHARED, file, 0);
    ::close(file);
    if (mapping_ == MAP_FAILED) throw std::runtime_error("FailingRead: mmap");
    fd_ = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fd_ < 0 || ::lseek(fd_, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(mapping_)),
                           SEEK_SET) < 0) {
      throw std::runtime_error("FailingRead: /proc/self/mem");
    }
  }
  FailingRead(const FailingRead&) = delete;
  FailingRead& operator=(const FailingRead&) = delete;
  ~FailingRead() {
    if (fd_ >= 0) ::close(fd_);
    ::munmap(mapping_, 2 * page_);
  }

  int fd() const { return fd_; }
  std::size_t readable_bytes() const { return page_; }

 private:
  std::size_t page_ = 0;
  void* mapping_ = nullptr;
  int fd_ = -1;
};

}  // namespace quota::test
