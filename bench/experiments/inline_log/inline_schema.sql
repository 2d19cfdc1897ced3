-- The prototype's state table (SQLite): quota_log_owners with the owner's live events kept in
-- its row instead of in quota_log.
--
--   CREATE TABLE quota_log_inline(limit_name, owner, events, ...);
--   CREATE TABLE quota_log_inline_new_owners(limit_name, owner);
--
-- quota_log_inline.events: a JSON array of [at_ms, cost] pairs (inline_compact_consume.sql: a
--   bare at_ms for an event of cost 1), oldest first, rewritten at
--   every write with only the events still live at the time of the write (at_ms > t -
--   period_ms), then the event this write records (if any) appended. Two events of the same
--   millisecond are not merged: the answers are the same either way. Every other column means
--   what it means in quota_log_owners (migrations/0001_initial.sql); total, newest_at_ms,
--   recorded and refunded are gone (the array holds what they stood for).
-- quota_log_inline.total, base, newest_at_ms: used by inline_fixed_consume.sql only, whose events
--   are fixed-width text records (see that file); NULL for the JSON variants.
-- quota_log_inline_new_owners: the request queue that creates a new owner's empty row, as
--   quota_new_owners does for the engine's tables (migrations/0002_new_owner_queue.sql), so that
--   the BEFORE INSERT trigger that runs on every request has the same one-statement body.
CREATE TABLE quota_log_inline (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  events              TEXT,
  total               INTEGER,
  base                INTEGER,
  newest_at_ms        INTEGER,
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  blocked_until_ms    INTEGER,
  UNIQUE (owner, limit_name)
) STRICT;

CREATE TABLE quota_log_inline_new_owners (
  limit_name TEXT NOT NULL,
  owner      TEXT NOT NULL
) STRICT;

CREATE TRIGGER quota_log_inline_new_owner BEFORE INSERT ON quota_log_inline
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_log_inline
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_log_inline_new_owners VALUES (NEW.limit_name, NEW.owner);
END;

CREATE TRIGGER quota_log_inline_new_owners_create AFTER INSERT ON quota_log_inline_new_owners
BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm = 'sliding_log');
  INSERT INTO quota_log_inline (limit_name, owner, maximum, period_ms, events, denied)
  SELECT name, NEW.owner, maximum, period_ms, NULL, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_log_inline_new_owners WHERE rowid = NEW.rowid;
END;
