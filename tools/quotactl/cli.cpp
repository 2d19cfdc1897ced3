// quotactl's command table and run(): the parser is built from kCommands, the chosen
// command's run function does the work, and every failure becomes one error line and an
// exit status (0 success or allowed, 1 not allowed, 2 invalid input, 3 database or
// environment).
#include "cli.h"

#include <SQLiteCpp/Exception.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string_view>

#include "commands.h"
#include "quota/version.h"
#include "text.h"

namespace quotactl {
namespace {

using Declare = void (*)(CLI::App&, Arguments&);
using Run = int (*)(Session&, const Arguments&);

// One command: its name (a word per level: "limit set" is `set` under `limit`), its one-line
// help, what arguments it takes, and the function that runs it. A command without a run
// function is a group whose commands follow it.
struct Command {
  std::string_view name;
  std::string_view help;
  Declare declare;
  Run run;
};

void declare_name(CLI::App& command, Arguments& arguments) {
  command.add_option("NAME", arguments.limit, "the limit's name: 1-64 of A-Z a-z 0-9 _ . : -")
      ->required()
      ->type_name("");
}

void declare_name_owner(CLI::App& command, Arguments& arguments) {
  declare_name(command, arguments);
  command.add_option("OWNER", arguments.owner, "whom the limit counts: a user id, IP, e-mail...")
      ->required()
      ->type_name("");
}

void declare_request(CLI::App& command, Arguments& arguments) {
  declare_name_owner(command, arguments);
  command.add_option("--cost", arguments.cost, "units this request uses (default 1)")
      ->type_name("N");
}

void declare_limit_set(CLI::App& command, Arguments& arguments) {
  declare_name(command, arguments);
  command.add_option("--max", arguments.maximum, "units allowed per period")
      ->required()
      ->type_name("N");
  command
      .add_option("--per", arguments.per,
                  "the period: a DURATION, 500ms, 30s, 1m, 1h, 1d (at most 366d), or a calendar "
                  "unit, day, week, month or year (fixed_window); required but with --ttl")
      ->type_name("DURATION|UNIT");
  command
      .add_option("--ttl", arguments.ttl,
                  "a concurrency limit (at most --max units held at once): its leases' time "
                  "to live, 1s to 1d; takes --algo concurrency (its default), not --per")
      ->type_name("DURATION");
  command
      .add_option("--utc-offset", arguments.utc_offset,
                  "with a calendar unit: the calendar's offset from UTC, -14:00 to +14:00 "
                  "(default +00:00)")
      ->type_name("±HH:MM");
  command
      .add_option("--anchor", arguments.anchor,
                  "with a calendar unit: an ISO-8601 instant (2026-03-17T09:30:00Z) whose "
                  "place in the unit starts every window (default: the unit's own start)")
      ->type_name("INSTANT");
  command
      .add_option("--algo", arguments.algorithm,
                  "sliding_log, fixed_window, sliding_window, token_bucket or concurrency "
                  "(default: fixed_window for a calendar unit, concurrency with --ttl, else "
                  "the existing limit's, else sliding_log)")
      ->type_name("ALGO");
  command.add_option("--burst", arguments.burst, "token_bucket only: the bucket's capacity")
      ->type_name("N");
  auto* shadow = command.add_flag(
      "--shadow", arguments.shadow,
      "shadow mode: never deny, count would-be denials (default: keep the limit's mode)");
  command.add_flag("--enforce", arguments.enforce, "leave shadow mode: deny again")
      ->excludes(shadow);
  auto* block = command
                    .add_option("--block", arguments.block,
                                "lock an owner out this long after a denial (default: keep "
                                "the limit's block)")
                    ->type_name("DURATION");
  command.add_flag("--no-block", arguments.no_block, "no lockout after a denial")->excludes(block);
}

void declare_reset(CLI::App& command, Arguments& arguments) {
  declare_name_owner(command, arguments);
  command.get_option("NAME")->description("the limit's name, or '*' for every limit");
}

void declare_key(CLI::App& command, Arguments& arguments) {
  command
      .add_option("--key", arguments.key,
                  "an idempotency key (1-255 bytes): a retry with the same key is answered "
                  "as the first request was, and charges nothing")
      ->type_name("KEY");
}

void declare_consume(CLI::App& command, Arguments& arguments) {
  declare_request(command, arguments);
  command.get_option("NAME")->description(
      "the limit's name, or several joined by commas (a,b): all must allow; NAME=COST gives a "
      "limit a cost of its own (tokens=500,requests)");
  auto* wait = command
                   .add_option("--wait", arguments.wait,
                               "when denied, wait for the retry and try again, for at most this long")
                   ->type_name("DURATION");
  declare_key(command, arguments);
  command.get_option("--key")->excludes(wait);
}

void declare_check(CLI::App& command, Arguments& arguments) {
  declare_request(command, arguments);
  command.get_option("NAME")->description(
      "the limit's name, or several joined by commas (a,b): all must allow; NAME=COST gives a "
      "limit a cost of its own (tokens=500,requests)");
}

void declare_record(CLI::App& command, Arguments& arguments) {
  declare_request(command, arguments);
  declare_key(command, arguments);
}

void declare_lease_acquire(CLI::App& command, Arguments& arguments) {
  declare_request(command, arguments);
  declare_key(command, arguments);
}

void declare_override_owner(CLI::App& command, Arguments& arguments) {
  command.add_option("NAME", arguments.limit, "the limit's name, or '*' for every limit")
      ->required()
      ->type_name("");
  command.add_option("OWNER", arguments.owner, "the owner the override is for")
      ->required()
      ->type_name("");
}

void declare_override_set(CLI::App& command, Arguments& arguments) {
  declare_override_owner(command, arguments);
  auto* maximum =
      command.add_option("--max", arguments.maximum, "the owner's own maximum per period")
          ->type_name("N");
  command
      .add_option("--burst", arguments.burst,
                  "with --max, for a token bucket: the owner's own burst (default: --max)")
      ->type_name("N")
      ->needs(maximum);
  auto* exempt = command.add_flag("--exempt", arguments.exempt, "always allowed, uses no quota")
                     ->excludes(maximum);
  command.add_flag("--deny", arguments.deny, "always denied (owner_denied)")
      ->excludes(maximum)
      ->excludes(exempt);
  command
      .add_option("--anchor", arguments.anchor,
                  "the owner's own start of a calendar limit's windows: an ISO-8601 instant "
                  "(2026-03-17T09:30:00Z), alone or with a policy")
      ->type_name("INSTANT");
}

void declare_override_list(CLI::App& command, Arguments& arguments) {
  command
      .add_option("NAME", arguments.override_limit,
                  "only this limit's overrides ('*' for those of every limit)")
      ->type_name("");
}

void declare_usage(CLI::App& command, Arguments& arguments) {
  command
      .add_option("NAME", arguments.limit,
                  "the limit's name (without it, --owner shows that owner on every limit)")
      ->type_name("");
  command.add_option("--owner", arguments.owner_filter, "show only this owner")->type_name("OWNER");
  command.add_option("--top", arguments.top, "show at most K owners")->type_name("K");
  command
      .add_option("--by", arguments.by,
                  "order by used (default), denied, or shadow_denied (whom shadow mode would "
                  "have stopped); blocked: only the owners locked out now")
      ->type_name("used|denied|shadow_denied|blocked");
}

void declare_watch(CLI::App& command, Arguments& arguments) {
  declare_name(command, arguments);
  command.add_option("--owner", arguments.owner_filter, "watch only this owner")
      ->type_name("OWNER");
  command
      .add_option("--for", arguments.watch_for,
                  "stop after this long: 500ms, 30s, 1m, 1h, 1d (default: until q, Ctrl-C or "
                  "SIGTERM)")
      ->type_name("DURATION");
}

void declare_lease_id(CLI::App& command, Arguments& arguments) {
  command.add_option("ID", arguments.lease, "the lease's ID, as `lease acquire` printed it")
      ->required()
      ->type_name("");
}

void declare_lease_renew(CLI::App& command, Arguments& arguments) {
  declare_lease_id(command, arguments);
  command
      .add_option("--ttl", arguments.ttl,
                  "how long the lease lives from now, 1s to 1d (default: its limit's TTL)")
      ->type_name("DURATION");
}

void declare_lease_list(CLI::App& command, Arguments& arguments) {
  declare_name(command, arguments);
  command.add_option("--owner", arguments.owner_filter, "only this owner's leases")
      ->type_name("OWNER");
}

void declare_sql(CLI::App& command, Arguments& arguments) {
  command
      .add_option("OPERATION", arguments.operation,
                  "consume, check, record, reset or refund; acquire, renew or release (leases)")
      ->required()
      ->type_name("");
  command
      .add_option("NAME", arguments.sql_limit,
                  "a limit, for the statement of its algorithm (default: sliding_log's)")
      ->type_name("");
  command.add_flag("--key", arguments.sql_key,
                   "consume, record or acquire with an idempotency key: the statements of the "
                   "keyed protocol in order, each with what to do with its answer");
}

void declare_migrate(CLI::App& command, Arguments& arguments) {
  command.add_flag("--dry-run", arguments.dry_run,
                   "print the SQL that would run; create and change nothing");
}

void declare_gc(CLI::App& command, Arguments& arguments) {
  command
      .add_option("--batch", arguments.batch, "rows examined per write transaction (default 1000)")
      ->type_name("N");
}

void declare_apply(CLI::App& command, Arguments& arguments) {
  command
      .add_option("FILE", arguments.file,
                  "a TOML file of [[limit]] (and [[override]]) tables, or - for standard input")
      ->required()
      ->type_name("");
  command.add_flag("--dry-run", arguments.dry_run, "print the plan; change nothing");
  command.add_flag("--prune", arguments.prune,
                   "also remove the limits and overrides the file does not declare");
  command.add_flag("--check", arguments.check,
                   "change nothing; exit 1 when the database differs from the file (drift)");
  command.add_flag("--allow-empty", arguments.allow_empty,
                   "with --prune, accept a file that declares no limit (it removes every limit)");
}

void declare_help(CLI::App& command, Arguments& arguments) {
  command.add_option("COMMAND", arguments.topic, "the command to explain")->type_name("");
}

int run_help(Session& session, const Arguments& arguments);

constexpr Command kCommands[] = {
    {"migrate", "create the database if missing and apply pending schema migrations",
     declare_migrate, run_migrate},
    {"status", "schema version, pending migrations, journal mode and counts (never writes)",
     nullptr, run_status},
    {"limit", "define, show and remove limits", nullptr, nullptr},
    {"limit set", "create or update a limit (idempotent)", declare_limit_set, run_limit_set},
    {"limit get", "show one limit", declare_name, run_limit_get},
    {"limit list", "show every limit", nullptr, run_limit_list},
    {"limit rm", "remove a limit and its state", declare_name, run_limit_rm},
    {"consume", "use units if the limit (or every limit of a,b) allows it (exit 1 when denied)",
     declare_consume, run_consume},
    {"check", "would a consume be allowed now? (changes nothing; exit 1 when not)", declare_check,
     run_check},
    {"record", "record usage even beyond the limit (exit 1 when over it)", declare_record,
     run_record},
    {"reset", "forget an owner's usage and denials for a limit, or ('*') for every limit",
     declare_reset, run_reset},
    {"refund", "give back units of usage (never below zero), then show the state like check",
     declare_request, run_refund},
    {"lease", "concurrency leases: acquire, renew, release, list", nullptr, nullptr},
    {"lease acquire",
     "take --cost units (default 1) of a concurrency limit as one lease (exit 1 when denied)",
     declare_lease_acquire, run_lease_acquire},
    {"lease renew", "move an unexpired lease's expiry to now + TTL (exit 1 when it has expired)",
     declare_lease_renew, run_lease_renew},
    {"lease release", "free a lease at once (releasing twice is harmless)", declare_lease_id,
     run_lease_release},
    {"lease list", "the unexpired leases of a concurrency limit", declare_lease_list,
     run_lease_list},
    {"usage", "owners with usage or denials, most used (or denied, or shadow denied) first",
     declare_usage, run_usage},
    {"watch",
     "usage, live: a table redrawn in place on a terminal, a JSON array per change with --json",
     declare_watch, run_watch},
    {"override", "per-owner overrides: own maximum, exempt, deny; own calendar anchor", nullptr,
     nullptr},
    {"override set",
     "create or replace an owner's override (--max N [--burst N] | --exempt | "
     "--deny) and/or anchor (--anchor INSTANT)",
     declare_override_set, run_override_set},
    {"override rm", "remove an owner's override and anchor", declare_override_owner,
     run_override_rm},
    {"override list", "show the overrides and anchors, of one limit or all", declare_override_list,
     run_override_list},
    {"apply",
     "make the limits (and overrides) those a TOML file declares, in one transaction "
     "(--dry-run, --prune, --check)",
     declare_apply, run_apply},
    {"gc", "delete state that no longer affects any answer, in short batches", declare_gc, run_gc},
    {"sql", "print the SQL statement quota runs for an operation", declare_sql, run_sql},
    {"help", "show the help of quotactl or of a command", declare_help, run_help},
};

constexpr std::string_view kRootFooter =
    "Exit status: 0 success or allowed, 1 not allowed, 2 invalid input, 3 database or "
    "environment error.\n"
    "Run `quotactl help COMMAND` for a command's arguments.";

constexpr std::string_view kCommandFooter =
    "Global options (before or after the command): --db PATH|URI, --json, --now MS, "
    "--server-clock, --busy-timeout DURATION; see "
    "`quotactl --help`.";

struct GlobalOptions {
  std::optional<std::string> db;
  bool json = false;
  std::optional<std::string> now;
  bool server_clock = false;
  std::optional<std::string> busy_timeout;
};

// The parser built from kCommands; `runners` maps each command's CLI11 app to its entry.
struct Parser {
  CLI::App app{"quotactl: manage a quota database (limits, migrations, checks).", "quotactl"};
  Arguments arguments;
  GlobalOptions globals;
  std::map<const CLI::App*, const Command*> commands;

  Parser() {
    app.fallthrough();  // global options may follow the command
    // Subcommands copy the help flag and the formatter, so these come first.
    app.set_help_flag("-h,--help", "print this help and exit");
    app.get_formatter()->label("SUBCOMMAND", "COMMAND");
    app.get_formatter()->label("Positionals", "Arguments");
    app.require_subcommand(1);
    app.set_version_flag("--version", fmt::format("quotactl {}", quota::kVersion),
                         "print the version and exit");
    app.footer(std::string(kRootFooter));
    app.add_option("--db", globals.db,
                   "the database file, or a postgresql:// URI (default: $QUOTA_DB, "
                   "else ./quota.db)")
        ->type_name("PATH|URI");
    app.add_flag("--json", globals.json, "print exactly one JSON document");
    app.add_option("--now", globals.now, "the time to run at, in Unix ms (default: the clock)")
        ->type_name("MS");
    app.add_flag("--server-clock", globals.server_clock,
                 "take the time from the database server's clock (one clock for every host)");
    app.add_option("--busy-timeout", globals.busy_timeout,
                   "how long to wait for another connection's lock before exit 3 (default 5s)")
        ->type_name("DURATION");
    for (const Command& command : kCommands) add(command);
  }

  void add(const Command& command) {
    CLI::App* parent = &app;
    std::string_view rest = command.name;
    for (std::size_t space; (space = rest.find(' ')) != std::string_view::npos;) {
      parent = parent->get_subcommand(std::string(rest.substr(0, space)));
      rest.remove_prefix(space + 1);
    }
    CLI::App* added = parent->add_subcommand(std::string(rest), std::string(command.help));
    added->group("Commands");
    added->footer(std::string(kCommandFooter));
    if (command.declare) command.declare(*added, arguments);
    if (!command.run) added->require_subcommand(1);
    commands[added] = &command;
  }
};

// The deepest command the parser selected, or the root app.
const CLI::App* selected(const CLI::App& app) {
  const CLI::App* current = &app;
  while (!current->get_subcommands().empty()) current = current->get_subcommands().front();
  return current;
}

std::string path_of(const CLI::App* app) {
  std::string path;
  for (; app && app->get_parent(); app = app->get_parent()) {
    path = app->get_name() + (path.empty() ? "" : " " + path);
  }
  return path;
}

std::string help_hint(const std::string& path) {
  return path.empty() ? "run `quotactl --help`" : fmt::format("run `quotactl help {}`", path);
}

// The names of the commands in `group` (the root, or a group such as `limit`).
std::vector<std::string> command_names(const CLI::App* group) {
  std::vector<std::string> names;
  for (const CLI::App* command : group->get_subcommands({})) names.push_back(command->get_name());
  return names;
}

// Every option `command` takes: its own and, since global options may follow the command,
// those of the commands it is in.
std::vector<std::string> option_names(const CLI::App* command) {
  std::vector<std::string> names;
  for (; command; command = command->get_parent()) {
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
  }
  return names;
}

// Whether `word` is written as an option (-x, --name, --name=value), not as a value (-1).
bool looks_like_option(std::string_view word) {
  const auto letter = [&](std::size_t i) {
    return i < word.size() && std::isalpha(static_cast<unsigned char>(word[i]));
  };
  return word.starts_with("-") && (letter(1) || (word.starts_with("--") && letter(2)));
}

// CLI11's message, made into one line that names the command and says where to read more,
// with the likely meaning of a mistyped command or option.
std::string describe_parse_error(const Parser& parser, const CLI::ParseError& error) {
  const CLI::App* leaf = selected(parser.app);
  const std::string path = path_of(leaf);
  const bool lacks_command = !leaf->get_subcommands({}).empty() && leaf->get_subcommands().empty();
  const std::vector<std::string> unparsed = parser.app.remaining(true);
  if (dynamic_cast<const CLI::RequiredError*>(&error) && lacks_command) {
    const std::vector<std::string> names = command_names(leaf);
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    const std::string group = path.empty() ? "" : path + " ";
    for (const std::string& word : unparsed) {
      if (!word.starts_with("-")) {
        return fmt::format("unknown command '{}'{}: use one of {}; {}",
                           quota::bounded(group + word), did_you_mean(word, names, group), list,
                           help_hint(path));
      }
    }
    return fmt::format("{} needs a command: one of {}; {}",
                       path.empty() ? "quotactl" : "quotactl " + path, list, help_hint(path));
  }
  // A mistyped option is the likely cause of whatever CLI11 reports (an extra argument, or a
  // required option missing), so it is what the message names.
  for (const std::string& word : unparsed) {
    if (!looks_like_option(word)) continue;
    const std::string option = word.substr(0, word.find('='));
    return fmt::format("{}unknown option '{}'{}: {} for the options",
                       path.empty() ? "" : path + ": ", quota::bounded(option),
                       did_you_mean(option, option_names(leaf)), help_hint(path));
  }
  std::string message = error.what();
  // "The following argument..." reads better mid-line in lower case; "OWNER is..." stays.
  if (message.size() > 1 && std::islower(static_cast<unsigned char>(message[1]))) {
    message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  }
  return fmt::format("{}{}; {}", path.empty() ? "" : path + ": ", message, help_hint(path));
}

// Reports a failure: one line on stderr and, with --json (`json` not null), the same message
// as one JSON document on stdout, {"error":{"code":...,"message":...}}, so that a script always
// reads one document. `code` is the name of a quota::ErrorCode.
int fail(std::ostream& err, std::ostream* json, int status, std::string_view code,
         std::string_view message) {
  // Every echo of what was typed (a connection string given as an argument, a file name that
  // was meant as one) passes here: what looks like a password is not repeated.
  std::string line = quota::redacted(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  err << "quotactl: error: " << line << '\n';
  if (json) {
    const nlohmann::ordered_json document{{"error", {{"code", code}, {"message", line}}}};
    *json << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
          << '\n';
  }
  return status;
}

int exit_status(quota::ErrorCode code);

// The exception being handled, reported by fail(); called in a catch block only.
int report_failure(std::ostream& err, std::ostream* json) {
  try {
    throw;
  } catch (const quota::Error& error) {
    return fail(err, json, exit_status(error.code()), quota::to_string(error.code()),
                message_of(error));
  } catch (const SQLite::Exception& error) {
    return fail(err, json, 3, quota::to_string(quota::ErrorCode::io),
                fmt::format("database error: {}", error.what()));
  } catch (const std::exception& error) {
    return fail(err, json, 3, quota::to_string(quota::ErrorCode::io),
                fmt::format("unexpected failure: {}", error.what()));
  }
}

int exit_status(quota::ErrorCode code) {
  switch (code) {
    case quota::ErrorCode::invalid_argument:
    case quota::ErrorCode::unknown_limit:
    case quota::ErrorCode::idempotency_conflict:
      return 2;
    default:
      return 3;
  }
}

int run_help(Session& session, const Arguments& arguments) {
  const CLI::App* topic = session.root;
  std::string path;
  for (const std::string& word : arguments.topic) {
    const CLI::App* next = nullptr;
    for (const CLI::App* command : topic->get_subcommands({})) {
      if (command->get_name() == word) next = command;
    }
    const std::string group = path.empty() ? "" : path + " ";
    path += (path.empty() ? "" : " ") + word;
    if (!next) {
      throw quota::Error(
          quota::ErrorCode::invalid_argument,
          fmt::format("unknown command '{}'{}: {} for the list", quota::bounded(path),
                      did_you_mean(word, command_names(topic), group),
                      help_hint(group.empty() ? "" : group.substr(0, group.size() - 1))));
    }
    topic = next;
  }
  // Not topic->help(): that describes the command selected on this command line, `help`.
  const std::string text = topic->get_formatter()->make_help(
      topic, path.empty() ? "quotactl" : "quotactl " + path, CLI::AppFormatMode::Normal);
  if (session.json) {
    session.emit({{"help", text}});
  } else {
    session.out << text;
  }
  return 0;
}

Session make_session(const Parser& parser, std::ostream& out, std::ostream& err,
                     const Context& context) {
  const GlobalOptions& globals = parser.globals;
  Session session{out, err};
  session.json = globals.json;
  session.use_colour = context.terminal && !context.no_color && !globals.json;
  session.show_progress = context.terminal && !globals.json;
  if (globals.db && globals.db->empty()) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--db is empty: give the path of a database file or a postgresql:// URI");
  }
  session.db_path = globals.db                  ? *globals.db
                    : !context.quota_db.empty() ? context.quota_db
                                                : "./quota.db";
  // The latest time format_time can show: 9999-12-31T23:59:59.999Z.
  constexpr std::int64_t kLatestTime = 253'402'300'799'999;
  if (globals.now && globals.server_clock) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--now and --server-clock both say where the time comes from: give one");
  }
  session.fixed_now = globals.now.has_value();
  session.now =
      globals.now ? parse_whole(*globals.now, "--now", 0, kLatestTime) : quota::system_clock_ms();
  session.fixed_now = globals.now.has_value();
  session.server_clock = globals.server_clock;
  if (globals.busy_timeout) {
    session.busy_timeout = parse_duration(*globals.busy_timeout, "--busy-timeout");
  }
  session.root = &parser.app;
  session.input = context.input;
  return session;
}

// --help and --version end the parsing early: print their text, or with --json anywhere on
// the command line, one JSON object holding it.
int print_early(const std::vector<std::string>& args, std::ostream& out, const char* field,
                const std::string& text) {
  if (std::find(args.begin(), args.end(), "--json") != args.end()) {
    out << nlohmann::ordered_json{{field, text}}.dump() << '\n';
  } else {
    out << text;
  }
  return 0;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const Context& context) {
  Parser parser;
  // A failure is also a JSON document when --json is anywhere on the command line: a parse
  // error may stop CLI11 before it reads it.
  std::ostream* json = std::find(args.begin(), args.end(), "--json") != args.end() ? &out : nullptr;
  try {
    // CLI11 takes the arguments last first.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    parser.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return print_early(args, out, "help", parser.app.help());
  } catch (const CLI::CallForAllHelp&) {
    return print_early(args, out, "help", parser.app.help("", CLI::AppFormatMode::All));
  } catch (const CLI::CallForVersion&) {
    if (std::find(args.begin(), args.end(), "--json") != args.end()) {
      return print_early(args, out, "version", quota::kVersion);
    }
    return print_early(args, out, "version", fmt::format("quotactl {}\n", quota::kVersion));
  } catch (const CLI::ParseError& error) {
    return fail(err, json, 2, quota::to_string(quota::ErrorCode::invalid_argument),
                describe_parse_error(parser, error));
  }

  const CLI::App* leaf = selected(parser.app);
  const auto found = parser.commands.find(leaf);
  if (found == parser.commands.end() || !found->second->run) {
    return fail(err, json, 2, quota::to_string(quota::ErrorCode::invalid_argument),
                "no command given: run `quotactl --help`");
  }
  std::optional<Session> session;
  try {
    session.emplace(make_session(parser, out, err, context));
    return found->second->run(*session, parser.arguments);
  } catch (...) {
    // A command that printed its document before failing (status on a file it reports as
    // unusable) has given the one document already.
    return report_failure(err, session && session->emitted ? nullptr : json);
  }
}

}  // namespace quotactl
