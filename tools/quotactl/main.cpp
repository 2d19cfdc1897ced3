#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  const char* db = std::getenv("QUOTA_DB");
  return quotactl::run({argv + 1, argv + argc}, std::cout, std::cerr,
                       {db ? db : "", std::getenv("NO_COLOR") != nullptr, isatty(1) != 0});
}
