#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "bench.h"

namespace quota_bench {

void Histogram::merge(const Histogram& other) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  if (other.max_ > max_) max_ = other.max_;
}

std::uint64_t Histogram::middle(int index) {
  if (index < 2 * kSubBuckets) return static_cast<std::uint64_t>(index);
  const int shift = (index - 2 * kSubBuckets) / kSubBuckets + 1;
  const std::uint64_t mantissa = (index - 2 * kSubBuckets) % kSubBuckets + kSubBuckets;
  return (mantissa << shift) + ((std::uint64_t{1} << shift) >> 1);
}

std::uint64_t Histogram::percentile(double q) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_) + 0.5);
  if (rank < 1) rank = 1;
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(middle(i), max_);
  }
  return max_;
}

namespace {

void write_all(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) _exit(3);
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

std::size_t read_all(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, bytes + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

}  // namespace

void write_measurement(int fd, const Measurement& measurement) {
  write_all(fd, &measurement, sizeof measurement);
}

void child_failed(int fd, const char* what) {
  static Measurement failed;  // static: no 20 KiB on a stack that may be nearly spent
  std::snprintf(failed.error, sizeof failed.error, "%s", what);
  write_measurement(fd, failed);
  _exit(1);
}

int open_pipe(int ends[2]) {
  if (pipe(ends) != 0) throw std::runtime_error("pipe failed: " + std::string(strerror(errno)));
  return 0;
}

pid_t fork_flushed() {
  std::fflush(nullptr);  // or the child would print the parent's buffered output again
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed: " + std::string(strerror(errno)));
  return pid;
}

Measurement collect(Child child, long* peak_rss_kib) {
  Measurement measurement;
  const std::size_t got = read_all(child.fd, &measurement, sizeof measurement);
  close(child.fd);
  int status = 0;
  rusage usage{};
  while (wait4(child.pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (peak_rss_kib) *peak_rss_kib = usage.ru_maxrss;
  if (got != sizeof measurement) {
    measurement = Measurement{};
    std::snprintf(measurement.error, sizeof measurement.error,
                  "the case's process ended without a result (status %d)", status);
  }
  return measurement;
}

}  // namespace quota_bench
