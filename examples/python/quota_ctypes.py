#!/usr/bin/env python3
"""quota from Python, through its C API (include/quota/quota.h) and ctypes.

    python3 quota_ctypes.py [--library PATH] [--db PATH] [--check]

Engine, Result and QuotaError below are a complete, thin binding; the rest is a short demo
on a clock that the script moves by hand. The library is a shared libquota: --library,
else $QUOTA_LIBRARY, else whatever the dynamic loader finds as "quota". A static libquota.a
cannot be loaded: build quota with -DBUILD_SHARED_LIBS=ON (the test suite uses the shared
twin of its static build, build/shared/libquota.so). --db defaults to an in-memory database.
With --check the demo also verifies every answer and exits 1 on a mismatch (the test suite
runs it so).
"""
import argparse
import ctypes
import ctypes.util
import os
import sys

SLIDING_LOG, FIXED_WINDOW, SLIDING_WINDOW, TOKEN_BUCKET = 0, 1, 2, 3
NO_BURST = 0

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

    def __repr__(self):
        return (f"Result(allowed={bool(self.allowed)}, reason={_reason_name(self.reason)}, "
                f"remaining={self.remaining}, retry_after_ms={self.retry_after_ms}, "
                f"reset_at_ms={self.reset_at_ms}, denied={self.denied})")


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
        raise OSError("libquota not found: pass --library or set QUOTA_LIBRARY")
    lib = ctypes.CDLL(path)
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
        "quota_last_error": (ctypes.c_char_p, []),
        "quota_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "quota_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    _lib = lib
    return lib


def _reason_name(reason):
    return load().quota_reason_name(reason).decode()


def _utf8(text):
    data = text.encode("utf-8")
    return data, len(data)


def _checked(status):
    if status != 0:
        lib = load()
        raise QuotaError(status, lib.quota_status_name(status).decode(),
                         lib.quota_last_error().decode("utf-8", "replace"))


class Engine:
    """An open quota database. `clock`, if given, returns Unix milliseconds."""

    def __init__(self, path, clock=None, create=True, busy_timeout_ms=5000):
        lib = load()
        options = _Options()
        # The size of this module's copy of the struct: the library writes no byte past it.
        lib.quota_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
        options.create = int(create)
        options.busy_timeout_ms = busy_timeout_ms
        if clock is not None:
            # ctypes must keep the callback alive as long as the engine uses it.
            self._clock = _CLOCK(lambda _context: clock())
            options.clock = self._clock
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
        expect(_reason_name(answers[2].reason) == "rate_limited", "reason")

        now[0] += answers[2].retry_after_ms
        answer = engine.consume("api", "user:ü")
        print(f"after {answers[2].retry_after_ms} ms:", answer)
        # Both earlier events expire together, exactly one period after they happened.
        expect(answer.allowed == 1 and answer.remaining == 1, "allowed again on time")

        try:
            engine.consume("missing", "user:ü")
            expect(False, "an unknown limit raises")
        except QuotaError as error:
            print("error:", error)
            expect(error.name == "unknown_limit" and "unknown limit" in error.message,
                   "unknown_limit")
        try:
            engine.consume("api", "")
            expect(False, "an empty owner raises")
        except QuotaError as error:
            expect(error.name == "invalid_argument", "invalid_argument")

        expect(engine.remove("api") and not engine.remove("api"), "remove")
    print("libquota", load().quota_version().decode())
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", help="path of libquota.so")
    parser.add_argument("--db", default=":memory:", help="database file (default: in memory)")
    parser.add_argument("--check", action="store_true", help="verify the demo's answers")
    arguments = parser.parse_args()
    load(arguments.library)
    return demo(arguments.db, arguments.check)


if __name__ == "__main__":
    sys.exit(main())
