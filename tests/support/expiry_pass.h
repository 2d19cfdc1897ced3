// Waiting for the background expiry (Options::expire_interval) of an engine of the test's own.
#pragma once

#include "quota/engine.h"

namespace quota::test {

// Waits until `engine` has ended a pass of expiry that began after this call: two passes more
// than now (the one under way may have read the clock before), so that what the clock made
// expired by now is gone. Fails the test after a minute, which only a broken expiry takes.
void await_expiry_pass(const Engine& engine);

}  // namespace quota::test
