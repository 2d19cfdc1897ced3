// What a user who picks rate-limiter-flexible's SQLite store instead pays per decision, and
// the floor under it: better-sqlite3's bare upsert. bench/scripts/peers.sh runs this with
// NODE_PATH at the scratch folder it installed rate-limiter-flexible and better-sqlite3 into,
// between quota-bench's consumes, in interleaved rounds.
//
//   node sqlite_store.js rlf|raw --db FILE [--duration SECONDS] [--owners N]
//
//   rlf  RateLimiterSQLite (storeType better-sqlite3), 100 points per 10 s, `await
//        limiter.consume(owner)` one after another: one client, as an application awaits it
//   raw  the bare text-key upsert of quota-bench's upsert_text, INSERT ... ON CONFLICT DO
//        UPDATE SET count = count + 1 RETURNING count, prepared once and run with .all()
//
// FILE is made afresh in WAL mode with synchronous NORMAL, on the connection both use. Every
// owner gets one request first (quota-bench's templates hold every owner), then 0.1 s of
// warm-up, then the measured run, timing each operation. The owners are quota-bench's: "user:<n>"
// in the sequence of bench.h's Owners (xorshift64*, the same seed), computed before the run.
//
// A statement with RETURNING must be stepped to its end for SQLite to run its WAL hook, and
// with it the automatic checkpoint: better-sqlite3's .get() reads one row and resets the
// statement, so a bare upsert run with .get() outside a transaction commits but never
// checkpoints, and its WAL grows for the whole run. .all() steps to the end. The store runs
// its upsert with .get() inside db.transaction(), whose COMMIT is stepped to its end, so its
// WAL is checkpointed; the size of the WAL after the run is printed to show it.
//
// Prints one JSON object: ops_per_s, p50_us, p99_us, p999_us, max_us, operations,
// allowed_share, cpu_us_per_op (the process's CPU time per operation while measuring, every
// thread: Node's own too), wal_bytes, the versions of SQLite, better-sqlite3 and the store.
"use strict";

const fs = require("fs");
const { performance } = require("perf_hooks");

function fail(message) {
  process.stderr.write(
    `sqlite_store.js: error: ${message} (usage: node sqlite_store.js rlf|raw --db FILE ` +
      "[--duration SECONDS] [--owners N])\n"
  );
  process.exit(2);
}

function parse(argv) {
  const options = { mode: null, db: null, duration: 1, owners: 1000 };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      return argv[++i];
    };
    const number = (text, low, high) => {
      const n = Number(text);
      if (text === "" || !(n >= low && n <= high)) {
        fail(`${arg} takes a number from ${low} to ${high}, not '${text}'`);
      }
      return n;
    };
    if (arg === "rlf" || arg === "raw") options.mode = arg;
    else if (arg === "--db") options.db = value();
    else if (arg === "--duration") options.duration = number(value(), 0.001, 600);
    else if (arg === "--owners") options.owners = Math.floor(number(value(), 1, 1e7));
    else fail(`unknown argument '${arg}'`);
  }
  if (!options.mode) fail("say which to run: rlf or raw");
  if (!options.db) fail("give the database file with --db");
  return options;
}

// bench.h's Owners, random: the same sequence of owner numbers for the same seed.
function ownerSequence(count, length) {
  const mask = (1n << 64n) - 1n;
  let random = 0x9e3779b97f4a7c15n;
  const sequence = new Int32Array(length);
  const owners = BigInt(count);
  for (let i = 0; i < length; ++i) {
    random ^= random >> 12n;
    random ^= (random << 25n) & mask;
    random ^= random >> 27n;
    sequence[i] = Number((((random * 0x2545f4914f6cdd1dn) & mask) >> 1n) % owners);
  }
  return sequence;
}

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.round(q * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

async function main() {
  const options = parse(process.argv.slice(2));
  const Database = require("better-sqlite3");
  for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(options.db + suffix, { force: true });
  const db = new Database(options.db);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");

  // True when allowed: a promise of it for the store (awaited, as an application does), the
  // value itself for the bare upsert (not awaited: a bare statement costs no promise).
  let decide;
  let store = null;
  if (options.mode === "rlf") {
    const { RateLimiterSQLite } = require("rate-limiter-flexible");
    store = `rate-limiter-flexible ${require("rate-limiter-flexible/package.json").version}`;
    const limiter = await new Promise((resolve, reject) => {
      const made = new RateLimiterSQLite(
        {
          storeClient: db,
          storeType: "better-sqlite3",
          tableName: "rate_limits",
          points: 100,
          duration: 10,
        },
        (error) => (error ? reject(error) : resolve(made))
      );
    });
    decide = async (key) => {
      try {
        await limiter.consume(key, 1);
        return true;
      } catch (rejection) {
        if (rejection instanceof Error) throw rejection;
        return false; // a RateLimiterRes: denied
      }
    };
  } else {
    db.exec("CREATE TABLE text_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID");
    const upsert = db.prepare(
      "INSERT INTO text_counters (key, count) VALUES (?, 1) " +
        "ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count"
    );
    decide = (key) => upsert.all(key).length === 1;
  }

  const keys = Array.from({ length: options.owners }, (_, n) => `user:${n}`);
  const asynchronous = options.mode === "rlf";
  for (const key of keys) {
    if (asynchronous) await decide(key);
    else decide(key);
  }

  // Enough of the sequence for 400,000 operations a second; beyond it the sequence repeats.
  const sequence = ownerSequence(options.owners, Math.ceil((options.duration + 0.1) * 400000));
  let next = 0;
  const nextKey = () => {
    const key = keys[sequence[next]];
    next = next + 1 === sequence.length ? 0 : next + 1;
    return key;
  };
  const warmUntil = performance.now() + 100;
  while (performance.now() < warmUntil) {
    if (asynchronous) await decide(nextKey());
    else decide(nextKey());
  }

  const latencies = new Float64Array(Math.min(sequence.length, 8000000));
  let operations = 0;
  let admitted = 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const stop = start + options.duration * 1000;
  let last = start;
  for (;;) {
    if (asynchronous ? await decide(nextKey()) : decide(nextKey())) ++admitted;
    const now = performance.now();
    if (operations < latencies.length) latencies[operations] = now - last;
    last = now;
    ++operations;
    if (now >= stop) break;
  }
  const elapsedMs = last - start;
  const cpu = process.cpuUsage(cpuBefore);
  const sorted = latencies.subarray(0, Math.min(operations, latencies.length)).sort();
  let walBytes = 0;
  try {
    walBytes = fs.statSync(options.db + "-wal").size;
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
  const sqlite = db.prepare("SELECT sqlite_version() AS v").get().v;
  db.close();
  const us = (ms) => ms * 1000;
  const result = {
    name: `${options.mode === "rlf" ? "rlf_sqlite" : "better_sqlite3_upsert"}/wal_normal/${options.owners}`,
    ops_per_s: (operations * 1000) / elapsedMs,
    p50_us: us(percentile(sorted, 0.5)),
    p99_us: us(percentile(sorted, 0.99)),
    p999_us: us(percentile(sorted, 0.999)),
    max_us: us(sorted.length ? sorted[sorted.length - 1] : 0),
    operations,
    allowed_share: operations ? admitted / operations : 0,
    cpu_us_per_op: operations ? (cpu.user + cpu.system) / operations : 0,
    wal_bytes: walBytes,
    server: [
      `Node ${process.versions.node}`,
      `better-sqlite3 ${require("better-sqlite3/package.json").version}`,
      `SQLite ${sqlite}`,
      store,
    ]
      .filter(Boolean)
      .join(", "),
  };
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((error) => {
  process.stderr.write(`sqlite_store.js: error: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
