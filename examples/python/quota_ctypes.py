#!/usr/bin/env python3
"""quota from Python, through its C API (include/quota/quota.h) and ctypes.

    python3 quota_ctypes.py [--library PATH] [--db PATH] [--check]

Engine, Result, Decision, Usage, Cancel, Watch, LeaseResult, LeaseInfo, Lease and QuotaError
below are a complete, thin binding of the C API (every operation: check, consume, record,
reset, refund, consume_all, acquire, the batch calls; limits with a lockout or a calendar
period, owners' anchors, an owner's usage and watches; concurrency leases; every option of
quota_open); the rest is a short demo on a clock
that the script moves by hand. See README.md beside this file for how to build, install and
run it.

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
import threading
import time

SLIDING_LOG, FIXED_WINDOW, SLIDING_WINDOW, TOKEN_BUCKET, CONCURRENCY = 0, 1, 2, 3, 4
NO_BURST = 0
# QUOTA_DAY ... QUOTA_YEAR: a calendar limit's unit (define_calendar).
DAY, WEEK, MONTH, YEAR = 0, 1, 2, 3
# QUOTA_NO_ANCHOR: define_calendar's anchor_ms=None.
NO_ANCHOR = -1
# QUOTA_NO_CALENDAR: a quota_limit without a calendar period (Limit.calendar None).
NO_CALENDAR = -1
# QUOTA_REASON_*: why an operation answered as it did.
(REASON_OK, REASON_RATE_LIMITED, REASON_COST_EXCEEDS_CAPACITY, REASON_OWNER_DENIED,
 REASON_HOOK_DENIED, REASON_STORE_UNAVAILABLE, REASON_BLOCKED, REASON_LEASE_EXPIRED) = range(8)
# QUOTA_LEASE_ID_LENGTH: a lease id's hex digits.
LEASE_ID_LENGTH = 32

_CLOCK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_ON_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _Usage(ctypes.Structure):
    _fields_ = [
        ("limit", ctypes.POINTER(ctypes.c_char)),
        ("limit_length", ctypes.c_size_t),
        ("owner", ctypes.POINTER(ctypes.c_char)),
        ("owner_length", ctypes.c_size_t),
        ("used", ctypes.c_int64),
        ("remaining", ctypes.c_int64),
        ("denied", ctypes.c_int64),
        ("reset_at_ms", ctypes.c_int64),
        ("shadow_denied", ctypes.c_int64),
        ("capacity", ctypes.c_int64),
        ("blocked_until_ms", ctypes.c_int64),
    ]


class _Limit(ctypes.Structure):
    _fields_ = [
        ("algorithm", ctypes.c_int),
        ("maximum", ctypes.c_int64),
        ("period_ms", ctypes.c_int64),
        ("burst", ctypes.c_int64),
        ("shadow", ctypes.c_int),
        ("block_ms", ctypes.c_int64),
        ("calendar", ctypes.c_int),
        ("utc_offset_minutes", ctypes.c_int),
        ("anchor_ms", ctypes.c_int64),
    ]


# quota_usage_fn and quota_watch_fn: the same signature.
_USAGE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Usage))


class _Request(ctypes.Structure):
    _fields_ = [
        ("limit", ctypes.c_char_p),
        ("limit_length", ctypes.c_size_t),
        ("owner", ctypes.c_char_p),
        ("owner_length", ctypes.c_size_t),
        ("cost", ctypes.c_int64),
    ]


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
        ("idempotency_ttl_ms", ctypes.c_int64),
    ]


class Result(ctypes.Structure):
    """What an operation decided: quota_result, field for field; `replayed` (True when a
    request with an idempotency key was answered from the key's stored answer) is the
    keyed calls' own."""

    replayed = False

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


class LeaseResult(Result):
    """What acquire_lease and renew_lease answer: quota_lease_result, the Result's fields
    (allowed, reason, remaining, retry_after_ms, reset_at_ms: the owner's last lease expiry,
    denied) and `lease` (the id, "" when no lease was taken), `expires_at_ms` (0 then) and
    `replayed`."""

    _fields_ = [
        ("_lease", ctypes.c_char * (LEASE_ID_LENGTH + 1)),
        ("expires_at_ms", ctypes.c_int64),
        ("_replayed", ctypes.c_int),
    ]

    @property
    def lease(self):
        return self._lease.decode("ascii")

    @property
    def replayed(self):
        return bool(self._replayed)

    def __repr__(self):
        return (f"LeaseResult(allowed={bool(self.allowed)}, reason={self.reason_name}, "
                f"remaining={self.remaining}, retry_after_ms={self.retry_after_ms}, "
                f"reset_at_ms={self.reset_at_ms}, denied={self.denied}, lease={self.lease!r}, "
                f"expires_at_ms={self.expires_at_ms})")


class _LeaseInfo(ctypes.Structure):
    _fields_ = [
        ("lease", ctypes.POINTER(ctypes.c_char)),
        ("lease_length", ctypes.c_size_t),
        ("owner", ctypes.POINTER(ctypes.c_char)),
        ("owner_length", ctypes.c_size_t),
        ("cost", ctypes.c_int64),
        ("expires_at_ms", ctypes.c_int64),
        ("acquired_at_ms", ctypes.c_int64),
    ]


_LEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_LeaseInfo))


class LeaseInfo:
    """An unexpired lease (quota_lease_info), as Engine.leases lists it: lease, owner, cost,
    expires_at_ms, acquired_at_ms."""

    def __init__(self, info):
        self.lease = ctypes.string_at(info.lease, info.lease_length).decode("ascii")
        self.owner = ctypes.string_at(info.owner, info.owner_length).decode("utf-8")
        self.cost, self.expires_at_ms = info.cost, info.expires_at_ms
        self.acquired_at_ms = info.acquired_at_ms

    def __repr__(self):
        return (f"LeaseInfo(lease={self.lease!r}, owner={self.owner!r}, cost={self.cost}, "
                f"expires_at_ms={self.expires_at_ms}, acquired_at_ms={self.acquired_at_ms})")


class Lease:
    """A lease held for a `with` block (Engine.lease): acquired when made, released when the
    block ends, however it ends. `held` says whether it is held (a denied acquire holds
    nothing; `result` says why), `id` is its id; renew(ttl_ms=None) and release() as
    Engine.renew_lease and release_lease. A holder that dies without releasing holds nothing
    after the lease's TTL. With a `key`, a retry holds the first acquire's lease again
    (result.replayed True)."""

    def __init__(self, engine, limit, owner, cost=1, key=None):
        self._engine = engine
        self.result = engine.acquire_lease(limit, owner, cost, key)

    @property
    def held(self):
        return self._engine is not None and bool(self.result.lease)

    @property
    def id(self):
        return self.result.lease

    def renew(self, ttl_ms=None):
        """Moves the expiry on (Engine.renew_lease); an allowed renewal becomes `result`."""
        if not self.held:
            raise QuotaError(QUOTA_ERROR_INVALID_ARGUMENT, "invalid_argument",
                             "this Lease holds nothing (denied or released): acquire a new one")
        renewed = self._engine.renew_lease(self.id, ttl_ms)
        if renewed.allowed:
            self.result = renewed
        return renewed

    def release(self):
        """Releases now; True if the lease was still held, False if not (never taken, released
        before, or expired)."""
        if not self.held:
            return False
        engine, self._engine = self._engine, None
        return engine.release_lease(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.release()

    def __repr__(self):
        return f"Lease(held={self.held}, result={self.result})"


class _LeaseGrant(ctypes.Structure):
    _fields_ = [
        ("limit", ctypes.POINTER(ctypes.c_char)),
        ("limit_length", ctypes.c_size_t),
        ("owner", ctypes.POINTER(ctypes.c_char)),
        ("owner_length", ctypes.c_size_t),
        ("lease", ctypes.POINTER(ctypes.c_char)),
        ("lease_length", ctypes.c_size_t),
        ("expires_at_ms", ctypes.c_int64),
    ]


_GRANT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_LeaseGrant))


class LeaseGrant:
    """A lease that consume_all or acquire_all took on one of its concurrency limits
    (quota_lease_grant): limit, owner, lease (its id: release_lease frees it), expires_at_ms."""

    def __init__(self, grant):
        self.limit = ctypes.string_at(grant.limit, grant.limit_length).decode("utf-8")
        self.owner = ctypes.string_at(grant.owner, grant.owner_length).decode("utf-8")
        self.lease = ctypes.string_at(grant.lease, grant.lease_length).decode("ascii")
        self.expires_at_ms = grant.expires_at_ms

    def __repr__(self):
        return (f"LeaseGrant(limit={self.limit!r}, owner={self.owner!r}, lease={self.lease!r}, "
                f"expires_at_ms={self.expires_at_ms})")


class Decision:
    """consume_all's answer: the deciding limit, its index in the names given, its Result,
    and `leases`: a LeaseGrant per lease it took on a concurrency limit ([] when denied)."""

    def __init__(self, limit, index, result, leases=()):
        self.limit, self.index, self.result = limit, index, result
        self.leases = list(leases)

    def __repr__(self):
        return (f"Decision(limit={self.limit!r}, index={self.index}, result={self.result}, "
                f"leases={self.leases})")


class Usage:
    """An owner's usage of a limit (quota_usage), copied out of the call that reported it:
    limit, owner, used, remaining, denied, reset_at_ms, shadow_denied (a count of would-be
    denials in shadow mode), capacity and blocked_until_ms (None if not locked out)."""

    _NUMBERS = ("used", "remaining", "denied", "reset_at_ms", "shadow_denied", "capacity",
                "blocked_until_ms")

    def __init__(self, usage):
        self.limit = ctypes.string_at(usage.limit, usage.limit_length).decode("utf-8")
        self.owner = ctypes.string_at(usage.owner, usage.owner_length).decode("utf-8")
        for name in self._NUMBERS:
            setattr(self, name, getattr(usage, name))
        # The C API says 0 for "not locked out"; Python says None, as the C++ API does.
        if not self.blocked_until_ms:
            self.blocked_until_ms = None

    def __repr__(self):
        numbers = ", ".join(f"{name}={getattr(self, name)}" for name in self._NUMBERS)
        return f"Usage(limit={self.limit!r}, owner={self.owner!r}, {numbers})"


class Limit:
    """A limit as the database holds it (quota_limit), as Engine.ensure answers it: name,
    algorithm (SLIDING_LOG, ...), maximum, period_ms, burst (a token bucket's capacity, else
    None), shadow (bool), block_ms (the lockout, or None), calendar (DAY, ... or None),
    utc_offset_minutes and anchor_ms (or None)."""

    def __init__(self, name, limit):
        self.name = name
        self.algorithm = limit.algorithm
        self.maximum = limit.maximum
        self.period_ms = limit.period_ms
        self.burst = None if limit.burst == NO_BURST else limit.burst
        self.shadow = bool(limit.shadow)
        self.block_ms = limit.block_ms or None
        self.calendar = None if limit.calendar == NO_CALENDAR else limit.calendar
        self.utc_offset_minutes = limit.utc_offset_minutes
        self.anchor_ms = None if limit.anchor_ms == NO_ANCHOR else limit.anchor_ms

    def __repr__(self):
        fields = ("algorithm", "maximum", "period_ms", "burst", "shadow", "block_ms",
                  "calendar", "utc_offset_minutes", "anchor_ms")
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in fields)
        return f"Limit(name={self.name!r}, {shown})"


# QUOTA_ERROR_INVALID_ARGUMENT: a bad argument, as the library reports it.
QUOTA_ERROR_INVALID_ARGUMENT = 1


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
    many = [engine, ctypes.POINTER(_Request), ctypes.c_size_t, result]
    signatures = {
        "quota_version": (ctypes.c_char_p, []),
        "quota_options_init_sized": (None, [ctypes.POINTER(_Options), ctypes.c_size_t]),
        "quota_open": (ctypes.c_int, text + [ctypes.POINTER(_Options),
                                             ctypes.POINTER(ctypes.c_void_p)]),
        "quota_close": (None, [engine]),
        "quota_define": (ctypes.c_int, [engine] + text + [ctypes.c_int, ctypes.c_int64,
                                                          ctypes.c_int64, ctypes.c_int64]),
        "quota_ensure": (ctypes.c_int, [engine] + text + [ctypes.c_int, ctypes.c_int64,
                                                          ctypes.c_int64, ctypes.c_int64,
                                                          ctypes.POINTER(_Limit)]),
        "quota_remove": (ctypes.c_int, [engine] + text + [ctypes.POINTER(ctypes.c_int)]),
        "quota_set_block": (ctypes.c_int, [engine] + text + [ctypes.c_int64]),
        "quota_define_calendar": (ctypes.c_int, [engine] + text + [ctypes.c_int64, ctypes.c_int,
                                                                   ctypes.c_int, ctypes.c_int64]),
        "quota_set_anchor": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64]),
        "quota_remove_anchor": (ctypes.c_int,
                                [engine] + text + text + [ctypes.POINTER(ctypes.c_int)]),
        "quota_check": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_consume": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_record": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_consume_keyed": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64] + text
                                + [result, ctypes.POINTER(ctypes.c_int)]),
        "quota_record_keyed": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64] + text
                               + [result, ctypes.POINTER(ctypes.c_int)]),
        "quota_reset": (ctypes.c_int, [engine] + text + text + [result]),
        "quota_reset_everywhere": (ctypes.c_int,
                                   [engine] + text + [ctypes.POINTER(ctypes.c_size_t)]),
        "quota_refund": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64, result]),
        "quota_consume_all": (ctypes.c_int, [engine, ctypes.POINTER(ctypes.c_char_p),
                                             ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t]
                              + text + [ctypes.c_int64, result,
                                        ctypes.POINTER(ctypes.c_size_t)]),
        "quota_consume_many": (ctypes.c_int, many),
        "quota_check_many": (ctypes.c_int, many),
        "quota_record_many": (ctypes.c_int, many),
        "quota_owner_usage": (ctypes.c_int, [engine] + text + [
            _USAGE, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
        "quota_watch_usage": (ctypes.c_int, [engine] + text + text + [
            _USAGE, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
        "quota_watch_end": (None, [ctypes.c_void_p]),
        "quota_cancel_new": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
        "quota_cancel_request": (ctypes.c_int, [ctypes.c_void_p]),
        "quota_cancel_free": (None, [ctypes.c_void_p]),
        "quota_acquire": (ctypes.c_int, [engine] + text + text + [
            ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, result]),
        "quota_acquire_all": (ctypes.c_int, [engine, ctypes.POINTER(ctypes.c_char_p),
                                             ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t]
                              + text + [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, result,
                                        ctypes.POINTER(ctypes.c_size_t)]),
        "quota_acquire_lease": (ctypes.c_int, [engine] + text + text + [
            ctypes.c_int64, ctypes.POINTER(LeaseResult)]),
        "quota_acquire_lease_keyed": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64]
                                      + text + [ctypes.POINTER(LeaseResult)]),
        "quota_consume_with_lease": (ctypes.c_int, [engine] + text + text + [
            ctypes.c_int64, ctypes.POINTER(LeaseResult)]),
        "quota_consume_with_lease_keyed": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64]
                                           + text + [ctypes.POINTER(LeaseResult)]),
        "quota_record_with_lease": (ctypes.c_int, [engine] + text + text + [
            ctypes.c_int64, ctypes.POINTER(LeaseResult)]),
        "quota_record_with_lease_keyed": (ctypes.c_int, [engine] + text + text + [ctypes.c_int64]
                                          + text + [ctypes.POINTER(LeaseResult)]),
        "quota_consume_all_leasing": (ctypes.c_int, [engine, ctypes.POINTER(ctypes.c_char_p),
                                                     ctypes.POINTER(ctypes.c_size_t),
                                                     ctypes.c_size_t]
                                      + text + [ctypes.c_int64, result,
                                                ctypes.POINTER(ctypes.c_size_t), _GRANT,
                                                ctypes.c_void_p,
                                                ctypes.POINTER(ctypes.c_size_t)]),
        "quota_acquire_all_leasing": (ctypes.c_int, [engine, ctypes.POINTER(ctypes.c_char_p),
                                                     ctypes.POINTER(ctypes.c_size_t),
                                                     ctypes.c_size_t]
                                      + text + [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                                result, ctypes.POINTER(ctypes.c_size_t), _GRANT,
                                                ctypes.c_void_p,
                                                ctypes.POINTER(ctypes.c_size_t)]),
        "quota_renew_lease": (ctypes.c_int, [engine] + text + [
            ctypes.c_int64, ctypes.POINTER(LeaseResult)]),
        "quota_release_lease": (ctypes.c_int, [engine] + text + [ctypes.POINTER(ctypes.c_int)]),
        "quota_leases": (ctypes.c_int, [engine] + text + text + [
            _LEASE, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
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


class Cancel:
    """A cancellation for Engine.acquire (quota_cancel): one thread waits with it, another
    calls request(), and every acquire waiting on it returns its last denial at once (later
    ones wait no more). Freed by close(), at the end of a `with`, or when collected."""

    def __init__(self):
        lib = load()
        self._free, self._handle = lib.quota_cancel_free, ctypes.c_void_p()
        _checked(lib.quota_cancel_new(ctypes.byref(self._handle)))

    def request(self):
        _checked(load().quota_cancel_request(self._handle))

    def close(self):
        # An acquire that uses this Cancel holds a reference to it: close() from another thread
        # during that call is the one way to free it too early; do not.
        if self._handle:
            self._free(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __del__(self):
        self.close()


class Watch:
    """A running watch (quota_watch) from Engine.watch. end() (or the end of a `with`) stops
    it: no call of its callback begins after end() returns, and one running on another thread
    is waited for. The Watch keeps the ctypes callback alive until then."""

    def __init__(self, engine, handle, callback):
        self._engine, self._handle, self._callback = engine, handle, callback

    def end(self):
        if self._handle:
            load().quota_watch_end(self._handle)
            self._handle = ctypes.c_void_p()
            self._engine._watches.discard(self)
            self._callback = None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.end()


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
        # Watches still running: the engine keeps them (and their callbacks) alive.
        self._watches = set()
        self._handle = ctypes.c_void_p()
        _checked(lib.quota_open(*_utf8(path), ctypes.byref(options), ctypes.byref(self._handle)))

    def close(self):
        """Ends the watches still running, then closes the database."""
        for watch in list(self._watches):
            watch.end()
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

    def ensure(self, name, algorithm, maximum, period_ms, burst=NO_BURST):
        """Defines the limit as define would, but only when no limit of that name exists, and
        answers the Limit as the database holds it: the one just created, or the stored one,
        unchanged. What an application calls for the limits it declares at start-up: once a
        limit exists the database wins, so a restart does not undo `quotactl limit set`."""
        stored = _Limit()
        _checked(load().quota_ensure(self._handle, *_utf8(name), algorithm, maximum, period_ms,
                                     burst, ctypes.byref(stored)))
        return Limit(name, stored)

    def remove(self, name):
        removed = ctypes.c_int()
        _checked(load().quota_remove(self._handle, *_utf8(name), ctypes.byref(removed)))
        return bool(removed.value)

    def set_block(self, name, block_ms):
        """Sets the lockout of the existing limit `name`: a consume denied as rate_limited then
        blocks its owner for `block_ms` (1 ms ... 366 days); None removes the lockout."""
        _checked(load().quota_set_block(self._handle, *_utf8(name),
                                        0 if block_ms is None else block_ms))

    def define_calendar(self, name, maximum, unit, utc_offset_minutes=0, anchor_ms=None):
        """Creates or updates a calendar limit: at most `maximum` units per calendar DAY, WEEK,
        MONTH or YEAR at `utc_offset_minutes` from UTC (-840 ... 840), its windows starting
        where `anchor_ms` (Unix ms) places them in the unit, or where the unit does (None).
        Like define, it sets every setting (a lockout of set_block is removed)."""
        _checked(load().quota_define_calendar(
            self._handle, *_utf8(name), maximum, unit, utc_offset_minutes,
            NO_ANCHOR if anchor_ms is None else anchor_ms))

    def set_anchor(self, limit, owner, anchor_ms):
        """The owner's own anchor of the calendar limit `limit` ("*": every calendar limit
        without one of the owner's for itself); it beats the limit's from the owner's next
        window on."""
        _checked(load().quota_set_anchor(self._handle, *_utf8(limit), *_utf8(owner), anchor_ms))

    def remove_anchor(self, limit, owner):
        """Removes the owner's anchor of `limit` (or of "*"); True if there was one."""
        removed = ctypes.c_int()
        _checked(load().quota_remove_anchor(self._handle, *_utf8(limit), *_utf8(owner),
                                            ctypes.byref(removed)))
        return bool(removed.value)

    def _operate(self, function, limit, owner, *cost):
        result = Result()
        _checked(function(self._handle, *_utf8(limit), *_utf8(owner), *cost,
                          ctypes.byref(result)))
        return result

    def check(self, limit, owner, cost=1):
        return self._operate(load().quota_check, limit, owner, cost)

    def _keyed(self, function, limit, owner, cost, key):
        result, replayed = Result(), ctypes.c_int()
        _checked(function(self._handle, *_utf8(limit), *_utf8(owner), cost, *_utf8(key),
                          ctypes.byref(result), ctypes.byref(replayed)))
        result.replayed = bool(replayed.value)
        return result

    def consume(self, limit, owner, cost=1, key=None):
        """With `key` (an idempotency key, 1 to 255 bytes): a retry with the same key is
        answered as the first request was, result.replayed True, and charges nothing."""
        if key is not None:
            return self._keyed(load().quota_consume_keyed, limit, owner, cost, key)
        return self._operate(load().quota_consume, limit, owner, cost)

    def record(self, limit, owner, cost=1, key=None):
        if key is not None:
            return self._keyed(load().quota_record_keyed, limit, owner, cost, key)
        return self._operate(load().quota_record, limit, owner, cost)

    def reset(self, limit, owner):
        return self._operate(load().quota_reset, limit, owner)

    def reset_everywhere(self, owner):
        """Forgets the owner's state on every limit at once, in one transaction (the right to
        be forgotten); returns on how many limits something was forgotten (0: nothing
        anywhere)."""
        limits = ctypes.c_size_t()
        _checked(load().quota_reset_everywhere(self._handle, *_utf8(owner),
                                               ctypes.byref(limits)))
        return limits.value

    def refund(self, limit, owner, cost=1):
        """Gives back up to `cost` units (never below zero); answers like a check of cost 1."""
        return self._operate(load().quota_refund, limit, owner, cost)

    def consume_all(self, limits, owner, cost=1):
        """Consumes `cost` from every limit at once: allowed only if all allow; if one denies,
        nothing is recorded anywhere and only the deciding limit counts the denial. A
        concurrency limit among them takes a lease: Decision.leases names each one taken."""
        return self._all(load().quota_consume_all_leasing, limits, owner, cost)

    def acquire_all(self, limits, owner, cost=1, max_wait_ms=0, cancel=None):
        """acquire over several limits at once, all or nothing as consume_all: waits for the
        slowest, within `max_wait_ms`; only the final denial counts. Decision.leases as
        consume_all's."""
        return self._all(load().quota_acquire_all_leasing, limits, owner, cost, max_wait_ms,
                         cancel._handle if cancel else None)

    def _all(self, function, limits, owner, cost, *waiting):
        names = [_utf8(limit) for limit in limits]
        data = (ctypes.c_char_p * len(names))(*[data for data, _ in names])
        lengths = (ctypes.c_size_t * len(names))(*[length for _, length in names])
        result, deciding = Result(), ctypes.c_size_t()
        leases = []
        collect = _GRANT(lambda _context, grant: leases.append(LeaseGrant(grant.contents)))
        _checked(function(self._handle, data, lengths, len(names), *_utf8(owner), cost, *waiting,
                          ctypes.byref(result), ctypes.byref(deciding), collect, None, None))
        return Decision(limits[deciding.value], deciding.value, result, leases)

    def acquire(self, limit, owner, cost=1, max_wait_ms=0, cancel=None):
        """Waits for its turn: consumes; while denied with a wait that ends within
        `max_wait_ms` of the call, sleeps exactly that long (the engine stays usable by other
        threads) and consumes again. Answers the first allowance, or the last denial: at once
        when the wait would end past the deadline, can never end, or `cancel` (a Cancel) is
        requested."""
        result = Result()
        _checked(load().quota_acquire(self._handle, *_utf8(limit), *_utf8(owner), cost,
                                      max_wait_ms, cancel._handle if cancel else None,
                                      ctypes.byref(result)))
        return result

    def acquire_lease(self, limit, owner, cost=1, key=None):
        """Takes `cost` units of the concurrency limit `limit` as one lease when the owner's
        unexpired leases leave room: a LeaseResult, allowed with its `lease` id, or denied with
        the wait until enough held units expire. Release it with release_lease (or use
        lease(), which does). With `key` (an idempotency key, 1 to 255 bytes): a retry with
        the same key answers the first acquire's lease again, result.replayed True, and takes
        nothing."""
        result = LeaseResult()
        if key is not None:
            _checked(load().quota_acquire_lease_keyed(self._handle, *_utf8(limit),
                                                      *_utf8(owner), cost, *_utf8(key),
                                                      ctypes.byref(result)))
        else:
            _checked(load().quota_acquire_lease(self._handle, *_utf8(limit), *_utf8(owner),
                                                cost, ctypes.byref(result)))
        return result

    def consume_with_lease(self, limit, owner, cost=1, key=None):
        """consume that also answers the lease it took: a LeaseResult whose `lease` is the id
        of the lease a concurrency limit took ("" on any other algorithm, or when none was),
        so that it can be released. `key` as consume's."""
        result = LeaseResult()
        if key is not None:
            _checked(load().quota_consume_with_lease_keyed(self._handle, *_utf8(limit),
                                                           *_utf8(owner), cost, *_utf8(key),
                                                           ctypes.byref(result)))
        else:
            _checked(load().quota_consume_with_lease(self._handle, *_utf8(limit),
                                                     *_utf8(owner), cost,
                                                     ctypes.byref(result)))
        return result

    def record_with_lease(self, limit, owner, cost=1, key=None):
        """record that also answers the lease it took: on a concurrency limit record takes one
        even over the capacity (allowed 0, the lease held all the same), and `lease` names it
        so that it can be released ("" on any other algorithm). `key` as record's."""
        result = LeaseResult()
        if key is not None:
            _checked(load().quota_record_with_lease_keyed(self._handle, *_utf8(limit),
                                                          *_utf8(owner), cost, *_utf8(key),
                                                          ctypes.byref(result)))
        else:
            _checked(load().quota_record_with_lease(self._handle, *_utf8(limit), *_utf8(owner),
                                                    cost, ctypes.byref(result)))
        return result

    def renew_lease(self, lease, ttl_ms=None):
        """Moves an unexpired lease's expiry to now + ttl_ms (1000 ... 86400000), or now + its
        limit's TTL (None). An unknown, released or expired lease answers allowed 0, reason
        lease_expired."""
        result = LeaseResult()
        _checked(load().quota_renew_lease(self._handle, *_utf8(lease),
                                          0 if ttl_ms is None else ttl_ms, ctypes.byref(result)))
        return result

    def release_lease(self, lease):
        """Frees the lease at once; True if it was held, False if there was nothing to free
        (releasing twice is harmless)."""
        was_held = ctypes.c_int()
        _checked(load().quota_release_lease(self._handle, *_utf8(lease), ctypes.byref(was_held)))
        return bool(was_held.value)

    def lease(self, limit, owner, cost=1, key=None):
        """A Lease for a `with` block: `with engine.lease("uploads", "u1") as lease:` acquires,
        and releases when the block ends; lease.held says whether it was granted. `key` as
        acquire_lease's."""
        return Lease(self, limit, owner, cost, key)

    def leases(self, limit, owner=None):
        """The unexpired leases of the concurrency limit `limit` (of `owner` only, when given),
        a list of LeaseInfo by owner and expiry. Changes nothing."""
        rows = []
        collect = _LEASE(lambda _context, info: rows.append(LeaseInfo(info.contents)))
        owner_text = (None, 0) if owner is None else _utf8(owner)
        _checked(load().quota_leases(self._handle, *_utf8(limit), *owner_text, collect, None,
                                     None))
        return rows

    def _many(self, function, requests):
        # The encoded strings must outlive the call: the structs only point into them.
        texts = [(_utf8(request[0]), _utf8(request[1])) for request in requests]
        array = (_Request * len(requests))(*[
            _Request(limit[0], limit[1], owner[0], owner[1],
                     request[2] if len(request) > 2 else 1)
            for (limit, owner), request in zip(texts, requests)])
        results = (Result * len(requests))()
        _checked(function(self._handle, array, len(requests), results))
        return list(results)

    def consume_many(self, requests):
        """Batch consume: `requests` are (limit, owner) or (limit, owner, cost) tuples, each
        decided on its own, in order, in one transaction; answers a Result per request, in
        their order. A bad request raises (naming its index) before any runs; any other
        failure rolls every request back."""
        return self._many(load().quota_consume_many, requests)

    def check_many(self, requests):
        """Batch check: as consume_many, never writing."""
        return self._many(load().quota_check_many, requests)

    def record_many(self, requests):
        """Batch record: as consume_many, recording each cost even beyond its limit."""
        return self._many(load().quota_record_many, requests)

    def owner_usage(self, owner):
        """The owner's Usage of every limit on which it has state or an override, by limit
        name. Changes nothing."""
        rows = []
        collect = _USAGE(lambda _context, usage: rows.append(Usage(usage.contents)))
        _checked(load().quota_owner_usage(self._handle, *_utf8(owner), collect, None, None))
        return rows

    def watch(self, limit, owner, callback):
        """Calls callback(usage) with the owner's Usage of `limit` now and again whenever it
        changes (through this engine, another one or another process, or time alone); with
        owner None, every owner of the limit (an owner whose state has gone gets one last
        empty Usage). Answers a Watch: end() it, or use it in a `with`; close() ends the
        engine's watches still running. The callback runs on the engine's watch thread; it may
        use the engine but not close it, and an exception it raises is printed and ignored."""
        reported = _USAGE(lambda _context, usage: callback(Usage(usage.contents)))
        owner_text = (None, 0) if owner is None else _utf8(owner)
        handle = ctypes.c_void_p()
        _checked(load().quota_watch_usage(self._handle, *_utf8(limit), *owner_text, reported,
                                          None, ctypes.byref(handle)))
        watch = Watch(self, handle, reported)
        self._watches.add(watch)
        return watch


def demo(database, check):
    failures = []

    def expect(condition, what):
        if check and not condition:
            failures.append(what)

    now = [1_700_000_000_000]
    with Engine(database, clock=lambda: now[0]) as engine:
        # The limits the application declares at start-up: created when missing, otherwise
        # left as an operator set them (`quotactl limit set`), which ensure answers.
        declared = engine.ensure("api", SLIDING_LOG, 2, 1000)
        again = engine.ensure("api", SLIDING_LOG, 99, 60_000)
        print("ensure:", again)
        expect((declared.maximum, again.maximum, again.period_ms, again.burst)
               == (2, 2, 1000, None), "ensure creates once, then answers the stored limit")
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

        demo_lockout_and_usage(engine, now, expect)
        demo_batch(engine, expect)
        demo_retries(engine, expect)
        demo_calendar(engine, now, expect)
        demo_watch(engine, expect)
        demo_leases(engine, now, expect)
        demo_keyed_leases(engine, now, expect)
    demo_acquire(expect)
    print("libquota", version())
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


def expect_error(expect, name, call, what, words=""):
    """Expects call() to raise QuotaError `name` with `words` in its message."""
    try:
        call()
        expect(False, f"{what}: no error")
    except QuotaError as error:
        expect(error.name == name and words in error.message, f"{what}: {error}")


def demo_lockout_and_usage(engine, now, expect):
    # A lockout: the denial that crosses the limit blocks the owner for an hour.
    engine.define("login", FIXED_WINDOW, 2, 900_000)
    engine.set_block("login", 3_600_000)
    engine.consume("login", "eve", 2)
    denied = engine.consume("login", "eve")
    blocked = engine.check("login", "eve")
    print("blocked:", blocked)
    expect(denied.allowed == 0 and denied.reason_name == "rate_limited", "denied, then blocked")
    expect(blocked.allowed == 0 and blocked.reason_name == "blocked" and
           blocked.retry_after_ms == 3_600_000, "set_block: locked out for exactly an hour")

    # One owner across every limit, by limit name.
    engine.define("reads", SLIDING_LOG, 10, 60_000)
    engine.consume("reads", "eve", 3)
    rows = engine.owner_usage("eve")
    for row in rows:
        print("owner_usage:", row)
    expect([(row.limit, row.owner, row.used, row.remaining, row.capacity) for row in rows] ==
           [("login", "eve", 2, 0, 2), ("reads", "eve", 3, 7, 10)], "owner_usage's rows")
    expect(rows[0].blocked_until_ms == now[0] + 3_600_000 and rows[0].denied == 1 and
           rows[1].blocked_until_ms is None, "owner_usage: the lockout's end and the denial")
    expect(engine.owner_usage("nobody") == [], "owner_usage of an owner without state")

    # Forgotten everywhere at once: every limit where eve had state, and no other owner's.
    engine.consume("reads", "bob")
    reset = engine.reset_everywhere("eve")
    expect(reset >= 2 and engine.reset_everywhere("nobody") == 0 and
           engine.owner_usage("eve") == [], "reset_everywhere: eve's state gone, nobody's none")
    expect([row.used for row in engine.owner_usage("bob")] == [1], "reset_everywhere: bob kept")
    expect_error(expect, "invalid_argument", lambda: engine.reset_everywhere(""),
                 "reset_everywhere of an empty owner")
    engine.consume("login", "eve", 2)
    engine.consume("login", "eve")
    engine.consume("reads", "eve", 3)

    # None lifts the lockout: a denial is a plain rate_limited again.
    engine.set_block("login", None)
    expect(engine.check("login", "eve").reason_name == "rate_limited", "set_block(None)")
    expect_error(expect, "invalid_argument", lambda: engine.set_block("login", -1),
                 "set_block -1")
    expect_error(expect, "unknown_limit", lambda: engine.set_block("nope", 1000),
                 "set_block of no limit")


def demo_batch(engine, expect):
    # Each request decided on its own, in order, in one transaction.
    engine.define("minute", FIXED_WINDOW, 2, 60_000)
    results = engine.consume_many([("minute", "u", 1), ("minute", "v", 2), ("minute", "u"),
                                   ("minute", "u", 1)])
    print("consume_many:", results)
    expect([(r.allowed, r.remaining, r.denied) for r in results] ==
           [(1, 1, 0), (1, 0, 0), (1, 0, 0), (0, 0, 1)], "consume_many answers in order")
    checked = engine.check_many([("minute", "u"), ("minute", "w")])
    expect([r.allowed for r in checked] == [0, 1], "check_many")
    recorded = engine.record_many([("minute", "w", 3)])
    expect(recorded[0].allowed == 0 and recorded[0].remaining == 0,
           "record_many records beyond the limit")
    expect(engine.consume_many([]) == [], "an empty batch")
    expect_error(expect, "invalid_argument",
                 lambda: engine.consume_many([("minute", "x", 1), ("minute", "x", 0)]),
                 "a bad request", "request 1")
    expect_error(expect, "unknown_limit",
                 lambda: engine.consume_many([("minute", "x"), ("nope", "x")]), "no such limit")
    expect(engine.check("minute", "x").remaining == 2, "a failed batch keeps nothing")


# Calendar instants, worked out by hand from a count of days (2023-01-01T00:00Z is 19358 days
# after 1970-01-01: 53 years of 365 days and the 13 leap days of 1972 ... 2020; 1 December is
# day 334 of a common year, counting from 0; 1970-01-01 was a Thursday).
DAY_MS, HOUR_MS = 86_400_000, 3_600_000
JAN_1_2023 = 19358 * DAY_MS  # 1672531200000
# "now": 1700000000000 = 19675 days (2023-11-14, day 317, a Tuesday: 19675 = 7 x 2810 + 5)
# and 80000 s (22:13:20) after 1970-01-01T00:00Z.
CALENDAR_NOW = 1_700_000_000_000
DEC_1_2023 = JAN_1_2023 + 334 * DAY_MS  # 1701388800000
JAN_1_2024 = JAN_1_2023 + 365 * DAY_MS  # 1704067200000


def demo_retries(engine, expect):
    # A retry with the same idempotency key is answered, not charged again.
    engine.define("payout", FIXED_WINDOW, 2, 3_600_000)
    first = engine.consume("payout", "acct-9", key="order-1001")
    retry = engine.consume("payout", "acct-9", key="order-1001")
    print("retry of order-1001:", retry, "replayed:", retry.replayed)
    expect(not first.replayed and retry.replayed, "the retry is replayed")
    expect(retry.remaining == first.remaining == 1, "the retry charged nothing")
    try:
        engine.consume("payout", "acct-9", 2, key="order-1001")
        expect(False, "the same key for another cost is refused")
    except QuotaError as error:
        expect(error.name == "idempotency_conflict", "idempotency_conflict")


def demo_calendar(engine, now, expect):
    now[0] = CALENDAR_NOW
    expect(CALENDAR_NOW == JAN_1_2023 + 317 * DAY_MS + 80_000_000, "the hand count of now")
    # A month, UTC: every answer of November points at 1 December.
    engine.define_calendar("monthly", 3, MONTH)
    answers = [engine.consume("monthly", "alice") for _ in range(4)]
    print("monthly:", answers[3])
    expect([(a.allowed, a.reset_at_ms) for a in answers] ==
           [(1, DEC_1_2023)] * 3 + [(0, DEC_1_2023)], "a month's window ends on 1 December")
    expect(answers[3].retry_after_ms == DEC_1_2023 - CALENDAR_NOW == 1_388_800_000,
           "a denial waits until 1 December")
    now[0] = DEC_1_2023 - 1
    expect(engine.consume("monthly", "alice").retry_after_ms == 1, "1 ms before December")
    now[0] = DEC_1_2023
    december = engine.consume("monthly", "alice")
    expect(december.allowed == 1 and december.remaining == 2 and
           december.reset_at_ms == JAN_1_2024, "December's window ends on 1 January")
    now[0] = CALENDAR_NOW

    # Each unit and an offset: a day at +09:00 (now 07:13:20 on 15 November there) ends at
    # 16 November 00:00+09:00 = 15 November 15:00Z; an ISO week, UTC, on Monday 20 November;
    # a year at -05:00 on 2024-01-01T00:00-05:00 = 05:00Z.
    ends = {"daily_tokyo": (DAY, 9 * 60, JAN_1_2023 + 318 * DAY_MS + 15 * HOUR_MS),
            "weekly": (WEEK, 0, JAN_1_2023 + 323 * DAY_MS),
            "yearly": (YEAR, -5 * 60, JAN_1_2024 + 5 * HOUR_MS)}
    for name, (unit, offset, end) in ends.items():
        engine.define_calendar(name, 1, unit, utc_offset_minutes=offset)
        answer = engine.consume(name, "alice")
        expect(answer.allowed == 1 and answer.reset_at_ms == end, f"{name} ends at {end}")
    expect([end for _, _, end in ends.values()] ==
           [1_700_060_400_000, 1_700_438_400_000, 1_704_085_200_000], "the ends, in numbers")

    # Anchored on 31 January: the window began on 31 October; November lacks a 31st, so the
    # next begins on its last day, 30 November (day 333).
    engine.define_calendar("billing", 1, MONTH, anchor_ms=JAN_1_2023 + 30 * DAY_MS)
    billing = engine.consume("billing", "alice")
    expect(billing.reset_at_ms == JAN_1_2023 + 333 * DAY_MS == 1_701_302_400_000,
           "an anchor on the 31st: 30 November")

    # An owner's anchor beats the limit's: bob's months begin on the 15th (next: 15 November,
    # day 318); "*": carol's days begin at 01:00Z, 10:00 at +09:00 (next: 15 November 01:00Z).
    engine.set_anchor("monthly", "bob", JAN_1_2023 + 14 * DAY_MS)
    bob = engine.consume("monthly", "bob")
    expect(bob.reset_at_ms == JAN_1_2023 + 318 * DAY_MS == 1_700_006_400_000,
           "bob's anchor: 15 November")
    engine.set_anchor("*", "carol", JAN_1_2023 + HOUR_MS)
    carol = engine.consume("daily_tokyo", "carol")
    print("carol's day:", carol)
    expect(carol.reset_at_ms == JAN_1_2023 + 318 * DAY_MS + HOUR_MS, "carol's anchor on '*'")
    expect(engine.remove_anchor("monthly", "bob") and not engine.remove_anchor("monthly", "bob")
           and engine.remove_anchor("*", "carol"), "remove_anchor says whether there was one")

    # Bad input changes nothing.
    for what, call, words in [
            ("unit 4", lambda: engine.define_calendar("monthly", 3, 4), "QUOTA_MONTH"),
            ("offset 841", lambda: engine.define_calendar("monthly", 3, MONTH, 841),
             "utc_offset_minutes 841"),
            ("anchor -2", lambda: engine.define_calendar("monthly", 3, MONTH, anchor_ms=-2),
             "QUOTA_NO_ANCHOR"),
            ("an owner's anchor -1", lambda: engine.set_anchor("monthly", "dave", -1),
             "anchor_ms -1"),
            ("an anchor on a plain limit",
             lambda: engine.set_anchor("minute", "dave", JAN_1_2023), "")]:
        expect_error(expect, "invalid_argument", call, what, words)
    expect_error(expect, "unknown_limit", lambda: engine.set_anchor("nope", "dave", JAN_1_2023),
                 "an anchor on no limit")
    expect(engine.consume("monthly", "erin").reset_at_ms == DEC_1_2023 and
           not engine.remove_anchor("monthly", "dave"), "the bad calls changed nothing")


class _Reports:
    """What a watch's callback received, for the demo to wait on (the callback runs on the
    engine's watch thread)."""

    def __init__(self):
        self.usages, self.changed = [], threading.Condition()

    def __call__(self, usage):
        with self.changed:
            self.usages.append(usage)
            self.changed.notify_all()

    def wait(self, owner, used):
        """Waits (up to 10 s) for a report of `used` for `owner`; True if it came."""
        with self.changed:
            return self.changed.wait_for(lambda: any(
                (u.owner, u.used) == (owner, used) for u in self.usages), timeout=10)


def demo_watch(engine, expect):
    engine.define("uploads", SLIDING_LOG, 5, 60_000)
    one, every = _Reports(), _Reports()
    with engine.watch("uploads", None, every):
        watch = engine.watch("uploads", "user:ü", one)
        expect(one.wait("user:ü", 0), "a watch reports the usage when it begins")
        engine.consume("uploads", "user:ü", 2)
        expect(one.wait("user:ü", 2) and every.wait("user:ü", 2), "a watch reports a change")
        print("watch:", one.usages[-1])
        expect(one.usages[-1].remaining == 3 and one.usages[-1].limit == "uploads",
               "the change's usage")
        watch.end()
        calls = len(one.usages)
        engine.consume("uploads", "other")
        expect(every.wait("other", 1), "a watch of every owner reports each owner")
        expect(len(one.usages) == calls, "an ended watch reports nothing more")
        watch.end()  # again: nothing
    expect(not engine._watches, "the with block ended the watch of every owner")
    expect_error(expect, "unknown_limit", lambda: engine.watch("nope", "u", one),
                 "a watch of no limit")


def demo_leases(engine, now, expect):
    # At most two uploads at once per user; a lease a crashed holder never released is freed
    # 60 s after it was taken.
    engine.define("uploads", CONCURRENCY, 2, 60_000)
    start = now[0]
    with engine.lease("uploads", "user:ü") as first:
        second = engine.acquire_lease("uploads", "user:ü")
        third = engine.acquire_lease("uploads", "user:ü")
        print("lease:", first.result)
        print("full:", third)
        expect(first.held and len(first.id) == LEASE_ID_LENGTH and
               first.result.expires_at_ms == start + 60_000, "a lease for the with block")
        expect(second.allowed == 1 and second.remaining == 0 and second.lease != first.id,
               "a second lease, none left")
        expect(third.allowed == 0 and third.reason_name == "rate_limited" and
               third.retry_after_ms == 60_000 and third.lease == "" and
               third.expires_at_ms == 0, "full: denied until a lease expires")
        listed = engine.leases("uploads")
        expect([(row.owner, row.cost, row.acquired_at_ms) for row in listed] ==
               [("user:ü", 1, start)] * 2, "leases lists both")
        now[0] += 1_000
        expect(first.renew().expires_at_ms == now[0] + 60_000 and
               first.result.expires_at_ms == now[0] + 60_000, "Lease.renew: the limit's TTL")
        expect(first.renew(ttl_ms=2_000).expires_at_ms == now[0] + 2_000, "Lease.renew(2 s)")
    expect(not first.held and [row.lease for row in engine.leases("uploads", "user:ü")] ==
           [second.lease], "the with block released its lease")

    now[0] += 10_000
    renewed = engine.renew_lease(second.lease)
    expect(renewed.allowed == 1 and renewed.expires_at_ms == now[0] + 60_000,
           "renew_lease: the limit's TTL from now")
    expect(engine.renew_lease(second.lease, ttl_ms=5_000).expires_at_ms == now[0] + 5_000,
           "renew_lease with a TTL of its own")
    expect(engine.release_lease(second.lease) and not engine.release_lease(second.lease),
           "release_lease says whether it was held")
    gone = engine.renew_lease(second.lease)
    expect(gone.allowed == 0 and gone.reason_name == "lease_expired" and
           gone.retry_after_ms == -1, "a released lease cannot be renewed")

    # A denied lease holds nothing, and an exception in the block still releases.
    engine.acquire_lease("uploads", "bob", 2)
    with engine.lease("uploads", "bob") as refused:
        expect(not refused.held and refused.result.reason_name == "rate_limited",
               "a denied lease holds nothing")
        expect_error(expect, "invalid_argument", refused.renew, "renew a denied lease",
                     "holds nothing")
        expect(not refused.release(), "release a denied lease: nothing was held")
    try:
        with engine.lease("uploads", "carol", 2) as held:
            raise RuntimeError("the upload failed")
    except RuntimeError:
        pass
    expect(not held.held and engine.leases("uploads", "carol") == [],
           "an exception in the block releases")
    # bob's lease was never released (a crashed holder): it is freed at its expiry.
    now[0] += 60_000
    expect(engine.leases("uploads", "bob") == [] and
           engine.acquire_lease("uploads", "bob", 2).allowed == 1, "freed at its expiry")

    for what, call, words in [
            ("a rate limit", lambda: engine.acquire_lease("minute", "u"),
             "not a concurrency limit"),
            ("a context manager on a rate limit", lambda: engine.lease("minute", "u"),
             "not a concurrency limit"),
            ("cost 0", lambda: engine.acquire_lease("uploads", "u", 0), ""),
            ("ttl 999", lambda: engine.renew_lease("0" * 32, 999), "ttl_ms 999"),
            ("an empty id", lambda: engine.release_lease(""), "lease id is empty"),
            ("leases of a rate limit", lambda: engine.leases("minute"),
             "not a concurrency limit")]:
        expect_error(expect, "invalid_argument", call, what, words)
    expect_error(expect, "unknown_limit", lambda: engine.acquire_lease("nope", "u"),
                 "a lease of no limit")
    expect(engine.leases("uploads", "u") == [], "the bad calls took nothing")


def demo_keyed_leases(engine, now, expect):
    # An acquire retried with the same idempotency key answers the first lease again, takes
    # nothing, and says replayed.
    engine.define("exports", CONCURRENCY, 2, 60_000)
    first = engine.acquire_lease("exports", "acct-9", key="export-7")
    now[0] += 1_000
    retry = engine.acquire_lease("exports", "acct-9", key="export-7")
    print("retried lease:", retry)
    expect(first.allowed == 1 and not first.replayed and len(first.lease) == LEASE_ID_LENGTH,
           "a keyed acquire takes a lease")
    expect(retry.replayed and retry.allowed == 1 and retry.lease == first.lease and
           retry.expires_at_ms == first.expires_at_ms and retry.remaining == first.remaining,
           "the retry answers the first lease, replayed")
    expect([row.lease for row in engine.leases("exports", "acct-9")] == [first.lease],
           "the retry took no second lease")
    expect_error(expect, "idempotency_conflict",
                 lambda: engine.acquire_lease("exports", "acct-9", 2, key="export-7"),
                 "the same key for another cost", "export-7")
    expect_error(expect, "idempotency_conflict",
                 lambda: engine.consume("exports", "acct-9", key="export-7"),
                 "the key of an acquire for a consume", "export-7")

    # A with block takes the key too; its lease is released when the block ends.
    with engine.lease("exports", "acct-9", key="export-8") as held:
        expect(held.held and not held.result.replayed and held.result.remaining == 0,
               "Engine.lease with a key")
    expect([row.lease for row in engine.leases("exports", "acct-9")] == [first.lease],
           "the keyed with block released its lease")

    for what, key, words in [("an empty key", "", "1 to 255 bytes"),
                             ("a key of 256 bytes", "k" * 256, "256 bytes"),
                             ("a key of 256 UTF-8 bytes", "ü" * 128, "256 bytes")]:
        expect_error(expect, "invalid_argument",
                     lambda key=key: engine.acquire_lease("exports", "acct-9", key=key), what,
                     words)
        expect_error(expect, "invalid_argument",
                     lambda key=key: engine.lease("exports", "acct-9", key=key),
                     f"Engine.lease with {what}", words)
    expect([row.lease for row in engine.leases("exports", "acct-9")] == [first.lease],
           "the bad keys took nothing")
    expect(engine.acquire_lease("exports", "acct-9", key="k" * 255).allowed == 1,
           "a key of 255 bytes is the longest")
    engine.release_lease(first.lease)

    # A consume on a concurrency limit names the lease it took too (consume_with_lease), with
    # or without a key; on a rate limit it names none.
    taken = engine.consume_with_lease("exports", "acct-10")
    expect(taken.allowed == 1 and len(taken.lease) == LEASE_ID_LENGTH,
           "consume_with_lease answers the lease")
    keyed = engine.consume_with_lease("exports", "acct-10", key="consume-1")
    again = engine.consume_with_lease("exports", "acct-10", key="consume-1")
    expect(again.replayed and again.lease == keyed.lease, "a keyed retry answers the same lease")
    expect(sorted(row.lease for row in engine.leases("exports", "acct-10")) ==
           sorted([taken.lease, keyed.lease]), "the leases consume_with_lease named are held")
    expect(engine.release_lease(taken.lease) and engine.release_lease(keyed.lease),
           "and can be released")
    plain = engine.consume_with_lease("minute", "acct-10")
    expect(plain.allowed == 1 and plain.lease == "", "a rate limit names no lease")

    # record takes a lease even over the capacity (2 here), and names it.
    recorded = [engine.record_with_lease("exports", "acct-11", 2),
                engine.record_with_lease("exports", "acct-11")]
    expect(recorded[0].allowed == 1 and recorded[1].allowed == 0 and
           all(len(r.lease) == LEASE_ID_LENGTH for r in recorded),
           "record_with_lease names its lease, over the capacity too")
    expect(sorted(row.lease for row in engine.leases("exports", "acct-11")) ==
           sorted(r.lease for r in recorded), "the leases record_with_lease named are held")
    keyed = engine.record_with_lease("exports", "acct-12", key="record-1")
    again = engine.record_with_lease("exports", "acct-12", key="record-1")
    expect(again.replayed and again.lease == keyed.lease, "a keyed record answers the same lease")
    expect(all(engine.release_lease(lease) for lease in
               [recorded[0].lease, recorded[1].lease, keyed.lease]), "and can be released")

    # consume_all and acquire_all over rate and concurrency limits name the leases they took.
    both = engine.consume_all(["minute", "exports"], "acct-13")
    print("consume_all with a lease:", both)
    expect(both.result.allowed == 1 and [(g.limit, g.owner) for g in both.leases] ==
           [("exports", "acct-13")] and len(both.leases[0].lease) == LEASE_ID_LENGTH and
           both.leases[0].expires_at_ms == now[0] + 60_000, "consume_all names its lease")
    waited = engine.acquire_all(["minute", "exports"], "acct-13")
    expect(waited.result.allowed == 1 and len(waited.leases) == 1, "acquire_all names its lease")
    full = engine.consume_all(["minute", "exports"], "acct-13")
    expect(full.result.allowed == 0 and full.leases == [], "a denial holds and names none")
    expect(sorted(row.lease for row in engine.leases("exports", "acct-13")) ==
           sorted([both.leases[0].lease, waited.leases[0].lease]),
           "the leases consume_all and acquire_all named are held")
    expect(engine.release_lease(both.leases[0].lease) and
           engine.release_lease(waited.leases[0].lease), "and can be released")
    expect(engine.consume_all(["minute"], "acct-14").leases == [], "rate limits name none")


def demo_acquire(expect):
    # acquire sleeps in real time: an engine on the system clock.
    with Engine(":memory:") as engine:
        engine.define("slow", SLIDING_LOG, 1, 1500)
        engine.consume("slow", "u")
        at_once = engine.acquire("slow", "u", max_wait_ms=0)
        waited = engine.acquire("slow", "u", max_wait_ms=10_000)
        print("acquire:", at_once, waited)
        expect(at_once.allowed == 0 and at_once.retry_after_ms > 0,
               "acquire without a wait answers the denial")
        expect(waited.allowed == 1, "acquire waits its turn")
        slow = [row for row in engine.owner_usage("u") if row.limit == "slow"][0]
        expect(slow.denied == 1, "only the refusal that ended a wait counts as a denial")

        # Several limits at once, all or nothing: waits for the slower one.
        engine.define("quick", SLIDING_LOG, 1, 200)
        engine.define("slower", SLIDING_LOG, 1, 400)
        engine.consume_all(["quick", "slower"], "u")
        both = engine.acquire_all(["quick", "slower"], "u", max_wait_ms=10_000)
        print("acquire_all:", both)
        expect(both.result.allowed == 1 and both.result.denied == 0,
               "acquire_all waits for the slowest, counting no denial")

        # Cancelled from another thread: without the cancel, it would wait 30 s and succeed.
        engine.define("hourly", SLIDING_LOG, 1, 30_000)
        engine.consume("hourly", "u")
        with Cancel() as cancel:
            threading.Timer(0.2, cancel.request).start()
            cancelled = engine.acquire("hourly", "u", max_wait_ms=60_000, cancel=cancel)
            again = engine.acquire("hourly", "u", max_wait_ms=60_000, cancel=cancel)
        print("cancelled acquire:", cancelled)
        expect(cancelled.allowed == 0 and cancelled.reason_name == "rate_limited" and
               again.allowed == 0, "a cancel from another thread ends the wait")
        expect_error(expect, "invalid_argument",
                     lambda: engine.acquire("slow", "u", max_wait_ms=-1), "max_wait_ms -1")


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
