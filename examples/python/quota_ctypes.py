#!/usr/bin/env python3
"""quota from Python, through its C API (include/quota/quota.h) and ctypes.

    python3 quota_ctypes.py [--library PATH] [--db PATH] [--check]

Engine, Result, Decision and QuotaError below are a complete, thin binding of the C API
(every operation: check, consume, record, reset, refund, consume_all; every option of
quota_open); the rest is a short demo on a clock that the script moves by hand. See
README.md beside this file for how to build, install and run it.

The library is a shared libquota: --library, else $QUOTA_LIBRARY, else whatever the dynamic
loader finds as "quota". `cmake --install` puts one beside the static library:
PREFIX/lib/libquota.so.X.Y (a static libquota.a cannot be loaded). --db defaults to a fresh
file in a temporary folder, removed at the end. With --check the demo also verifies every
answer and exits 1 on a mismatch (the test suite runs it so).
"""
import argparse
import ctypes
import ctypes.util
import os
import sqlite3
import sys
import tempfile

SLIDING_LOG, FIXED_WINDOW, SLIDING_WINDOW, TOKEN_BUCKET = 0, 1, 2, 3
NO_BURST = 0
# QUOTA_REASON_*: why an operation answered as it did.
(REASON_OK, REASON_RATE_LIMITED, REASON_COST_EXCEEDS_CAPACITY, REASON_OWNER_DENIED,
 REASON_HOOK_DENIED, REASON_STORE_UNAVAILABLE, REASON_BLOCKED) = range(7)

_CLOCK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_ON_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _Options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("create", ctypes.c_int),
        ("migrate", ctypes.c_int),
        ("synchronous_full", ctypes.c_int),
        ("busy_timeout_ms", ctypes.c_int64),
        ("clock", _CLOCK),
        ("clock_context", ctypes.c_void_p),
        ("fail_open", ctypes.c_int),
        ("on_error", _ON_ERROR),
        ("on_error_context", ctypes.c_void_p),
        ("restart_checkpoint", ctypes.c_int),
        ("group_commit", ctypes.c_int),
    ]


class Result(ctypes.Structure):
    """What an operation decided: quota_result, field for field."""

    _fields_ = [
        ("allowed", ctypes.c_int),
        ("reason", ctypes.c_int),
        ("remaining", ctypes.c_int64),
        ("retry_after_ms", ctypes.c_int64),
        ("reset_at_ms", ctypes.c_int64),
        ("denied", ctypes.c_int64),
    ]

    @property
    def shadow_denied(self):
        """A shadow-mode limit allowed this consume only because it is in shadow mode: reason,
        remaining and retry_after_ms say what enforcing would have answered. (The C API says
        so with allowed and a reason other than ok; store_unavailable is fail-open's.)"""
        return bool(self.allowed) and self.reason not in (REASON_OK, REASON_STORE_UNAVAILABLE)

    @property
    def reason_name(self):
        return _reason_name(self.reason)

    def __repr__(self):
        return (f"Result(allowed={bool(self.allowed)}, reason={self.reason_name}, "
                f"remaining={self.remaining}, retry_after_ms={self.retry_after_ms}, "
                f"reset_at_ms={self.reset_at_ms}, denied={self.denied}, "
                f"shadow_denied={self.shadow_denied})")


class Decision:
    """consume_all's answer: the deciding limit, its index in the names given, its Result."""

    def __init__(self, limit, index, result):
        self.limit, self.index, self.result = limit, index, result

    def __repr__(self):
        return f"Decision(limit={self.limit!r}, index={self.index}, result={self.result})"


class QuotaError(Exception):
    """A failed call: `status` is the QUOTA_ERROR_* number, `name` its stable name."""

    def __init__(self, status, name, message):
        super().__init__(f"{name}: {message}")
        self.status, self.name, self.message = status, name, message


_lib = None


def load(path=None):
    """Loads libquota once and declares the signatures of the functions used here."""
    global _lib
    if _lib is not None:
        return _lib
    path = path or os.environ.get("QUOTA_LIBRARY") or ctypes.util.find_library("quota")
    if not path:
        raise OSError("libquota not found: pass --library or set QUOTA_LIBRARY to the shared "
                      "library that `cmake --install` puts in PREFIX/lib (libquota.so.X.Y)")
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        raise OSError(f"cannot load {path} ({error}): give the shared library, libquota.so.X.Y "
                      "in the install's lib folder, not libquota.a") from None
    text = [ctypes.c_char_p, ctypes.c_size_t]
    engine = ctypes.c_void_p
    result = ctypes.POINTER(Result)
    signatures = {
        "quota_version": (ctypes.c_char_p, []),
        "quota_options_init_sized": (None, [ctypes.POINTER(_Options), ctypes.c_size_t]),
        "quota_open": (ctypes.c_int, text + [ctypes.POINTER(_Options),
                                             ctypes.POINTER(ctypes.c_void_p)]),
        "quota_close": (None, [engine]),
        "quota_define": (ctypes.c_int, [engine] + text + [ctypes.c_int, ctypes.c_int64,
                                                          ctypes.c_int64, ctypes.c_int64]),
        "quota_remove": (ctypes.c_int, [engine] + text + [ctypes.POINTER(ctypes.c_int)]),
        "quota_check": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_consume": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_record": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_reset": (ctypes.c_int, [engine] + text + text + [result]),
        "quota_refund": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_consume_all": (ctypes.c_int, [engine, ctypes.POINTER(ctypes.c_char_p),
                                             ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t]
                              + text + [ctypes.c_int64, result,
                                        ctypes.POINTER(ctypes.c_size_t)]),
        "quota_last_error": (ctypes.c_char_p, []),
        "quota_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "quota_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
        "quota_algorithm_name": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    _lib = lib
    return lib


def _reason_name(reason):
    return load().quota_reason_name(reason).decode()


def algorithm_name(algorithm):
    """"sliding_log", ... for SLIDING_LOG, ...; "?" for a number that is not one."""
    return load().quota_algorithm_name(algorithm).decode()


def version():
    return load().quota_version().decode()


def _utf8(text):
    data = text.encode("utf-8")
    return data, len(data)


def _checked(status):
    if status != 0:
        lib = load()
        raise QuotaError(status, lib.quota_status_name(status).decode(),
                         lib.quota_last_error().decode("utf-8", "replace"))


class Engine:
    """An open quota database: quota_open with its options (see quota_options in quota.h).

    clock: returns Unix milliseconds (default: the system clock). on_error(status_name,
    message): receives the error that a fail_open answer replaced. Both are called from
    inside the library and must not raise."""

    def __init__(self, path, clock=None, create=True, migrate=True, busy_timeout_ms=5000,
                 synchronous_full=False, fail_open=False, on_error=None,
                 restart_checkpoint=True, group_commit=True):
        lib = load()
        options = _Options()
        # The size of this module's copy of the struct: the library writes no byte past it.
        lib.quota_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
        options.create = int(create)
        options.migrate = int(migrate)
        options.busy_timeout_ms = busy_timeout_ms
        options.synchronous_full = int(synchronous_full)
        options.fail_open = int(fail_open)
        options.restart_checkpoint = int(restart_checkpoint)
        options.group_commit = int(group_commit)
        # ctypes must keep the callbacks alive as long as the engine uses them.
        if clock is not None:
            self._clock = _CLOCK(lambda _context: clock())
            options.clock = self._clock
        if on_error is not None:
            self._on_error = _ON_ERROR(lambda _context, status, message: on_error(
                lib.quota_status_name(status).decode(), message.decode("utf-8", "replace")))
            options.on_error = self._on_error
        self._handle = ctypes.c_void_p()
        _checked(lib.quota_open(*_utf8(path), ctypes.byref(options), ctypes.byref(self._handle)))

    def close(self):
        if self._handle:
            load().quota_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def define(self, name, algorithm, maximum, period_ms, burst=NO_BURST):
        _checked(load().quota_define(self._handle, *_utf8(name), algorithm, maximum, period_ms,
                                     burst))

    def remove(self, name):
        removed = ctypes.c_int()
        _checked(load().quota_remove(self._handle, *_utf8(name), ctypes.byref(removed)))
        return bool(removed.value)

    def _operate(self, function, limit, owner, *cost):
        result = Result()
        _checked(function(self._handle, *_utf8(limit), *_utf8(owner), *cost,
                          ctypes.byref(result)))
        return result

    def check(self, limit, owner, cost=1):
        return self._operate(load().quota_check, limit, owner, cost)

    def consume(self, limit, owner, cost=1):
        return self._operate(load().quota_consume, limit, owner, cost)

    def record(self, limit, owner, cost=1):
        return self._operate(load().quota_record, limit, owner, cost)

    def reset(self, limit, owner):
        return self._operate(load().quota_reset, limit, owner)

    def refund(self, limit, owner, cost=1):
        """Gives back up to `cost` units (never below zero); answers like a check of cost 1."""
        return self._operate(load().quota_refund, limit, owner, cost)

    def consume_all(self, limits, owner, cost=1):
        """Consumes `cost` from every limit at once: allowed only if all allow; if one denies,
        nothing is recorded anywhere and only the deciding limit counts the denial."""
        names = [_utf8(limit) for limit in limits]
        data = (ctypes.c_char_p * len(names))(*[data for data, _ in names])
        lengths = (ctypes.c_size_t * len(names))(*[length for _, length in names])
        result, deciding = Result(), ctypes.c_size_t()
        _checked(load().quota_consume_all(self._handle, data, lengths, len(names),
                                          *_utf8(owner), cost, ctypes.byref(result),
                                          ctypes.byref(deciding)))
        return Decision(limits[deciding.value], deciding.value, result)


def demo(database, check):
    failures = []

    def expect(condition, what):
        if check and not condition:
            failures.append(what)

    now = [1_700_000_000_000]
    with Engine(database, clock=lambda: now[0]) as engine:
        engine.define("api", SLIDING_LOG, 2, 1000)
        answers = [engine.consume("api", "user:ü") for _ in range(3)]
        for answer in answers:
            print("consume:", answer)
        expect([a.allowed for a in answers] == [1, 1, 0], "two allowed, then denied")
        expect(answers[2].retry_after_ms == 1000 and answers[2].denied == 1, "exact wait")
        expect(answers[2].reason_name == "rate_limited", "reason")

        now[0] += answers[2].retry_after_ms
        answer = engine.consume("api", "user:ü")
        print(f"after {answers[2].retry_after_ms} ms:", answer)
        # Both earlier events expire together, exactly one period after they happened.
        expect(answer.allowed == 1 and answer.remaining == 1, "allowed again on time")

        # An action failed after its consume: give the unit back.
        answer = engine.refund("api", "user:ü")
        print("refund:", answer)
        expect(answer.allowed == 1 and answer.remaining == 2, "refund gives the unit back")

        # Several limits, one decision: a denial by one records nothing on the other.
        engine.define("per_second", FIXED_WINDOW, 1, 1000)
        engine.define("per_minute", TOKEN_BUCKET, 10, 60_000)
        first = engine.consume_all(["per_second", "per_minute"], "user:ü")
        second = engine.consume_all(["per_second", "per_minute"], "user:ü")
        print("consume_all:", first)
        print("consume_all:", second)
        expect(first.result.allowed == 1 and first.limit == "per_second", "all allowed")
        expect(second.result.allowed == 0 and (second.limit, second.index) == ("per_second", 0),
               "per_second decides the denial")
        minute = engine.check("per_minute", "user:ü")
        expect(minute.remaining == 9, "the denied consume_all took nothing from per_minute")
        expect(algorithm_name(TOKEN_BUCKET) == "token_bucket", "algorithm_name")

        if database != ":memory:":
            # Shadow mode is set with SQL or quotactl (the C API defines enforcing limits).
            with sqlite3.connect(database) as sql:
                sql.execute("UPDATE quota_limits SET shadow = 1 WHERE name = 'per_second'")
            sql.close()
            answer = engine.consume("per_second", "user:ü")
            print("shadow consume:", answer)
            expect(answer.allowed == 1 and answer.shadow_denied and
                   answer.reason_name == "rate_limited" and answer.denied == 1,
                   "a shadow-mode limit allows, and says enforcing would have denied")
            expect(not first.result.shadow_denied, "an enforced allowance is not shadow_denied")

            # fail_open: while another connection holds the write lock past the busy timeout,
            # a consume is allowed undecided and on_error hears what it replaced.
            errors = []
            with Engine(database, busy_timeout_ms=0, fail_open=True,
                        on_error=lambda status, message: errors.append(status)) as other:
                locker = sqlite3.connect(database, isolation_level=None)
                locker.execute("BEGIN EXCLUSIVE")
                answer = other.consume("api", "user:ü")
                locker.execute("ROLLBACK")
                locker.close()
            print("fail-open consume:", answer, errors)
            expect(answer.allowed == 1 and answer.reason_name == "store_unavailable" and
                   not answer.shadow_denied and errors == ["busy"], "fail_open and on_error")

        try:
            engine.consume("missing", "user:ü")
            expect(False, "an unknown limit raises")
        except QuotaError as error:
            print("error:", error)
            expect(error.name == "unknown_limit" and "unknown limit" in error.message,
                   "unknown_limit")
        for bad in [lambda: engine.consume("api", ""), lambda: engine.consume_all([], "u"),
                    lambda: engine.consume_all(["api", "api"], "u")]:
            try:
                bad()
                expect(False, "bad input raises")
            except QuotaError as error:
                expect(error.name == "invalid_argument", f"invalid_argument: {error}")

        expect(engine.remove("api") and not engine.remove("api"), "remove")
    print("libquota", version())
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", help="path of libquota.so")
    parser.add_argument("--db", help="database file (default: a fresh one, removed at the end)")
    parser.add_argument("--check", action="store_true", help="verify the demo's answers")
    arguments = parser.parse_args()
    try:
        load(arguments.library)
    except OSError as error:
        print(f"quota_ctypes: {error}", file=sys.stderr)
        return 2
    if arguments.db:
        return demo(arguments.db, arguments.check)
    with tempfile.TemporaryDirectory(prefix="quota-demo-") as folder:
        return demo(os.path.join(folder, "demo.db"), arguments.check)


if __name__ == "__main__":
    sys.exit(main())
