// Cases run in forked children, so that each case's peak RSS is its own (ru_maxrss from
// wait4) and no case inherits another's page cache or heap.
// Included at the end of bench.h.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>

namespace quota_bench {

struct Measurement;
void write_measurement(int fd, const Measurement& measurement);

// A child that will write one Measurement to `fd` and exit.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

// Forks; the child runs `work()` (which returns a Measurement) and exits. An exception in
// the child becomes Measurement::error. Throws std::runtime_error when fork or pipe fails.
template <typename Work>
Child spawn(Work&& work);

// Waits for the child and reads its Measurement; `peak_rss_kib` receives its ru_maxrss.
Measurement collect(Child child, long* peak_rss_kib);

template <typename Work>
Measurement in_child(Work&& work, long* peak_rss_kib) {
  return collect(spawn(std::forward<Work>(work)), peak_rss_kib);
}

[[noreturn]] void child_failed(int fd, const char* what);
int open_pipe(int ends[2]);
pid_t fork_flushed();

template <typename Work>
Child spawn(Work&& work) {
  int ends[2];
  open_pipe(ends);
  const pid_t pid = fork_flushed();
  if (pid == 0) {
    close(ends[0]);
    try {
      write_measurement(ends[1], work());
    } catch (const std::exception& error) {
      child_failed(ends[1], error.what());
    } catch (...) {
      child_failed(ends[1], "unknown exception");
    }
    _exit(0);
  }
  close(ends[1]);
  return {pid, ends[0]};
}

}  // namespace quota_bench
