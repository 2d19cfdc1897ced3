// The backends a test can run on, and a fresh database of each for one test.
//
// Tests that go through Engine or quotactl and hold on every backend take a Backend from
// GENERATE(kAllBackends) and open their engine on a TestDatabase of it: a file in a folder of
// its own for SQLite, a schema of its own in the test server for PostgreSQL. The test command
// (tools/test.sh) starts that server and names it in $QUOTA_TEST_POSTGRES; without it a
// PostgreSQL test fails, saying how to start one.
#pragma once

#include <string>

#include "quota/engine.h"
#include "support.h"

namespace quota::test {

enum class Backend { sqlite, postgresql };

inline constexpr Backend kAllBackends[] = {Backend::sqlite, Backend::postgresql};

const char* to_string(Backend backend);

class TestDatabase {
 public:
  explicit TestDatabase(Backend backend);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  Backend backend() const { return backend_; }
  // What Engine::open and quotactl --db take: a file's path, or a connection URI.
  const std::string& location() const { return location_; }
  // Runs `sql` on the database outside any engine (PostgreSQL: in the test's schema).
  void exec(const std::string& sql) const;

 private:
  Backend backend_;
  TempDir dir_;
  std::string schema_;
  std::string location_;
};

// The URI of the test server's database ($QUOTA_TEST_POSTGRES); fails the test without it.
std::string test_server_uri();

}  // namespace quota::test
