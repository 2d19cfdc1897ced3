-- Checks of migrations/postgresql/ on a freshly migrated database, with the
-- statements of schema_helpers.sql. Run by tests/postgresql/schema_check.sh (psql with
-- ON_ERROR_STOP): the first failing check stops it with "check failed: <what>".
\set QUIET on
SET client_min_messages = warning;
SELECT set_config('search_path', 'public, check_helpers', false) \g /dev/null

-- The objects, and no request queue for new owners.
SELECT expect((SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'
               AND table_type = 'BASE TABLE' AND table_name IN
               ('quota_migrations', 'quota_limits', 'quota_overrides', 'quota_windows',
                'quota_log_owners', 'quota_log', 'quota_buckets', 'quota_resets')) = 8,
              'the eight tables exist');
SELECT expect(to_regclass('quota_new_owners') IS NULL, 'there is no quota_new_owners');
SELECT expect((SELECT count(*) FROM information_schema.views WHERE table_schema = 'public'
               AND table_name IN ('quota_usage', 'quota_owner_limits')) = 2, 'the two views');

-- The column types: integers bigint (version integer), flags boolean, the rest text.
SELECT expect((SELECT string_agg(table_name || '.' || column_name, ' '
                                 ORDER BY table_name, column_name)
               FROM information_schema.columns WHERE table_schema = 'public'
               AND table_name LIKE 'quota\_%'
               AND data_type NOT IN ('bigint', 'text')) =
              'quota_buckets.last_allowed quota_idempotency.allowed '
              'quota_idempotency.shadow_denied quota_lease_owners.last_allowed '
              'quota_lease_owners.last_shadow_denied quota_limits.overridden quota_limits.plain '
              'quota_limits.shadow quota_limits_overridden.overridden quota_limits_plain.plain '
              'quota_log_owners.last_allowed '
              'quota_migrations.version quota_windows.last_allowed',
              'the columns that are neither bigint nor text');
SELECT expect((SELECT string_agg(DISTINCT data_type, ' ') FROM information_schema.columns
               WHERE table_schema = 'public'
               AND column_name IN ('last_allowed', 'shadow', 'plain', 'overridden')) =
              'boolean', 'last_allowed, shadow, plain and overridden are boolean');
SELECT expect((SELECT data_type FROM information_schema.columns WHERE table_name = 'quota_usage'
               AND column_name = 'reset_at') = 'text', 'quota_usage.reset_at is text');
SELECT expect((SELECT data_type FROM information_schema.columns
               WHERE table_name = 'quota_migrations' AND column_name = 'version') = 'integer',
              'quota_migrations.version is an integer');
SELECT expect((SELECT string_agg(column_name, ',' ORDER BY ordinal_position)
               FROM information_schema.columns WHERE table_name = 'quota_usage') =
              'limit_name,owner,used,remaining,denied,reset_at_ms,reset_at,shadow_denied,'
              'blocked_until_ms',
              'quota_usage has the columns of SQLite''s');

-- The checks of the configuration tables.
INSERT INTO quota_limits (name, algorithm, maximum, period_ms) VALUES
  ('fw', 'fixed_window', 3, 1000), ('sw', 'sliding_window', 5, 1000),
  ('log', 'sliding_log', 10, 1000), ('big', 'fixed_window', 1000000000000, 1000000000);
INSERT INTO quota_limits (name, algorithm, maximum, period_ms, burst) VALUES
  ('tb', 'token_bucket', 1, 1000, 2);
SELECT expect((SELECT shadow FROM quota_limits WHERE name = 'fw') = false,
              'shadow is false by default');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('a b', 'fixed_window', 1, 1)$$,
                    'quota_limits_name_check', 'a name with a space');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('', 'fixed_window', 1, 1)$$,
                    'quota_limits_name_check', 'an empty name');
SELECT expect_error(format('INSERT INTO quota_limits VALUES (%L, %L, 1, 1)',
                           repeat('n', 65), 'fixed_window'),
                    'quota_limits_name_check', 'a name of 65 characters');
SELECT expect_error($$INSERT INTO quota_limits VALUES (E'a\n', 'fixed_window', 1, 1)$$,
                    'quota_limits_name_check', 'a name that ends in a newline');
INSERT INTO quota_limits VALUES (repeat('n', 64), 'fixed_window', 1, 1),
                                ('A-z_0.9:-', 'fixed_window', 1, 1);
DELETE FROM quota_limits WHERE name IN (repeat('n', 64), 'A-z_0.9:-');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'leaky', 1, 1)$$,
                    'quota_limits_algorithm_check', 'an unknown algorithm');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'fixed_window', 0, 1)$$,
                    'quota_limits_maximum_check', 'a maximum of 0');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'fixed_window', 1, 31622400001)$$,
                    'quota_limits_period_ms_check', 'a period of more than 366 days');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'fixed_window', 1, 1, 5)$$,
                    'quota_limits_burst_check', 'a burst for a fixed_window');
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'token_bucket', 1, 1, 0)$$,
                    'quota_limits_burst_check', 'a token_bucket with burst 0');
-- As in SQLite, a CHECK that yields NULL passes: a token_bucket without a burst is accepted
-- by the schema (the library and quotactl refuse it before writing).
INSERT INTO quota_limits VALUES ('x', 'token_bucket', 1, 1);
DELETE FROM quota_limits WHERE name = 'x';
-- A sliding_window of 366 days is accepted (migration 0006); its maximum is bounded by the
-- product maximum * period_ms <= 2^62.
INSERT INTO quota_limits VALUES ('x', 'sliding_window', 145836053, 31622400000);
DELETE FROM quota_limits WHERE name = 'x';
SELECT expect_error($$INSERT INTO quota_limits VALUES ('x', 'sliding_window', 145836054, 31622400000)$$,
                    'quota_limits_sliding_window_check', 'a sliding_window whose product overflows');
SELECT expect_error($$INSERT INTO quota_limits
                      VALUES ('x', 'token_bucket', 1, 31622400000, 1000000000)$$,
                    'quota_limits_token_bucket_check',
                    'a token_bucket whose burst * period overflows');
INSERT INTO quota_overrides VALUES ('*', 'u9', 'exempt', NULL, NULL),
                                   ('fw', repeat('é', 512), 'deny', NULL, NULL);
DELETE FROM quota_overrides;
SELECT expect_error(format('INSERT INTO quota_overrides VALUES (%L, %L, %L)', 'fw',
                           repeat('é', 512) || 'x', 'deny'),
                    'quota_overrides_owner_check', 'an owner of 1025 bytes');
SELECT expect_error($$INSERT INTO quota_overrides VALUES ('fw', 'u', 'deny', 3, NULL)$$,
                    'quota_overrides_maximum_check', 'a maximum with the deny policy');
SELECT expect_error($$INSERT INTO quota_overrides VALUES ('f w', 'u', 'deny', NULL, NULL)$$,
                    'quota_overrides_limit_name_check', 'an override of a bad limit name');

-- A new owner: the proposed row is written (insert path); the next request takes DO UPDATE.
SELECT expect((SELECT row(allowed, used, denied, window_key)::text
               FROM consume_window('fw', 'u1', 1, 1500)) = '(t,1,0,1)', 'u1 first consume');
SELECT expect((SELECT count(*) FROM quota_windows WHERE owner = 'u1') = 1, 'u1 has one row');
SELECT expect((SELECT row(allowed, used, denied)::text
               FROM consume_window('fw', 'u1', 2, 1600)) = '(t,3,0)', 'u1 second consume');
SELECT expect((SELECT row(allowed, used, denied)::text
               FROM consume_window('fw', 'u1', 1, 1700)) = '(f,3,1)', 'u1 denied at 3 of 3');
SELECT expect((SELECT row(allowed, used, denied, window_key)::text
               FROM consume_window('fw', 'u1', 1, 2100)) = '(t,1,1,2)', 'u1 next window');
SELECT expect((SELECT row(last_allowed, last_reason, last_remaining, maximum, period_ms,
                          previous_used, seen_ms, cost)::text
               FROM quota_windows WHERE owner = 'u1') = '(t,ok,2,3,1000,3,2100,1)',
              'u1''s row after four requests');
SELECT expect((SELECT row(allowed, used, denied)::text
               FROM consume_window('fw', 'u2', 4, 1500)) = '(f,0,1)',
              'a new owner denied on its first request gets its row');

-- Unknown limit: no limit of that name, or one stored in another table. Nothing is written.
SELECT expect_error($$SELECT consume_window('nope', 'u1', 1, 1000)$$, 'unknown limit',
                    'a consume of a limit that does not exist');
SELECT expect_error($$SELECT consume_window('log', 'u1', 1, 1000)$$, 'unknown limit',
                    'a window consume of a sliding_log limit');
SELECT expect_error($$SELECT consume_log('fw', 'u1', 1, 1000)$$, 'unknown limit',
                    'a sliding_log consume of a fixed_window limit');
SELECT expect_error($$SELECT consume_bucket('fw', 'u1', 1, 1000)$$, 'unknown limit',
                    'a token_bucket consume of a fixed_window limit');
SELECT expect_error($$SELECT refund_log('nope', 'u1', 1, 1000)$$, 'unknown limit',
                    'a refund of a limit that does not exist');
SELECT expect((SELECT count(*) FROM quota_windows) = 2 AND
              (SELECT count(*) FROM quota_log_owners) = 0 AND
              (SELECT count(*) FROM quota_buckets) = 0, 'unknown limits wrote nothing');
-- "unknown limit" is reported before any other check the same row breaks (the checks are
-- tested in the order of their names), on the insert and on the update path.
SELECT expect_error($$INSERT INTO quota_windows (limit_name, owner, used, denied)
                      VALUES ('nope', 'u3', -1, -1)$$,
                    'unknown limit', 'unknown limit before a negative used');
SELECT expect_error($$INSERT INTO quota_buckets (limit_name, owner, period_ms, level, burst)
                      VALUES ('nope', 'u3', 0, -4611686018427387905, 0)$$,
                    'unknown limit', 'unknown limit before a bad bucket');
SELECT expect_error($$INSERT INTO quota_log_owners (limit_name, owner, total, recorded, refunded)
                      VALUES ('nope', 'u3', -1, -1, -1)$$,
                    'unknown limit', 'unknown limit before a bad log owner');
SELECT expect_error($$INSERT INTO quota_windows (limit_name, owner, maximum, used)
                      VALUES ('fw', 'u1', 3, 0)
                      ON CONFLICT (limit_name, owner) DO UPDATE SET maximum = NULL, used = -1$$,
                    'unknown limit', 'unknown limit on the update path');
SELECT expect_error($$INSERT INTO quota_windows (limit_name, owner, maximum, used)
                      VALUES ('fw', 'u3', 3, -1)$$,
                    'valid used', 'a negative used of a known limit');

-- The token bucket and the sliding log take a new owner the same way.
SELECT expect((SELECT row(allowed, level)::text FROM consume_bucket('tb', 'u1', 1, 1000)) =
              '(t,1000)', 'a new bucket starts full and takes one token');
SELECT expect((SELECT row(allowed, level)::text FROM consume_bucket('tb', 'u1', 2, 1000)) =
              '(f,1000)', 'the bucket denies two tokens it does not hold');
SELECT expect((SELECT row(allowed, level)::text FROM consume_bucket('tb', 'u1', 2, 2000)) =
              '(t,0)', 'a second later the bucket is full again');

-- The sliding log's record trigger: an event per millisecond, merged, and pruned per
-- interval (period 1000, maximum 10: intervals of 250 ms), as in SQLite's migration 0005.
SELECT expect((SELECT row(allowed, total, recorded)::text FROM consume_log('log', 'u1', 1, 100))
              = '(t,1,1)', 'the first record of a new owner');
SELECT expect(log_of('log', 'u1') = '100:1:1', 'a new owner''s first event is in the log');
SELECT consume_log('log', 'u1', 1, 900) \g /dev/null
SELECT consume_log('log', 'u1', 2, 900) \g /dev/null
SELECT expect(log_of('log', 'u1') = '100:1:1 900:3:4', 'two records in one ms are merged');
SELECT consume_log('log', 'u1', 1, 1600) \g /dev/null
SELECT expect(log_of('log', 'u1') = '900:3:4 1600:1:5',
              'the record at 1600 (interval 6, after 3) deletes 100 (<= 600)');
SELECT consume_log('log', 'u1', 1, 2050) \g /dev/null
SELECT expect(log_of('log', 'u1') = '1600:1:5 2050:1:6',
              'the record at 2050 (interval 8) deletes 900 (<= 1050)');
SELECT consume_log('log', 'u1', 1, 2550) \g /dev/null
SELECT consume_log('log', 'u1', 1, 2700) \g /dev/null
SELECT expect(log_of('log', 'u1') = '1600:1:5 2050:1:6 2550:1:7 2700:1:8',
              'records at 2550 and 2700 (interval 10) keep 1600, expired at 2600');
SELECT consume_log('log', 'u1', 1, 2750) \g /dev/null
SELECT expect(log_of('log', 'u1') = '2050:1:6 2550:1:7 2700:1:8 2750:1:9',
              'the record at 2750 (interval 11) deletes 1600');
SELECT expect((SELECT row(allowed, total, recorded)::text FROM consume_log('log', 'u1', 8, 2800))
              = '(f,9,0)', 'a denied request records nothing');
SELECT expect(log_of('log', 'u1') = '2050:1:6 2550:1:7 2700:1:8 2750:1:9',
              'a denied request leaves the log alone');
SELECT consume_log('log', 'u1', 2, 9000) \g /dev/null
SELECT expect(log_of('log', 'u1') = '9000:2:2',
              'a record that restarts the running total deletes every older event');

-- The refund trigger, with the example of SQLite's migration 0003.
INSERT INTO quota_limits VALUES ('log2', 'sliding_log', 100, 10000);
SELECT consume_log('log2', 'u1', 2, 100) \g /dev/null
SELECT consume_log('log2', 'u1', 3, 200) \g /dev/null
SELECT expect(log_of('log2', 'u1') = '100:2:2 200:3:5', 'two events before the refund');
SELECT expect((SELECT row(total, refunded)::text FROM refund_log('log2', 'u1', 4, 300)) =
              '(1,4)', 'the refund of 4 answers');
SELECT expect(log_of('log2', 'u1') = '100:1:1', 'the refund trims the newest events first');
SELECT consume_log('log2', 'u1', 1, 400) \g /dev/null
SELECT expect(log_of('log2', 'u1') = '100:1:1 400:1:2',
              'a consume after a refund does not run the refund trigger again');

-- reset: deletes the owner's state in every table, then its request row; RETURNING answers.
SELECT consume_window('fw', 'u5', 1, 1000), consume_log('log', 'u5', 1, 1000),
       consume_bucket('tb', 'u5', 1, 1000) \g /dev/null
SELECT consume_log('log', 'u6', 1, 1000) \g /dev/null
SELECT expect(state_rows('log', 'u5') = 2, 'u5 has a log owner row and an event');
SELECT expect((SELECT row(r.*)::text FROM reset('log', 'u5', 1234) AS r) =
              '(log,u5,1234,10)', 'reset returns its row');
SELECT expect(state_rows('log', 'u5') = 0, 'reset deleted the owner''s log and row');
SELECT expect(state_rows('log', 'u6') = 2, 'reset kept another owner''s state');
SELECT expect(state_rows('fw', 'u5') = 1 AND state_rows('tb', 'u5') = 1,
              'reset kept the owner''s state of other limits');
SELECT expect((SELECT count(*) FROM quota_resets) = 0, 'the request row is gone');
SELECT expect((SELECT row(r.*)::text FROM reset('tb', 'u5', 1234) AS r) = '(tb,u5,1234,2)',
              'reset of a bucket returns its burst');
SELECT expect(state_rows('tb', 'u5') = 0, 'reset deleted the bucket');
SELECT expect((SELECT row(r.*)::text FROM reset('fw', 'nobody', 1234) AS r) =
              '(fw,nobody,1234,3)', 'reset of an owner without state');
SELECT expect_error($$SELECT reset('nope', 'u5', 1234)$$, 'unknown limit',
                    'reset of a limit that does not exist');
SELECT expect(state_rows('fw', 'u5') = 1 AND (SELECT count(*) FROM quota_resets) = 0,
              'a failed reset changed nothing');
WITH r AS (INSERT INTO quota_resets VALUES ('fw', 'u5', 7, 3), ('fw', 'u5', 7, 3),
                                           ('fw', 'u6', 8, 3) RETURNING *)
SELECT expect((SELECT string_agg(owner || now_ms, ' ') FROM r) = 'u57 u57 u68',
              'three resets in one statement, two of them the same, return three rows');
SELECT expect((SELECT count(*) FROM quota_resets) = 0, 'both request rows are gone');

-- Changing the algorithm discards the limit's state; changing its numbers keeps it.
SELECT consume_window('sw', 'u1', 1, 1000), consume_window('sw', 'u2', 1, 1000) \g /dev/null
UPDATE quota_limits SET maximum = 6, period_ms = 2000 WHERE name = 'sw';
SELECT expect((SELECT count(*) FROM quota_windows WHERE limit_name = 'sw') = 2,
              'new numbers keep the state');
UPDATE quota_limits SET algorithm = algorithm WHERE name = 'sw';
SELECT expect((SELECT count(*) FROM quota_windows WHERE limit_name = 'sw') = 2,
              'the same algorithm written again keeps the state');
UPDATE quota_limits SET algorithm = 'fixed_window' WHERE name = 'sw';
SELECT expect((SELECT count(*) FROM quota_windows WHERE limit_name = 'sw') = 0,
              'another algorithm discards the state');
SELECT expect(state_rows('fw', 'u1') = 1, 'another limit''s state stays');
SELECT consume_log('log2', 'u7', 1, 1000) \g /dev/null
UPDATE quota_limits SET algorithm = 'fixed_window' WHERE name = 'log2';
SELECT expect((SELECT count(*) FROM quota_log_owners WHERE limit_name = 'log2') = 0 AND
              (SELECT count(*) FROM quota_log WHERE limit_name = 'log2') = 0,
              'a sliding_log limit made fixed_window loses its log');

-- Removing a limit removes its state and its overrides, not the '*' ones.
INSERT INTO quota_overrides VALUES ('fw', 'u1', 'maximum', 7, NULL),
                                   ('log', 'u1', 'exempt', NULL, NULL),
                                   ('*', 'u1', 'deny', NULL, NULL);
DELETE FROM quota_limits WHERE name = 'fw';
SELECT expect((SELECT count(*) FROM quota_windows WHERE limit_name = 'fw') = 0,
              'removing a limit removes its state');
SELECT expect((SELECT string_agg(limit_name, ' ' ORDER BY limit_name) FROM quota_overrides) =
              '* log', 'removing a limit removes its overrides only');
SELECT expect(state_rows('log', 'u1') = 2, 'another limit''s state stays');
DELETE FROM quota_limits WHERE name = 'log';
SELECT expect((SELECT count(*) FROM quota_log_owners WHERE limit_name = 'log') = 0 AND
              (SELECT count(*) FROM quota_log WHERE limit_name = 'log') = 0,
              'removing a sliding_log limit removes its log');

-- quota_usage at the current time: an owner that consumed just now is shown (a window of
-- 366 days, so that the view reads the same window as the consume).
DELETE FROM quota_limits;
DELETE FROM quota_overrides;
INSERT INTO quota_limits VALUES ('now', 'fixed_window', 10, 31622400000);
SELECT consume_window('now', 'u1', 3,
                      CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS bigint))
  \g /dev/null
SELECT expect((SELECT row(limit_name, owner, used, remaining, denied)::text FROM quota_usage)
              = '(now,u1,3,7,0)', 'quota_usage shows the consume of now');
SELECT expect((SELECT reset_at_ms % 31622400000 = 0
                      AND reset_at = to_char(to_timestamp(reset_at_ms / 1000.0)
                                             AT TIME ZONE 'UTC',
                                             'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
               FROM quota_usage), 'reset_at is the end of the window, in UTC');
DELETE FROM quota_limits;

\echo 'schema_check.sql: every check passed'
