-- quota schema, migration 0005: the sliding log prunes its expired events in batches.
--
--   DROP TRIGGER   quota_log_owners_record;
--   CREATE TRIGGER quota_log_owners_record;  -- appends as before, prunes in batches
--
-- Until now every record deleted the owner's events that had expired by then. An owner with a
-- long log (limit 100,000) keeps its newest and its oldest events on different pages, so each
-- record wrote both: in WAL mode one page more per commit (3 pages instead of 2 at limit 10,
-- where both ends share a page), the most of what a record costs there. Expired events are
-- never read (every reader seeks the first event with at_ms > t - period_ms), so they only need
-- to go eventually, within a bound.
--
-- The trigger now deletes them only when the owner's newest event enters a new prune interval
-- of the time line, intervals of
--   interval = max(min(period_ms / 4, period_ms * 32 / maximum), 1) ms
-- (period_ms and maximum the owner's, as its row holds them: the override's maximum if it has
-- one). An owner at its limit records maximum units per period, so it prunes about every 32
-- events, a batch of events that fits in one page: the oldest page is written about once per
-- 32 records instead of every time, and the space freed lies next to the newest events of
-- the owner before it in key order, where that owner appends. A smaller limit prunes at least
-- every quarter period. A record that restarts the running total (nothing is live: total =
-- recorded) always prunes, and so deletes every event the owner had: the events left always
-- form one running sum, which the refund trigger of 0003 relies on.
--
-- The bound: after a record at t, no event with at_ms <= t - period_ms - interval is left (the
-- first record of the interval that holds t pruned up to its own time minus period_ms), as
-- long as the owner's period and maximum stay the same. So the log holds the events of at most
-- period_ms + interval ms, at most a quarter period more than every event that can count; gc
-- deletes expired events of owners that record no more, as before. An event left beyond its
-- expiry changes no answer, with one exception that already existed for the events between
-- the owner's latest record and its expiry: a limit redefined with a longer period counts the
-- events still in the log.
--
-- Example: period 1000, maximum 10, so intervals of 250 ms. Events at 100, 900 and 1600 (the
-- record at 1600 in interval 6). A record at 2050 (interval 8) deletes 100 and 900 (<= 1050);
-- one at 2550 (interval 10) deletes nothing (nothing <= 1550); one at 2700 (interval 10 again)
-- deletes nothing, though 1600 has expired; one at 2750 (interval 11) deletes 1600.
--
-- The trigger writes quota_log only, so it never fires itself again, recursive triggers or
-- not.

DROP TRIGGER quota_log_owners_record;

-- The log of a sliding_log owner: what the latest request recorded becomes an event at
-- newest_at_ms (merged into the event of the same millisecond); the events that expired by
-- then are deleted when newest_at_ms enters a new prune interval or the running total
-- restarts, so the log holds the events of at most period_ms plus one interval.
CREATE TRIGGER quota_log_owners_record AFTER UPDATE ON quota_log_owners
WHEN NEW.recorded > 0 BEGIN
  INSERT INTO quota_log (limit_name, owner, at_ms, cost, total)
  VALUES (NEW.limit_name, NEW.owner, NEW.newest_at_ms, NEW.recorded, NEW.total)
  ON CONFLICT (limit_name, owner, at_ms) DO UPDATE SET
    cost = cost + excluded.cost, total = excluded.total;
  DELETE FROM quota_log
  WHERE (NEW.total = NEW.recorded
         OR NEW.newest_at_ms / max(min(NEW.period_ms / 4, NEW.period_ms * 32 / NEW.maximum), 1)
            IS NOT OLD.newest_at_ms
                   / max(min(NEW.period_ms / 4, NEW.period_ms * 32 / NEW.maximum), 1))
    AND limit_name = NEW.limit_name AND owner = NEW.owner
    AND at_ms <= NEW.newest_at_ms - NEW.period_ms;
END;
