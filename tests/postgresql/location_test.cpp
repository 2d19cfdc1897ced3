// What a database location names (src/location.h), how a connection string is shown
// (quota::admin::shown, one masking function that libpq's parser drives), and bounded values in
// messages (src/shown.h). No server: libpq only parses here.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "location.h"
#include "quota/admin.h"
#include "quota/engine.h"
#include "shown.h"
#include "support.h"

namespace quota::test {
namespace {

using detail::classify_location;
using Kind = detail::Location::Kind;

TEST_CASE("a location is a SQLite path, a PostgreSQL connection string, or refused",
          "[location]") {
  SECTION("paths") {
    for (const std::string path :
         {"app.db", "/var/lib/app/quota.db", ":memory:", "./data/a=b.db", "data:1.db",
          "postgresql.db", "postgres", "./postgres:quota", "file:app.db"}) {
      CAPTURE(path);
      const detail::Location location = classify_location(path);
      CHECK(location.kind == Kind::sqlite_path);
      CHECK(location.text == path);
    }
  }
  SECTION("PostgreSQL: both schemes in any case, and libpq's key=value form") {
    CHECK(classify_location("postgresql://u@h/db").text == "postgresql://u@h/db");
    CHECK(classify_location("postgres://u@h/db").text == "postgres://u@h/db");
    CHECK(classify_location("POSTGRESQL://u@h/db").text == "postgresql://u@h/db");
    CHECK(classify_location("PostGres://u@h/db").text == "postgres://u@h/db");
    for (const std::string conninfo :
         {"host=db dbname=quota", "  host = db dbname=quota", "dbname=quota",
          "password=x host=db", "sslmode=require host=db", "bogus=1 host=db"}) {
      CAPTURE(conninfo);
      const detail::Location location = classify_location(conninfo);
      CHECK(location.kind == Kind::postgresql);
      CHECK(location.text == conninfo);
    }
  }
  SECTION("near misses are refused, naming no part that could be a credential") {
    for (const std::string near :
         {"postgresq://u:Sekret77@h/db", " postgresql://u:Sekret77@h/db",
          "\tpostgres://u:Sekret77@h/db", "postgres:Sekret77", "postgres:quota",
          "POSTGRESQL:/Sekret77", "postgresql:Sekret77@h", "postgre://u:Sekret77@h/db",
          "postgressql://u:Sekret77@h/db", "pgsql://u:Sekret77@h/db", "mysql://u:Sekret77@h/db",
          "postgres:/u:Sekret77@h", "jdbc:postgresql://h/db?user=u&password=Sekret77",
          "jdbc:postgres://u:Sekret77@h/db", "PASSWORD=Sekret77 HOST=h",
          "Host=h password=Sekret77"}) {
      CAPTURE(near);
      const detail::Location location = classify_location(near);
      CHECK(location.kind == Kind::refused);
      CHECK(location.text.empty());
      CHECK_THAT(location.problem, !Catch::Contains("Sekret77") &&
                                       Catch::Contains("postgresql://USER@HOST:PORT/DATABASE"));
    }
    CHECK_THAT(classify_location(" postgresql://u@h/db").problem,
               Catch::Contains("it begins with 1 white-space character before 'postgresql://'"));
    CHECK_THAT(classify_location("Postgres:quota").problem,
               Catch::Contains("'Postgres:' is not followed by '//'"));
    CHECK_THAT(classify_location("postgresq://u@h/db").problem,
               Catch::Contains("its scheme 'postgresq:' is neither"));
  }
  SECTION("a NUL byte is refused wherever it is") {
    const std::string with_nul("postgresql://u@h/db\0?options=-cdefault_transaction_read_only%3Don",
                               64);
    const detail::Location location = classify_location(with_nul);
    CHECK(location.kind == Kind::refused);
    CHECK_THAT(location.problem, Catch::Contains("NUL byte (at byte 19 of 64)"));
    CHECK(classify_location(std::string("app.db\0.evil", 12)).kind == Kind::refused);
  }
}

TEST_CASE("shown masks every spelling of a password, as libpq reads it", "[location]") {
  SECTION("URIs") {
    CHECK(admin::shown("postgresql://u:Sekret77@h/db") == "postgresql://u:***@h/db");
    CHECK(admin::shown("POSTGRES://u:Sekret77@h:5433/db") == "postgres://u:***@h:5433/db");
    CHECK(admin::shown("postgresql://u@h/db?password=Sekret77") == "postgresql://u:***@h/db");
    CHECK(admin::shown("postgresql://u@h/db?pass%77ord=Sekret77") == "postgresql://u:***@h/db");
    CHECK(admin::shown("postgresql://u@h/db?%70assword=Sekret77") == "postgresql://u:***@h/db");
    CHECK(admin::shown("postgresql://u@h/db?sslpassword=Sekret77&sslmode=require") ==
          "postgresql://u@h/db?sslmode=require&sslpassword=***");
    CHECK(admin::shown("postgresql://u@h/db?ssl%70assword=Sekret77") ==
          "postgresql://u@h/db?sslpassword=***");
    CHECK(admin::shown("postgresql://u:Sek%72et77@/db?host=/tmp/s") ==
          "postgresql://u:***@/db?host=/tmp/s");
    CHECK(admin::shown("postgresql://u@[::1]:5433/db") == "postgresql://u@[::1]:5433/db");
    CHECK(admin::shown("postgresql://u:pw@a,b/db?target_session_attrs=read-write") ==
          "postgresql://u:***@/db?host=a,b&target_session_attrs=read-write");
  }
  SECTION("libpq's key=value form, in libpq's order of keywords") {
    CHECK(admin::shown("host=h dbname=db user=u password=Sekret77") ==
          "user='u' password=*** dbname='db' host='h'");
    CHECK(admin::shown("host=h password='Sek ret77' sslpassword=Sekret78") ==
          "password=*** host='h' sslpassword=***");
  }
  SECTION("what libpq cannot parse is shown as a phrase, none of it quoted") {
    for (const std::string bad :
         {"postgresql://u:Sekret77@[::1:5510/quota", "postgresql://u:Sekret77@[]:5510/quota",
          "postgresql://u:Sekret77@[::1]x:5510/quota", "postgresql://u:100%Sekret77@h/quota",
          "postgresql://u:Sek%00ret77@h/quota", "postgresql://u@h/db?password=Sekret77&bogus=1",
          "host=h password=Sekret77 Sekret77", "host=h password='Sekret77"}) {
      CAPTURE(bad);
      CHECK(admin::shown(bad) ==
            "(a PostgreSQL connection string that libpq cannot parse, not shown)");
    }
  }
  SECTION("refused and SQLite locations") {
    CHECK_THAT(admin::shown("postgres:Sekret77"), !Catch::Contains("Sekret77"));
    CHECK(admin::shown("app.db") == "app.db");
  }
}

TEST_CASE("a URI password of digits, '/' and more is never shown, nor taken for a port",
          "[location][password]") {
  // libpq reads "quser:2024" as a host and port and "Summer@127.0.0.1:55432/qdb" as the
  // database, so that its messages and a masked rendering would print the password.
  for (const std::string uri :
       {"postgresql://quser:2024/Summer77@127.0.0.1:55432/qdb",
        "postgres://quser:1/Summer77@h/db?sslmode=require",
        "postgresql://quser:2024/@Summer77@h/db", "postgresql://quser:2024/Sum/mer77@h/db"}) {
    CAPTURE(uri);
    const std::string shown = admin::shown(uri);
    CHECK_THAT(shown, !Catch::Contains("Summer") && !Catch::Contains("mer77"));
    CHECK_THAT(admin::migrate_command(uri),
               !Catch::Contains("Summer") && !Catch::Contains("mer77"));
    try {
      Engine::open(uri);
      FAIL("opened " << uri);
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::invalid_argument);
      CHECK_THAT(error.what(), Catch::Contains("write '@' as %40 and '/' as %2F") &&
                                   !Catch::Contains("Summer") && !Catch::Contains("mer77"));
    }
  }
  // A port then a database stays one, and an '@' in the query is no user-info.
  CHECK(admin::shown("postgresql://h:5432/db") == "postgresql://h:5432/db");
  CHECK(admin::shown("postgresql://h:5432/db?user=a@b") == "postgresql://a%40b@h:5432/db");
  CHECK_THAT(admin::shown("postgresql://u:Sekret77@h:5432/db?user=a@b"),
             Catch::Contains(":***@h:5432/db") && !Catch::Contains("Sekret77"));
}

TEST_CASE("opening what libpq cannot parse names the fault and none of the string",
          "[location]") {
  const auto message_of = [](const std::string& location) {
    try {
      Engine::open(location);
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::invalid_argument);
      return std::string(error.what());
    }
    FAIL("opened " << location);
    return std::string();
  };
  const std::string position = message_of("postgresql://u:Sekret77@[::1]x:5510/quota");
  CHECK_THAT(position, Catch::Contains("the PostgreSQL connection string cannot be read "
                                       "(unexpected character, at position ") &&
                           !Catch::Contains("Sekret77") && !Catch::Contains("x:5510"));
  const std::string unknown = message_of("postgresql://u@h/db?password=Sekret77&bogus=1");
  CHECK_THAT(unknown, Catch::Contains("'bogus' is not a connection parameter libpq knows") &&
                          !Catch::Contains("Sekret77"));
  const std::string encoded = message_of("postgresql://u:100%Sekret77@h/quota");
  CHECK_THAT(encoded, Catch::Contains("(invalid percent-encoded token)") &&
                          !Catch::Contains("Sekret77"));
}

TEST_CASE("migrate_command pastes into a shell, and never holds a masked password",
          "[location]") {
  TempDir dir;
  const std::string awkward = dir.file("it's a \"quota\" $HOME.db");
  const std::string command = admin::migrate_command(awkward);
  CHECK(command == "`quotactl migrate --db " + detail::shell_quoted(awkward) + "`");
  // The shell reads the quoted word back as the path, byte for byte.
  const std::string echo = "printf '%s' " + detail::shell_quoted(awkward);
  FILE* pipe = popen(echo.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string printed;
  for (int c; (c = std::fgetc(pipe)) != EOF;) printed += static_cast<char>(c);
  pclose(pipe);
  CHECK(printed == awkward);

  CHECK(admin::migrate_command("postgresql://u:Sekret77@h/db?sslmode=require") ==
        "`quotactl migrate --db 'postgresql://u@h/db?sslmode=require'` (the password is left "
        "out: give it in PGPASSWORD or ~/.pgpass, or add it to the URI)");
  CHECK(admin::migrate_command("postgresql://u@h/db") == "`quotactl migrate --db 'postgresql://u@h/db'`");
  CHECK(admin::migrate_command("host=h password=Sekret77") ==
        "`quotactl migrate --db 'host='\\''h'\\'''` (the password is left out: give it in "
        "PGPASSWORD or ~/.pgpass, or add it to the URI)");
  CHECK(admin::migrate_command("postgresql://u:Sekret77@[::1:5/db") ==
        "`quotactl migrate --db \"$QUOTA_DB\"`");
}

TEST_CASE("a value a message quotes is bounded", "[location]") {
  CHECK(detail::bounded("send") == "send");
  CHECK(detail::bounded("a\nb\x7f") == "a\\x0Ab\\x7F");
  const std::string huge(10'000'000, 'x');
  CHECK(detail::bounded(huge) == std::string(64, 'x') + "…(10000000 bytes)");
  // Cut between characters, never inside one: 63 'x' then a two-byte é.
  CHECK(detail::bounded(std::string(63, 'x') + "\xC3\xA9" + "tail") ==
        std::string(63, 'x') + "…(69 bytes)");
  // A 10 MB limit name gives a short message.
  try {
    Engine engine = Engine::open(":memory:");
    engine.consume(huge, "owner");
    FAIL("consumed with a 10 MB name");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::invalid_argument);
    CHECK(std::string(error.what()).size() < 300);
  }
}

TEST_CASE("a location refused is refused by every opener, and creates no file", "[location]") {
  TempDir dir;
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  for (const std::string& near :
       {std::string("postgres:quota"), std::string("postgresq://u:Sekret77@h/db"),
        std::string("app.db\0tail", 11)}) {
    CAPTURE(near);
    const auto refused = [&](auto&& open) {
      try {
        open();
      } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::invalid_argument);
        CHECK_THAT(error.what(), !Catch::Contains("Sekret77"));
        return true;
      }
      return false;
    };
    CHECK(refused([&] { Engine::open(near); }));
    CHECK(refused([&] { admin::migrate(near, 0); }));
    CHECK(refused([&] { admin::schema_status(near); }));
    CHECK(refused([&] { admin::summarize(near); }));
    CHECK(refused([&] { admin::migrations(near); }));
    CHECK(refused([&] { admin::require_location(near); }));
    CHECK_FALSE(admin::is_server(near));
  }
  CHECK(std::filesystem::is_empty(dir.path()));
  std::filesystem::current_path(before);
}

}  // namespace
}  // namespace quota::test
