// A PostgreSQL server of one test's own, for the tests that restart or reconfigure a server
// (the shared test server of $QUOTA_TEST_POSTGRES must never be stopped or reconfigured:
// other tests run against it in parallel).
//
// The constructor makes a cluster in a new folder /tmp/quota-pgtest.XXXXXX (initdb, trust for
// every local connection), starts it listening on a Unix socket in that folder (and, when
// asked, on the loopback address with a free port) and creates the database quota_test. The
// destructor stops it (immediate mode) and removes the folder, also when the test failed: a
// failed REQUIRE unwinds through it. A test process that was killed outright leaves its
// folder behind; the next PrivateServer removes every such folder whose test process is gone.
// PostgreSQL refuses to run as root: when the tests run as root, the server's programs run as
// the `postgres` system user (runuser), as tools/postgres.sh does.
#pragma once

#include <string>

namespace quota::test {

class PrivateServer {
 public:
  struct Setup {
    // Also listen on the loopback address (port()), not only on the folder's socket.
    bool tcp = false;
    // pg_hba.conf lines read before initdb's (which trust every local connection), so that
    // they decide first; in place when the server starts.
    std::string hba_first;
    // Made as a streaming standby of this server (pg_basebackup -R) instead of by initdb: it
    // starts in recovery, read-only, and follows the primary until promote().
    const PrivateServer* standby_of = nullptr;
  };

  PrivateServer();
  explicit PrivateServer(const Setup& setup);
  ~PrivateServer();
  PrivateServer(const PrivateServer&) = delete;
  PrivateServer& operator=(const PrivateServer&) = delete;

  // The folder that holds the cluster (data/) and its socket.
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }

  // A URI of the database quota_test over the socket: postgresql://USER[:PASSWORD]@/quota_test
  // ?host=DIR, followed by `&` and `parameters` when given.
  std::string uri(const std::string& user = "postgres", const std::string& password = "",
                  const std::string& parameters = "") const;

  // Runs `sql` as the superuser postgres; fails the test when it fails.
  void exec(const std::string& sql) const;
  // Runs `sql` as exec does, but a failure is an answer, not a failed test: returns the
  // server's error message, empty when `sql` succeeded (for polling a condition).
  std::string try_exec(const std::string& sql) const;
  // pg_ctl restart -m fast: every connection is ended, the server comes back on the same
  // socket. Returns when it accepts connections again.
  void restart() const;
  // pg_ctl stop -m immediate: the server dies as in a crash, without a checkpoint.
  void stop_immediately() const;
  // pg_ctl promote: a standby becomes a primary. Returns when it accepts writes.
  void promote() const;

 private:
  // Runs a server program (initdb, pg_ctl) as the server's user; its output goes to the
  // folder's log, which a failure prints.
  void run_program(const std::string& command_line) const;

  std::string dir_;
  int port_ = 5432;
  bool tcp_ = false;
};

}  // namespace quota::test
