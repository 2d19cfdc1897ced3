// The engine names no driver (docs/architecture.md, "Backends are parts"): the files of the
// engine, quota::admin and the watch include no driver header, directly or through any
// project header they include. A driver header is anything under src/sqlite/ or
// src/postgresql/, SQLiteCpp's, sqlite3.h or libpq-fe.h; only src/open_store.cpp (which
// chooses the driver for a location) and the drivers themselves may include one.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

namespace fs = std::filesystem;

struct Include {
  std::string name;
  bool angled = false;  // <...> rather than "..."
};

std::vector<Include> includes_of(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE(in);
  static const std::regex directive(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> found;
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (std::regex_search(line, match, directive)) {
      found.push_back({match[2].str(), match[1].str() == "<"});
    }
  }
  return found;
}

bool is_driver(const Include& include) {
  const std::string& name = include.name;
  if (name.rfind("SQLiteCpp/", 0) == 0 || name == "sqlite3.h" || name == "libpq-fe.h") {
    return true;
  }
  return !include.angled &&
         (name.rfind("sqlite/", 0) == 0 || name.rfind("postgresql/", 0) == 0);
}

// The chain of includes from `file` to the first driver header it reaches, or nullopt. The
// project's headers are looked up under the roots, in order (src/, then include/).
std::optional<std::vector<std::string>> driver_chain(const fs::path& file,
                                                     const std::vector<fs::path>& roots,
                                                     std::set<fs::path>& seen) {
  if (!seen.insert(file).second) return std::nullopt;
  for (const Include& include : includes_of(file)) {
    if (is_driver(include)) return std::vector<std::string>{include.name};
    if (include.angled) continue;
    for (const fs::path& root : roots) {
      const fs::path header = root / include.name;
      if (!fs::exists(header)) continue;
      if (auto chain = driver_chain(header, roots, seen)) {
        chain->insert(chain->begin(), include.name);
        return chain;
      }
      break;
    }
  }
  return std::nullopt;
}

std::string chain_text(const std::string& file, const std::vector<std::string>& chain) {
  std::string text = file;
  for (const std::string& step : chain) text += " -> " + step;
  return text;
}

// Every file that must name no driver: the engine's folder, admin and watch.
std::vector<fs::path> engine_files(const fs::path& source) {
  std::vector<fs::path> files = {source / "src" / "admin.cpp", source / "src" / "watch.cpp",
                                 source / "src" / "watch.h"};
  for (const fs::path& folder : {source / "src" / "engine"}) {
    if (!fs::is_directory(folder)) continue;
    for (const auto& entry : fs::directory_iterator(folder)) files.push_back(entry.path());
  }
  if (fs::exists(source / "src" / "engine.cpp")) files.push_back(source / "src" / "engine.cpp");
  return files;
}

TEST_CASE("the engine, quota::admin and the watch include no driver header", "[include_graph]") {
  const fs::path source(QUOTA_SOURCE_DIR);
  const std::vector<fs::path> roots = {source / "src", source / "include"};
  const std::vector<fs::path> files = engine_files(source);
  REQUIRE(files.size() >= 4);  // admin, watch.{h,cpp} and at least one file of the engine
  for (const fs::path& file : files) {
    std::set<fs::path> seen;
    const auto chain = driver_chain(file, roots, seen);
    INFO("open the store through src/open_store.h instead: "
         << (chain ? chain_text(fs::relative(file, source).string(), *chain) : ""));
    CHECK_FALSE(chain);
  }
}

// The check itself: a driver header two headers away is found, with its chain.
TEST_CASE("the include graph's check finds a driver header behind other headers",
          "[include_graph]") {
  const TempDir dir;
  const fs::path& root = dir.path();
  fs::create_directories(root / "src" / "sqlite");
  const auto write = [&](const fs::path& path, const std::string& text) {
    std::ofstream(root / path) << text;
  };
  write("src/engine.cpp", "#include <vector>\n#include \"store.h\"\n#include \"quiet.h\"\n");
  write("src/quiet.h", "#pragma once\n#include <string>\n");
  write("src/store.h", "#pragma once\n  #  include \"helpers.h\"\n");
  write("src/helpers.h", "#pragma once\n#include \"sqlite/sqlite_store.h\"\n");
  write("src/sqlite/sqlite_store.h", "#pragma once\n#include <SQLiteCpp/Database.h>\n");
  write("src/clean.cpp", "#include \"quiet.h\"\n#include <sqlite_like.h>\n");
  write("src/angled.cpp", "#include <libpq-fe.h>\n");
  const std::vector<fs::path> roots = {root / "src"};

  std::set<fs::path> seen;
  const auto chain = driver_chain(root / "src" / "engine.cpp", roots, seen);
  REQUIRE(chain);
  CHECK(chain_text("src/engine.cpp", *chain) ==
        "src/engine.cpp -> store.h -> helpers.h -> sqlite/sqlite_store.h");
  seen.clear();
  CHECK_FALSE(driver_chain(root / "src" / "clean.cpp", roots, seen));
  seen.clear();
  CHECK(driver_chain(root / "src" / "angled.cpp", roots, seen) ==
        std::vector<std::string>{"libpq-fe.h"});
}

}  // namespace
}  // namespace quota::test
