// The run function of every quotactl command. Each checks its arguments first (quota::Error
// with ErrorCode::invalid_argument, exit 2), then opens the database, then prints a human
// line or table, or one JSON document with --json. Each returns the exit status: 0 success
// or allowed, 1 not allowed; failures are thrown as quota::Error. cli.cpp holds the table
// that names them and declares their arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "session.h"

namespace quotactl {

// database_commands.cpp
int run_migrate(Session& session, const Arguments& arguments);
int run_status(Session& session, const Arguments& arguments);

// limit_commands.cpp
int run_limit_set(Session& session, const Arguments& arguments);
int run_limit_get(Session& session, const Arguments& arguments);
int run_limit_list(Session& session, const Arguments& arguments);
int run_limit_rm(Session& session, const Arguments& arguments);
// A limit as `limit get --json` shows it.
nlohmann::ordered_json limit_json(const quota::Limit& limit);

// operation_commands.cpp
int run_consume(Session& session, const Arguments& arguments);
int run_check(Session& session, const Arguments& arguments);
int run_record(Session& session, const Arguments& arguments);
int run_reset(Session& session, const Arguments& arguments);
int run_refund(Session& session, const Arguments& arguments);
int run_usage(Session& session, const Arguments& arguments);
int run_sql(Session& session, const Arguments& arguments);
// usage's output, which watch shows too: the JSON array, and the heading line and table at
// `now` (`if_empty` when there are no rows), with coloured bars when colour is on. With
// `with_limit` (usage --owner across every limit), each row names its limit first.
nlohmann::ordered_json usage_json(const std::vector<quota::Usage>& rows, bool with_limit = false);
std::string usage_text(const Session& session, const quota::Limit& limit,
                       const std::vector<quota::Usage>& rows, std::int64_t now,
                       std::string_view if_empty);

// lease_commands.cpp
int run_lease_acquire(Session& session, const Arguments& arguments);
int run_lease_renew(Session& session, const Arguments& arguments);
int run_lease_release(Session& session, const Arguments& arguments);
int run_lease_list(Session& session, const Arguments& arguments);

// watch_command.cpp
int run_watch(Session& session, const Arguments& arguments);

// policy_commands.cpp
int run_override_set(Session& session, const Arguments& arguments);
int run_override_rm(Session& session, const Arguments& arguments);
int run_override_list(Session& session, const Arguments& arguments);
// An override for a person: "maximum 20, burst 40", "exempt", "deny".
std::string describe_override(const quota::Override& override);

// apply_command.cpp
int run_apply(Session& session, const Arguments& arguments);

// maintenance_commands.cpp
int run_gc(Session& session, const Arguments& arguments);

}  // namespace quotactl
