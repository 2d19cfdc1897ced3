// gc: deleting the state that no longer affects any answer (Engine::gc), with a progress bar
// on a terminal.
#include <fmt/format.h>

#include <ostream>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

// Redraws one line of progress in place ("\r"), and erases it when the work is done, so that
// the count printed after it stands alone. Drawn only on a terminal (never with --json), and
// only when there is more than one batch to wait for.
class ProgressLine {
 public:
  ProgressLine(const Session& session, std::size_t batch_rows)
      : session_(session), batch_rows_(static_cast<std::int64_t>(batch_rows)) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { erase(); }

  void draw(const quota::GcProgress& progress) {
    if (!session_.show_progress || progress.total <= batch_rows_) return;
    const std::int64_t percent =
        progress.examined >= progress.total ? 100 : progress.examined * 100 / progress.total;
    const std::string line =
        fmt::format("gc [{}] {:>3}%  {} deleted", bar(progress.examined, progress.total, 30),
                    percent, progress.deleted);
    session_.out << '\r' << line << std::flush;
    width_ = display_width(line);
  }

  void erase() {
    if (width_ == 0) return;
    session_.out << '\r' << std::string(width_, ' ') << '\r' << std::flush;
    width_ = 0;
  }

 private:
  const Session& session_;
  std::int64_t batch_rows_;
  std::size_t width_ = 0;  // of the line on screen, 0 when none is
};

}  // namespace

int run_gc(Session& session, const Arguments& arguments) {
  const std::size_t batch_rows =
      arguments.batch
          ? static_cast<std::size_t>(parse_whole(*arguments.batch, "--batch", 1, 1'000'000))
          : 1000;
  quota::Engine engine = session.open_engine();
  std::int64_t examined = 0;
  std::int64_t deleted = 0;
  {
    ProgressLine line(session, batch_rows);
    deleted = engine.gc(batch_rows, [&](const quota::GcProgress& progress) {
      examined = progress.examined;
      line.draw(progress);
    });
  }
  if (session.json) {
    session.emit({{"deleted", deleted}});
    return 0;
  }
  const auto rows = [](std::int64_t count) {
    return fmt::format("{} row{} of state", count, count == 1 ? "" : "s");
  };
  if (deleted == 0) {
    session.out << fmt::format("nothing to delete ({} examined)\n", rows(examined));
  } else {
    session.out << fmt::format("deleted {} that no longer affected any answer ({} examined)\n",
                               rows(deleted), examined);
  }
  return 0;
}

}  // namespace quotactl
