// The PostgreSQL store, on libpq directly.
//
// libpq rather than libpqxx: libpq 15 has pipeline mode (several statements in one round
// trip), which libpqxx 6.4, Debian 12's, does not (its "pipeline" joins query texts); and the
// engine needs only prepare, execute with four parameters, and error fields, which libpq
// gives without another layer. Every statement is prepared once per connection with its
// parameters' types (text, text, bigint, bigint for the request statements), and results
// come back in text form: integers are parsed, booleans ('t'/'f') read as 1/0.
//
// A connection the server ended while it was idle (a restart, pg_terminate_backend,
// idle_session_timeout) is found ended before the next request is sent and made again, so
// that request succeeds. A connection lost while a request was out fails that call with
// ErrorCode::busy; the next call resets the connection, prepares its statements again and
// goes on, so an Engine outlives an outage without being reopened.
#include "postgresql/postgresql_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <poll.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "location.h"
#include "quota/error.h"
#include "sql/families.h"

namespace quota::detail {

namespace {

// Where the password of postgresql://user:password@host/... lies in `uri`: from the ':' after
// the user name to the last '@' before the query (the last '?'), or else to the last '@', so
// that a password holding a character the URI should have percent-encoded ('/', '?', '@',
// '#', ...) is still covered entirely. Empty when there is no user name followed by ':' and,
// somewhere after it, an '@'.
std::pair<std::size_t, std::size_t> user_info_password(std::string_view uri) {
  const std::size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return {0, 0};
  const std::size_t authority = scheme_end + 3;
  const std::size_t colon = uri.find_first_of(":@/?", authority);
  if (colon == std::string_view::npos || uri[colon] != ':') return {0, 0};
  const std::size_t query = uri.rfind('?');
  std::size_t at = query == std::string_view::npos ? std::string_view::npos : uri.rfind('@', query);
  if (at == std::string_view::npos || at < colon) at = uri.rfind('@');
  if (at == std::string_view::npos || at < colon) return {0, 0};
  return {colon + 1, at};
}

bool is_uri(std::string_view conninfo) {
  return conninfo.rfind("postgresql://", 0) == 0 || conninfo.rfind("postgres://", 0) == 0;
}

struct FreeOptions {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using ParsedOptions = std::unique_ptr<PQconninfoOption, FreeOptions>;

// libpq's reading of `conninfo` (a URI or key=value string, percent-encoding decoded), or
// null, with in `error` libpq's reason, which may quote any part of the string.
ParsedOptions parsed(std::string_view conninfo, std::string* error) {
  char* message = nullptr;
  ParsedOptions options(PQconninfoParse(std::string(conninfo).c_str(), &message));
  if (message) {
    if (error) *error = message;
    PQfreemem(message);
  }
  return options;
}

// A value libpq never shows (its display character '*': password, sslpassword).
bool is_secret(const PQconninfoOption& option) {
  return (option.dispchar && std::string_view(option.dispchar) == "*") ||
         std::string_view(option.keyword) == "password" ||
         std::string_view(option.keyword) == "sslpassword";
}

std::string percent_encoded(std::string_view text, std::string_view also_plain) {
  std::string encoded;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || std::string_view("-._~").find(c) != std::string_view::npos ||
        also_plain.find(c) != std::string_view::npos) {
      encoded += c;
    } else {
      encoded += fmt::format("%{:02X}", byte);
    }
  }
  return encoded;
}

// The settings of `options` as a URI, each secret's value replaced by `secret` (or left out
// when `secret` is empty): postgresql://USER[:***]@HOST:PORT/DATABASE?KEY=VALUE&...
std::string as_uri(std::string_view scheme, const PQconninfoOption* options,
                   std::string_view secret) {
  std::map<std::string_view, const PQconninfoOption*> set;
  for (const PQconninfoOption* option = options; option->keyword; ++option) {
    if (option->val && (*option->val || is_secret(*option))) set[option->keyword] = option;
  }
  // A URI of several hosts without ports gives "port=,": nothing to show.
  if (const auto port = set.find("port");
      port != set.end() && std::string_view(port->second->val).find_first_not_of(',') ==
                               std::string_view::npos) {
    set.erase(port);
  }
  const auto take = [&](std::string_view key) -> const char* {
    const auto found = set.find(key);
    if (found == set.end()) return nullptr;
    const char* value = found->second->val;
    set.erase(found);
    return value;
  };
  std::string uri(scheme);
  uri += "://";
  const char* user = take("user");
  const bool password = take("password") != nullptr && !secret.empty();
  if (user) uri += percent_encoded(user, "");
  if (password) uri += fmt::format(":{}", secret);
  if (user || password) uri += '@';
  // One host by name or address (not a socket's folder) and one port go in the authority;
  // several, or a folder, in the query, as libpq also reads them.
  const auto host = set.find("host");
  const auto port = set.find("port");
  if (host != set.end() && *host->second->val &&
      std::string_view(host->second->val).find_first_of("/,") == std::string_view::npos &&
      (port == set.end() || !std::strchr(port->second->val, ','))) {
    const std::string_view name = host->second->val;
    uri += name.find(':') == std::string_view::npos ? percent_encoded(name, "")
                                                    : fmt::format("[{}]", name);  // IPv6
    set.erase(host);
    if (port != set.end()) {
      uri += fmt::format(":{}", percent_encoded(port->second->val, ""));
      set.erase(port);
    }
  }
  uri += '/';
  if (const char* database = take("dbname")) uri += percent_encoded(database, "");
  std::string query;
  for (const auto& [key, option] : set) {
    if (is_secret(*option) && secret.empty()) continue;
    query += fmt::format("{}{}={}", query.empty() ? "?" : "&", key,
                         is_secret(*option) ? std::string(secret)
                                            : percent_encoded(option->val, "/:,@"));
  }
  return uri + query;
}

// The settings of `options` as libpq's key=value string, each secret as in as_uri.
std::string as_key_values(const PQconninfoOption* options, std::string_view secret) {
  std::string text;
  for (const PQconninfoOption* option = options; option->keyword; ++option) {
    if (!option->val || (!*option->val && !is_secret(*option))) continue;
    std::string value;
    if (is_secret(*option)) {
      if (secret.empty()) continue;
      value = secret;
    } else {
      value = "'";
      for (const char* c = option->val; *c; ++c) {
        if (*c == '\\' || *c == '\'') value += '\\';
        value += *c;
      }
      value += "'";
    }
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", option->keyword, value);
  }
  return text;
}

// What may be said of a connection string libpq cannot parse: nothing of the string itself,
// which may hold a password anywhere (libpq's own message quotes it). The reason is libpq's
// words before its first quotation, kept only while they are plain words; the position
// libpq names, and a query parameter's name that libpq does not know, are added.
std::string unparsable(std::string_view conninfo, std::string_view libpq_error) {
  std::string reason(libpq_error.substr(0, libpq_error.find('"')));
  while (!reason.empty() && (reason.back() == ' ' || reason.back() == ':' ||
                             reason.back() == '\n')) {
    reason.pop_back();
  }
  const bool plain = !reason.empty() && std::all_of(reason.begin(), reason.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '-' || c == '%';
  });
  if (!plain) reason = "libpq cannot parse it";
  const std::size_t position = libpq_error.find("at position ");
  if (position != std::string_view::npos) {
    std::size_t end = position + 12;
    while (end < libpq_error.size() && std::isdigit(static_cast<unsigned char>(libpq_error[end]))) {
      ++end;
    }
    if (end > position + 12) reason += fmt::format(", {}", libpq_error.substr(position, end - position));
  }
  if (is_uri(conninfo)) {
    const std::size_t query = conninfo.find('?');
    for (std::size_t at = query; at != std::string_view::npos && at + 1 < conninfo.size();
         at = conninfo.find('&', at + 1)) {
      const std::string_view pair = conninfo.substr(at + 1, conninfo.find('&', at + 1) - at - 1);
      const std::size_t equals = pair.find('=');
      if (equals == std::string_view::npos || equals == 0 || equals > 40) continue;
      const std::string_view key = pair.substr(0, equals);
      const bool word = std::all_of(key.begin(), key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (word && !is_libpq_keyword(key)) {
        reason += fmt::format("; '{}' is not a connection parameter libpq knows", key);
        break;
      }
    }
  }
  return reason;
}

// A password in the user-info that libpq would split where the URI's author did not mean it
// to: libpq ends the user-info at the first '@' (or sees none before a '/'), so an unencoded
// '@' or '/' in the password makes it connect with a piece of it, and take another piece for a
// host, port or database that its messages then print. A '/' after digits is read as a port,
// "host:5432/db", and let through only when the '@' after it lies in the query
// ("host:5432/db?user=a@b"): "u:2024/Summer@host/db" is a password, not a port.
bool splits_password(std::string_view uri) {
  if (!is_uri(uri)) return false;
  const auto [begin, end] = user_info_password(uri);
  if (end <= begin) return false;
  const std::string_view password = uri.substr(begin, end - begin);
  const std::size_t slash = password.find('/');
  const std::size_t query = password.find('?', slash == std::string_view::npos ? 0 : slash);
  const bool port_then_path =
      slash != std::string_view::npos && slash > 0 &&
      password.substr(0, slash).find_first_not_of("0123456789") == std::string_view::npos &&
      query != std::string_view::npos;
  return password.find('@') != std::string_view::npos ||
         (slash != std::string_view::npos && !port_then_path);
}

std::string rendered(std::string_view conninfo, std::string_view secret) {
  if (splits_password(conninfo)) {
    return "(a PostgreSQL URI whose password holds an unencoded '@' or '/', not shown)";
  }
  const ParsedOptions options = parsed(conninfo, nullptr);
  if (!options) return "(a PostgreSQL connection string that libpq cannot parse, not shown)";
  if (is_uri(conninfo)) {
    return as_uri(conninfo.substr(0, conninfo.find(':')), options.get(), secret);
  }
  return as_key_values(options.get(), secret);
}

}  // namespace

std::string mask_password(std::string_view conninfo) { return rendered(conninfo, "***"); }

std::string without_password(std::string_view conninfo, bool* had_password) {
  if (had_password) {
    *had_password = false;
    if (const ParsedOptions options = parsed(conninfo, nullptr)) {
      for (const PQconninfoOption* option = options.get(); option->keyword; ++option) {
        if (is_secret(*option) && option->val) *had_password = true;
      }
    }
  }
  return rendered(conninfo, "");
}

namespace {

constexpr unsigned kBoolOid = 16;
constexpr unsigned kInt8Oid = 20;
constexpr unsigned kTextOid = 25;

struct ClearResult {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, ClearResult>;

struct FinishConnection {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};

std::string scrubbed(std::string message, const std::string& conninfo);

// ?1, ?2, ... -> $1, $2, ...: the store's statements are written once, in SQLite's marks.
std::string numbered_parameters(const std::string& sql) { return dollar_parameters(sql); }

// The server's notices (a DROP's cascade, say) are not the library's to print. One is noted:
// a FATAL error that arrives while no request is out, the server's farewell before it ends
// the connection (a restart, pg_terminate_backend, idle_session_timeout), which libpq hands
// to the notice receiver. `farewell` is the store's flag.
void receive_notice(void* farewell, const PGresult* notice) {
  const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity && (std::string_view(severity) == "FATAL" || std::string_view(severity) == "PANIC")) {
    *static_cast<bool*>(farewell) = true;
  }
}

// libpq's message on one line: its line breaks and the tab that indents its hints ("\n\tIs
// the server running ...?") become one space.
std::string without_newline(const char* message) {
  std::string text;
  for (const char* c = message ? message : ""; *c; ++c) {
    const bool space = *c == '\n' || *c == '\t' || *c == ' ';
    if (!space) {
      text += *c;
    } else if (!text.empty() && text.back() != ' ') {
      text += ' ';
    }
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The four parameters of a request statement in text form, as libpq takes them (:now NULL
// when the request has none).
struct Parameters {
  explicit Parameters(const StatementRequest& request)
      : limit(request.limit),
        owner(request.owner),
        cost(std::to_string(request.cost)),
        now(request.now ? std::to_string(*request.now) : std::string()),
        values{limit.c_str(), owner.c_str(), cost.c_str(), request.now ? now.c_str() : nullptr},
        lengths{static_cast<int>(limit.size()), static_cast<int>(owner.size()), 0, 0} {}
  Parameters(const Parameters&) = delete;
  Parameters& operator=(const Parameters&) = delete;

  const std::string limit, owner, cost, now;
  const std::array<const char*, 4> values;
  const std::array<int, 4> lengths;
  const std::array<int, 4> formats = {0, 0, 0, 0};
};

class PostgresqlStore final : public Store {
 public:
  PostgresqlStore(PGconn* connection, bool owned, PostgresqlSettings settings,
                  std::string conninfo = {})
      : connection_(connection),
        owned_(owned),
        settings_(settings),
        conninfo_(std::move(conninfo)) {
    configure();
  }
  ~PostgresqlStore() override {
    if (owned_) PQfinish(connection_);
  }

  const Dialect& dialect() const override { return kPostgresql; }
  Capabilities capabilities() const override {
    return {.single_writer = false, .atomic_statements = false};
  }
  const std::vector<Migration>& migrations() const override {
    return built_in_postgresql_migrations();
  }

  std::optional<Row> run(Operation operation, StatementKind kind,
                         const StatementRequest& request) override {
    reconnect_if_lost();
    return run_connected(operation, kind, request);
  }

  // run's statement on the connection as it is: inside a transaction, a connection lost
  // fails the statement rather than being made again.
  std::optional<Row> run_connected(Operation operation, StatementKind kind,
                                   const StatementRequest& request) {
    const std::string& name = prepared_request(operation, kind);
    const Parameters parameters(request);
    PgResult result(PQexecPrepared(connection_, name.c_str(), 4, parameters.values.data(),
                                 parameters.lengths.data(), parameters.formats.data(), 0));
    check(result.get());
    std::vector<Row> rows = rows_of(result.get());
    if (rows.empty()) return std::nullopt;
    return std::move(rows.front());
  }

  // Pipeline mode: the transaction's beginning, every request statement and its commit go
  // out together and their results come back together, one round trip for the whole batch.
  // The server sends nothing before a sync or a flush request, so the results of every
  // kPipelineChunk statements are read before more are sent: a long batch never fills both
  // directions of the connection at once (one round trip more per chunk).
  std::vector<std::optional<Row>> run_all(const std::vector<Step>& steps) override {
    reconnect_if_lost();
    std::vector<const std::string*> names;
    names.reserve(steps.size());
    for (const Step& step : steps)
      names.push_back(&prepared_request(step.operation, step.kind));
    const bool nested = in_transaction();
    if (PQenterPipelineMode(connection_) != 1) {
      throw translate("", without_newline(PQerrorMessage(connection_)));
    }
    std::vector<std::optional<Row>> rows;
    rows.reserve(steps.size());
    std::optional<Error> failure;
    // Reads the result of one statement sent: the first failure is kept, and what the server
    // skipped after it (PGRES_PIPELINE_ABORTED) is passed over.
    const auto receive = [&](std::vector<std::optional<Row>>* into) {
      PgResult result(PQgetResult(connection_));
      const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
      if (status == PGRES_PIPELINE_ABORTED) {
        if (!failure) failure = translate("", "the batch was abandoned by the server");
      } else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        if (!failure) {
          try {
            check(result.get());
          } catch (const Error& error) {
            failure = error;
          }
        }
      } else if (into) {
        std::vector<Row> found = rows_of(result.get());
        into->push_back(found.empty() ? std::nullopt
                                      : std::optional<Row>(std::move(found.front())));
      }
      // Each statement's results end with a null result.
      while (result) result.reset(PQgetResult(connection_));
    };
    const auto send = [&](const char* sql) {
      if (PQsendQueryParams(connection_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1 &&
          !failure) {
        failure = translate("", without_newline(PQerrorMessage(connection_)));
      }
    };
    send(nested ? "SAVEPOINT quota_batch" : "BEGIN");
    std::size_t sent = 0;
    std::size_t received = 0;
    bool opening_read = false;
    while (sent < steps.size() && !failure) {
      const std::size_t end = std::min(steps.size(), sent + kPipelineChunk);
      for (; sent < end; ++sent) {
        const Parameters parameters(steps[sent].request);
        if (PQsendQueryPrepared(connection_, names[sent]->c_str(), 4, parameters.values.data(),
                                parameters.lengths.data(), parameters.formats.data(), 0) != 1) {
          failure = translate("", without_newline(PQerrorMessage(connection_)));
          break;
        }
      }
      if (sent < steps.size() && !failure) {
        // A chunk ends before the batch does: have the server send what it has, and read it.
        if (PQsendFlushRequest(connection_) != 1 || PQflush(connection_) != 0) {
          failure = translate("", without_newline(PQerrorMessage(connection_)));
          break;
        }
        if (!opening_read) {
          receive(nullptr);
          opening_read = true;
        }
        for (; received < sent; ++received) receive(&rows);
      }
    }
    const std::size_t queued = sent;
    // With plain steps the ending waits: one that answers nothing runs its general
    // statement first, in the same transaction (below).
    const bool plain_steps =
        std::any_of(steps.begin(), steps.end(), [](const Step& step) { return is_specialised(step.kind); });
    const char* ending = nested ? "RELEASE SAVEPOINT quota_batch" : "COMMIT";
    if (!failure && !plain_steps) send(ending);
    const bool ending_sent = !failure && !plain_steps;
    if (PQpipelineSync(connection_) != 1 && !failure) {
      failure = translate("", without_newline(PQerrorMessage(connection_)));
    }
    if (!opening_read) receive(nullptr);
    for (; received < queued; ++received) receive(&rows);
    if (ending_sent) receive(nullptr);
    // The sync's own result, then out of pipeline mode.
    for (PgResult result(PQgetResult(connection_)); result; result.reset(PQgetResult(connection_))) {
      if (PQresultStatus(result.get()) == PGRES_PIPELINE_SYNC) break;
    }
    PQexitPipelineMode(connection_);
    if (!failure && plain_steps) {
      try {
        for (std::size_t i = 0; i < steps.size(); ++i) {
          if (!rows[i] && is_specialised(steps[i].kind)) {
            rows[i] = run_connected(steps[i].operation, general_kind(steps[i].kind),
                                    steps[i].request);
          }
        }
        simple(ending);
      } catch (const Error& error) {
        failure = error;
      }
    }
    if (failure) {
      PQclear(PQexec(connection_, nested ? "ROLLBACK TO SAVEPOINT quota_batch; RELEASE SAVEPOINT "
                                           "quota_batch"
                                         : "ROLLBACK"));
      throw *failure;
    }
    return rows;
  }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& parameters) override {
    reconnect_if_lost();
    PgResult result = exec_params(sql, parameters);
    return rows_of(result.get());
  }

  std::int64_t execute(const std::string& sql, const std::vector<Value>& parameters) override {
    reconnect_if_lost();
    PgResult result = exec_params(sql, parameters);
    const char* changed = PQcmdTuples(result.get());
    return changed && *changed ? std::stoll(changed) : 0;
  }

  void savepoint(std::string_view name) override {
    reconnect_if_lost();
    // A savepoint needs a transaction: outside one, this savepoint begins it, and its release
    // commits it.
    const bool begins = PQtransactionStatus(connection_) == PQTRANS_IDLE;
    if (begins) simple("BEGIN");
    savepoints_.push_back({std::string(name), begins});
    simple(fmt::format("SAVEPOINT {}", name));
  }

  void rollback_to(std::string_view name) override {
    simple(fmt::format("ROLLBACK TO SAVEPOINT {}", name));
  }

  void release(std::string_view name) override {
    const bool began = pop_savepoint(name);
    simple(began ? std::string("COMMIT") : fmt::format("RELEASE SAVEPOINT {}", name));
  }

  void abandon(std::string_view name) noexcept override {
    const bool began = pop_savepoint(name);
    const std::string sql =
        began ? std::string("ROLLBACK")
              : fmt::format("ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}", name);
    PQclear(PQexec(connection_, sql.c_str()));
  }

  // A server waits for its locks itself (up to lock_timeout), and needs nothing before or
  // after the schema is read: the opening is one step, run once.
  void retry_while_busy(const std::function<void()>& step) override { step(); }
  void probe() override {}
  void prepare_for_writing() override {}
  void started() override {}

  bool in_transaction() override { return PQtransactionStatus(connection_) != PQTRANS_IDLE; }

  std::optional<Location> watch_location() override {
    const std::string conninfo = watch_conninfo();
    if (conninfo.empty()) return std::nullopt;
    return Location{Location::Kind::postgresql, conninfo, {}};
  }

  std::optional<std::string> journal_mode() override { return std::nullopt; }

  bool has_table(std::string_view name) override {
    // The catalog read with the statement's snapshot, not to_regclass(): that looks the name
    // up in the connection's catalog cache without a lock, and so does not see a table that
    // another connection created while this one waited for the migration lock (a second
    // `quotactl migrate` then ran the migration again and failed).
    const std::vector<Row> rows = query(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relname = ?1 AND n.nspname = ANY "
        "(current_schemas(false)))",
        {Value(std::string(name))});
    return !rows.empty() && integer_of(rows.front().at(0)) != 0;
  }

  void begin_exclusive(Exclusive what) override {
    reconnect_if_lost();
    nested_exclusive_ = in_transaction();
    if (what == Exclusive::migration) {
      // One migrating connection at a time, whichever host it is on: an advisory lock on a
      // number of the engine's own ("quota" in ASCII). Outside a transaction it is taken
      // before the transaction begins, so that the transaction, which begins after the
      // migration of the connection that held the lock, sees its tables: a backend reads its
      // catalog caches afresh when a transaction begins, not when an advisory lock is
      // granted, and would otherwise still miss a table it looked for before.
      if (nested_exclusive_) {
        simple("SAVEPOINT quota_exclusive");
        simple(fmt::format("SELECT pg_advisory_xact_lock({})", kMigrationLock));
      } else {
        simple(fmt::format("SELECT pg_advisory_lock({})", kMigrationLock));
        session_lock_ = true;
        simple("BEGIN");
      }
      return;
    }
    if (what == Exclusive::requests) {
      simple(nested_exclusive_ ? "SAVEPOINT quota_exclusive" : "BEGIN");
      return;
    }
    if (what == Exclusive::configuration) {
      // Taken before the apply reads anything: each statement of a READ COMMITTED
      // transaction sees what was committed before it began, so the reads after the lock see
      // the whole of the apply that held it. Waits up to lock_timeout (the busy timeout).
      simple(nested_exclusive_ ? "SAVEPOINT quota_exclusive" : "BEGIN");
      try {
        simple(fmt::format("SELECT pg_advisory_xact_lock({})", kConfigurationLock));
      } catch (...) {
        rollback();
        throw;
      }
      return;
    }
    // No request writes state while a gc batch decides what is dead and deletes it; the
    // batch's reads take their snapshot after the lock, so they see every committed write.
    // The state tables are locked together or not at all (NOWAIT, then again after a pause,
    // until the busy timeout): a gc that held one table's lock while it waited for
    // another's would deadlock with a request (or a batch) that writes them in the other
    // order, and the server would abort the request.
    static const std::string kLockState = fmt::format(
        "LOCK TABLE {} IN EXCLUSIVE MODE NOWAIT", sql::table_list(sql::sweep_order()));
    const auto deadline = std::chrono::steady_clock::now() + settings_.busy_timeout;
    for (;;) {
      simple(nested_exclusive_ ? "SAVEPOINT quota_exclusive" : "BEGIN");
      try {
        simple(kLockState);
        return;
      } catch (const Error& error) {
        rollback();
        if (error.code() != ErrorCode::busy || std::chrono::steady_clock::now() >= deadline) {
          throw;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void commit() override {
    simple(nested_exclusive_ ? "RELEASE SAVEPOINT quota_exclusive" : "COMMIT");
    unlock_session();
  }

  void rollback() noexcept override {
    PQclear(PQexec(connection_, nested_exclusive_ ? "ROLLBACK TO SAVEPOINT quota_exclusive; "
                                                    "RELEASE SAVEPOINT quota_exclusive"
                                                  : "ROLLBACK"));
    unlock_session();
  }

  void execute_script(const std::string& sql) override { simple(sql); }

 private:
  static constexpr long long kMigrationLock = 1903520865;
  // "quotaapp" in ASCII: one Engine::apply at a time on a database, whichever host it runs on.
  static constexpr long long kConfigurationLock = 0x71756f7461617070;
  static constexpr std::size_t kPipelineChunk = 256;

  // Where a second connection reaches this database; empty when none can be made.
  std::string watch_conninfo() const {
    // The string the engine connected with, as given: its messages are masked as the first
    // connection's were.
    if (!conninfo_.empty()) return conninfo_;
    // The application's connection: every setting it was made with, as key='value' pairs
    // (which mask_password masks when a message names them).
    std::string conninfo;
    PQconninfoOption* options = PQconninfo(connection_);
    if (!options) return conninfo;
    for (PQconninfoOption* option = options; option->keyword; ++option) {
      if (!option->val || !*option->val) continue;
      std::string value;
      for (const char* c = option->val; *c; ++c) {
        if (*c == '\\' || *c == '\'') value += '\\';
        value += *c;
      }
      conninfo += fmt::format("{}{}='{}'", conninfo.empty() ? "" : " ", option->keyword, value);
    }
    PQconninfoFree(options);
    return conninfo;
  }

  // Releases the session's migration lock, if it holds one (never throws: a connection that
  // is lost has lost its locks with it).
  void unlock_session() noexcept {
    if (!session_lock_) return;
    session_lock_ = false;
    PQclear(
        PQexec(connection_, fmt::format("SELECT pg_advisory_unlock({})", kMigrationLock).c_str()));
  }

  struct Savepoint {
    std::string name;
    bool began_transaction;
  };

  // The engine's own connection: lock waits end at the busy timeout (busy); text in and out
  // as UTF-8; the server's notices are not printed. The application's connection is left as
  // the application set it.
  void configure() {
    if (!owned_ || PQstatus(connection_) != CONNECTION_OK) return;
    farewell_ = false;
    PQsetNoticeReceiver(connection_, receive_notice, &farewell_);
    simple(fmt::format("SET lock_timeout = {}", settings_.busy_timeout.count()));
    simple("SET client_encoding = 'UTF8'");
  }

  bool pop_savepoint(std::string_view name) {
    for (auto it = savepoints_.rbegin(); it != savepoints_.rend(); ++it) {
      if (it->name == name) {
        const bool began = it->began_transaction;
        savepoints_.erase(std::next(it).base());
        return began;
      }
    }
    return false;
  }

  // Whether the server ended the connection while it was idle (a restart, an operator's
  // pg_terminate_backend, idle_session_timeout). libpq learns of it only when it reads the
  // socket, so PQstatus still says CONNECTION_OK: the server's farewell (a FATAL error) and
  // the end of the stream wait there, unread. Sending a request on it would fail, and with an
  // outcome that looks unknown; reading what waits first tells a dropped connection from a
  // live one for sure, without a round trip. Only between transactions: inside one, a lost
  // connection has lost its work, and the statement must fail.
  bool dropped_while_idle() {
    if (PQtransactionStatus(connection_) != PQTRANS_IDLE) return false;
    // A few reads at most: the farewell, then the end of the stream.
    for (int reads = 0; reads < 8; ++reads) {
      const int socket = PQsocket(connection_);
      if (socket < 0) return true;
      pollfd descriptor{socket, POLLIN, 0};
      const int ready = poll(&descriptor, 1, 0);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return false;  // let the request meet whatever it is
      if (ready == 0) return false;  // nothing waits: the connection is alive
      // Something waits while no request is out: a notice, a notification, or the server's
      // farewell and end of stream. libpq buffers what it reads (an application's
      // notifications stay for its PQnotifies). The farewell may come a moment before the
      // end of the stream: the server closes the socket last as its backend exits.
      // PQconsumeInput only reads; PQisBusy parses what was read, handing a farewell to
      // receive_notice.
      if (PQconsumeInput(connection_) == 0) return true;
      PQisBusy(connection_);
      if (PQstatus(connection_) != CONNECTION_OK || farewell_) return true;
    }
    return false;
  }

  // A connection that the server or the network dropped is reset before the next statement:
  // the prepared statements went with it, and are prepared again on first use.
  void reconnect_if_lost() {
    if (PQstatus(connection_) == CONNECTION_OK && !dropped_while_idle()) return;
    if (!owned_) {
      throw Error(ErrorCode::busy,
                  "the application's connection to the PostgreSQL server is lost: connect it "
                  "again (the engine does not reset a connection it was given)");
    }
    PQreset(connection_);
    prepared_.clear();
    savepoints_.clear();
    if (PQstatus(connection_) != CONNECTION_OK) {
      throw Error(ErrorCode::busy,
                  fmt::format("the connection to the PostgreSQL server is lost and cannot be "
                              "made again ({}): retry when the server is back",
                              scrubbed(without_newline(PQerrorMessage(connection_)), conninfo_)));
    }
    configure();
  }

  const std::string& prepared_request(Operation operation, StatementKind kind) {
    const auto key = std::make_pair(static_cast<int>(operation), static_cast<int>(kind));
    auto found = prepared_.find(key);
    if (found != prepared_.end()) return found->second;
    const std::string name =
        fmt::format("quota_{}_{}", operation_name(operation), kind_name(kind));
    const std::array<unsigned, 4> types = {kTextOid, kTextOid, kInt8Oid, kInt8Oid};
    PgResult result(PQprepare(connection_, name.c_str(),
                            statement(kPostgresql, operation, kind).c_str(), 4, types.data()));
    check(result.get());
    return prepared_.emplace(key, name).first->second;
  }

  PgResult exec_params(const std::string& sql, const std::vector<Value>& parameters) {
    std::vector<std::string> texts(parameters.size());
    std::vector<const char*> values(parameters.size(), nullptr);
    std::vector<unsigned> types(parameters.size(), 0);
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      if (const auto* integer = std::get_if<std::int64_t>(&parameters[i])) {
        texts[i] = std::to_string(*integer);
        types[i] = kInt8Oid;
        values[i] = texts[i].c_str();
      } else if (const auto* text = std::get_if<std::string>(&parameters[i])) {
        types[i] = kTextOid;
        values[i] = text->c_str();
      }
    }
    const std::string text = numbered_parameters(sql);
    PgResult result(PQexecParams(connection_, text.c_str(), static_cast<int>(parameters.size()),
                               types.data(), values.data(), nullptr, nullptr, 0));
    check(result.get());
    return result;
  }

  void simple(const std::string& sql) {
    PgResult result(PQexec(connection_, sql.c_str()));
    check(result.get());
  }

  static std::vector<Row> rows_of(PGresult* result) {
    std::vector<Row> rows;
    const int count = PQntuples(result);
    const int columns = PQnfields(result);
    rows.reserve(static_cast<std::size_t>(count));
    for (int r = 0; r < count; ++r) {
      Row row;
      row.reserve(static_cast<std::size_t>(columns));
      for (int c = 0; c < columns; ++c) {
        if (PQgetisnull(result, r, c)) {
          row.emplace_back(std::monostate{});
          continue;
        }
        const char* text = PQgetvalue(result, r, c);
        const unsigned type = PQftype(result, c);
        if (type == kBoolOid) {
          row.emplace_back(std::int64_t{text[0] == 't' ? 1 : 0});
        } else if (type == kInt8Oid || type == 23 /* int4 */ || type == 21 /* int2 */) {
          std::int64_t value = 0;
          std::from_chars(text, text + PQgetlength(result, r, c), value);
          row.emplace_back(value);
        } else {
          row.emplace_back(std::string(text, static_cast<std::size_t>(PQgetlength(result, r, c))));
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  // Turns a failed result into quota::Error, by its SQLSTATE.
  void check(PGresult* result) const {
    const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
    const char* state_field = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    const std::string state = state_field ? state_field : "";
    const std::string message =
        without_newline(result ? PQresultErrorMessage(result) : PQerrorMessage(connection_));
    throw translate(state, message);
  }

  Error translate(const std::string& state, const std::string& message) const {
    const std::string what = fmt::format("{} [SQLSTATE {}]", message, state);
    if (message.find("unknown limit") != std::string::npos) {
      return Error(ErrorCode::unknown_limit, "unknown limit: " + what);
    }
    const std::string_view klass = std::string_view(state).substr(0, 2);
    if (state == "57014" && PQstatus(connection_) == CONNECTION_OK) {
      // query_canceled: statement_timeout ran out (or someone ran pg_cancel_backend); the
      // transaction was rolled back, and the connection is still good.
      return Error(ErrorCode::busy,
                   fmt::format("the server cancelled the statement because it ran longer than "
                               "statement_timeout (or an operator cancelled it) ({}); nothing "
                               "was changed: retry, and if it recurs raise statement_timeout "
                               "for the engine's role (ALTER ROLE ... SET statement_timeout = "
                               "...) or find what holds the statement up (pg_stat_activity)",
                               what));
    }
    if (state == "25006") {
      // read_only_sql_transaction: a standby, or default_transaction_read_only on.
      return Error(ErrorCode::io,
                   fmt::format("the PostgreSQL server or session is read-only ({}): it is a "
                               "standby, or default_transaction_read_only is on for the server, "
                               "database or role; connect to the primary (a multi-host URI "
                               "with target_session_attrs=read-write finds it) or turn "
                               "default_transaction_read_only off, then retry",
                               what));
    }
    if (state.empty() || klass == "08" || klass == "57" || PQstatus(connection_) != CONNECTION_OK) {
      return Error(ErrorCode::busy,
                   fmt::format("the PostgreSQL server could not be reached or ended the "
                               "connection ({}): retry; the next call connects again",
                               message.empty() ? "no answer" : message));
    }
    if (state == "55P03" || state == "40001" || state == "40P01") {
      return Error(ErrorCode::busy,
                   fmt::format("a row stayed locked by another transaction for longer than the "
                               "busy timeout ({} ms) ({}): retry later or raise the timeout",
                               settings_.busy_timeout.count(), what));
    }
    if (klass == "23" || klass == "22") {
      return Error(ErrorCode::invalid_argument,
                   "the database refused a value (" + what + "): check the arguments");
    }
    if (state == "42P01" || state == "42883") {
      return Error(ErrorCode::not_migrated, "the database has no quota schema, or an older one (" +
                                                what + "): run `quotactl migrate --db URI`");
    }
    if (state == "42501") {
      // A least-privilege role (docs/postgresql-roles.sql) meets this for what it is not
      // meant to do (define, change or remove limits and overrides, migrate), and a role
      // whose grants are incomplete for what it is meant to do: a configuration error that
      // the failure policy never answers.
      return Error(ErrorCode::permission_denied,
                   "the database role lacks a privilege (" + what +
                       "): changing limits or overrides and migrating need the owner of "
                       "quota's tables, so run that as the owner; a role that consumes needs "
                       "the grants of docs/postgresql-roles.sql (run it again after a "
                       "migration)");
    }
    if (klass == "53") {
      return Error(ErrorCode::io, "the server is out of a resource (" + what +
                                      "): free disk or memory on the server, then retry");
    }
    return Error(ErrorCode::io, "database error: " + what);
  }

  PGconn* connection_;
  bool owned_;
  PostgresqlSettings settings_;
  std::string conninfo_;  // what the engine connected with; empty for the application's
  bool farewell_ = false;  // the server sent a FATAL error while idle (the engine's own only)
  std::map<std::pair<int, int>, std::string> prepared_;
  std::vector<Savepoint> savepoints_;
  bool nested_exclusive_ = false;
  bool session_lock_ = false;  // the migration lock, held by the session (not a transaction)
};

}  // namespace

namespace {

// `message` (libpq's) without any secret of `conninfo` or of the environment, wherever libpq
// might have echoed one: each value is replaced by "***", as written and as percent-decoded.
std::string scrubbed(std::string message, const std::string& conninfo) {
  std::vector<std::string> secrets;
  if (const ParsedOptions options = parsed(conninfo, nullptr)) {
    for (const PQconninfoOption* option = options.get(); option->keyword; ++option) {
      if (is_secret(*option) && option->val && *option->val) secrets.emplace_back(option->val);
    }
  }
  if (is_uri(conninfo)) {
    const auto [begin, end] = user_info_password(conninfo);
    if (end > begin) secrets.push_back(conninfo.substr(begin, end - begin));
  }
  for (const char* variable : {"PGPASSWORD", "PGSSLPASSWORD"}) {
    if (const char* value = std::getenv(variable); value && *value) secrets.emplace_back(value);
  }
  for (const std::string& secret : secrets) {
    for (std::size_t found = message.find(secret); found != std::string::npos;
         found = message.find(secret, found + 3)) {
      message.replace(found, secret.size(), "***");
    }
  }
  return message;
}

void require_encoded_password(const std::string& uri) {
  if (splits_password(uri)) {
    throw Error(ErrorCode::invalid_argument,
                "the password in the PostgreSQL URI holds an '@' or '/' that is not "
                "percent-encoded, which would split it (the URI is not shown, as it holds the "
                "password): write '@' as %40 and '/' as %2F, or give the password in PGPASSWORD "
                "or ~/.pgpass instead");
  }
}

// Refuses a connection string libpq cannot parse, showing none of it.
void require_parsable(const std::string& conninfo) {
  std::string error;
  if (parsed(conninfo, &error)) return;
  throw Error(ErrorCode::invalid_argument,
              fmt::format("the PostgreSQL connection string cannot be read ({}); it is not "
                          "shown, as it may hold a password: check its brackets around an IPv6 "
                          "address, its percent-encoding (a '%' is written %25) and its "
                          "parameters' names, or give the password in PGPASSWORD or ~/.pgpass",
                          unparsable(conninfo, error)));
}

}  // namespace

std::unique_ptr<Store> open_postgresql(const std::string& conninfo, PostgresqlSettings settings) {
  require_encoded_password(conninfo);
  require_parsable(conninfo);
  std::unique_ptr<PGconn, FinishConnection> connection(PQconnectdb(conninfo.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    const std::string reason =
        connection ? scrubbed(without_newline(PQerrorMessage(connection.get())), conninfo)
                   : "out of memory";
    throw Error(ErrorCode::io,
                fmt::format("cannot connect to PostgreSQL at {} ({}): check that the server "
                            "runs, and the connection string's host, port, database, user and "
                            "password",
                            mask_password(conninfo), reason));
  }
  return std::make_unique<PostgresqlStore>(connection.release(), true, settings, conninfo);
}

std::unique_ptr<Store> postgresql_on_connection(PGconn* connection, PostgresqlSettings settings) {
  if (!connection || PQstatus(connection) != CONNECTION_OK) {
    throw Error(ErrorCode::invalid_argument,
                "the PostgreSQL connection given to the engine is not open: connect it first");
  }
  return std::make_unique<PostgresqlStore>(connection, false, settings);
}

}  // namespace quota::detail
