#include "postgresql/private_server.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace quota::test {
namespace {

namespace fs = std::filesystem;

const std::string kBin = "/usr/lib/postgresql/15/bin";
constexpr const char* kPrefix = "quota-pgtest.";

bool running_as_root() { return geteuid() == 0; }

// `command_line` as the server's user: PostgreSQL refuses to run as root.
std::string as_server_user(const std::string& command_line) {
  return running_as_root() ? "runuser -u postgres -- " + command_line : command_line;
}

std::string text_of_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void stop_and_remove(const fs::path& dir) {
  if (fs::exists(dir / "data" / "postmaster.pid")) {
    const std::string stop = as_server_user(kBin + "/pg_ctl -D " + (dir / "data").string() +
                                            " -m immediate -w stop >/dev/null 2>&1");
    [[maybe_unused]] const int ignored = std::system(stop.c_str());
  }
  std::error_code error;
  fs::remove_all(dir, error);
}

// The folders of test processes that were killed before their PrivateServer went away.
void remove_abandoned_servers() {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string owner = text_of_file(entry.path() / "test.pid");
    if (owner.empty()) continue;  // being made right now, or not ours
    const pid_t pid = static_cast<pid_t>(std::atoll(owner.c_str()));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) stop_and_remove(entry.path());
  }
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof address;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  close(fd);
  REQUIRE(bound);
  return ntohs(address.sin_port);
}

void ignore_notice(void*, const char*) {}

}  // namespace

PrivateServer::PrivateServer() : PrivateServer(Setup{}) {}

PrivateServer::PrivateServer(const Setup& setup) : tcp_(setup.tcp) {
  if (!fs::exists(kBin + "/initdb")) {
    FAIL(kBin << "/initdb not found: install postgresql-15 (tools/install-deps.sh does)");
  }
  remove_abandoned_servers();
  std::string pattern = (fs::temp_directory_path() / (std::string(kPrefix) + "XXXXXX")).string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  dir_ = pattern;
  std::ofstream(dir_ + "/test.pid") << getpid() << "\n";
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  if (running_as_root()) {
    REQUIRE(std::system(("chown postgres:postgres " + dir_).c_str()) == 0);
  }
  if (tcp_) port_ = free_loopback_port();
  try {
    // --no-sync: the cluster is thrown away; the server itself keeps fsync on.
    if (setup.standby_of != nullptr) {
      // A copy of the primary's cluster that streams its WAL (-R writes primary_conninfo and
      // standby.signal); the primary's pg_hba.conf (initdb's) trusts local replication.
      run_program(kBin + "/pg_basebackup --no-sync -D " + dir_ + "/data -h " +
                  setup.standby_of->dir() + " -p " + std::to_string(setup.standby_of->port()) +
                  " -U postgres -X stream -R --checkpoint=fast");
    } else {
      run_program(kBin + "/initdb --no-sync -D " + dir_ + "/data -U postgres --auth=trust " +
                  "--encoding=UTF8 --locale=C.UTF-8");
    }
    if (!setup.hba_first.empty()) {
      const std::string hba = dir_ + "/data/pg_hba.conf";
      const std::string rest = text_of_file(hba);
      std::ofstream(hba) << setup.hba_first << "\n" << rest;
    }
    const std::string listen = tcp_ ? "127.0.0.1" : "";
    run_program(kBin + "/pg_ctl -D " + dir_ + "/data -w -t 60 -l " + dir_ + "/server.log -o \"" +
                "-c listen_addresses='" + listen + "' -c unix_socket_directories='" + dir_ +
                "' -p " + std::to_string(port_) + " -c max_connections=50\" start");
    if (setup.standby_of == nullptr) exec("CREATE DATABASE quota_test");
  } catch (...) {
    stop_and_remove(dir_);
    throw;
  }
}

PrivateServer::~PrivateServer() { stop_and_remove(dir_); }

std::string PrivateServer::uri(const std::string& user, const std::string& password,
                               const std::string& parameters) const {
  return "postgresql://" + user + (password.empty() ? "" : ":" + password) +
         "@/quota_test?host=" + dir_ + "&port=" + std::to_string(port_) +
         (parameters.empty() ? "" : "&" + parameters);
}

void PrivateServer::exec(const std::string& sql) const {
  const std::string error = try_exec(sql);
  if (!error.empty()) FAIL("on the private server: " << sql << ": " << error);
}

std::string PrivateServer::try_exec(const std::string& sql) const {
  const std::string server =
      "postgresql://postgres@/" +
      std::string(sql.rfind("CREATE DATABASE", 0) == 0 ? "postgres" : "quota_test") +
      "?host=" + dir_ + "&port=" + std::to_string(port_);
  PGconn* connection = PQconnectdb(server.c_str());
  PQsetNoticeProcessor(connection, ignore_notice, nullptr);
  std::string error;
  if (PQstatus(connection) != CONNECTION_OK) {
    error = PQerrorMessage(connection);
  } else {
    PGresult* result = PQexec(connection, sql.c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK && PQresultStatus(result) != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(result);
    }
    PQclear(result);
  }
  PQfinish(connection);
  return error;
}

void PrivateServer::restart() const {
  run_program(kBin + "/pg_ctl -D " + dir_ + "/data -m fast -w -t 60 restart");
}

void PrivateServer::stop_immediately() const {
  run_program(kBin + "/pg_ctl -D " + dir_ + "/data -m immediate -w -t 60 stop");
}

void PrivateServer::promote() const {
  run_program(kBin + "/pg_ctl -D " + dir_ + "/data -w -t 60 promote");
}

void PrivateServer::run_program(const std::string& command_line) const {
  const std::string log = dir_ + "/programs.log";
  const std::string full = as_server_user(command_line) + " >>" + log + " 2>&1";
  if (std::system(full.c_str()) != 0) {
    FAIL("the private server's program failed: " << command_line << "\n"
                                                 << text_of_file(log)
                                                 << text_of_file(dir_ + "/server.log"));
  }
}

}  // namespace quota::test
