-- The prototype's state table on PostgreSQL: inline_schema.sql's quota_log_inline, in the types
-- of migrations/postgresql/0006_initial.sql's quota_log_owners, events as jsonb (an array of
-- [at_ms, cost] pairs, oldest first, the live ones at the last write and the one it recorded).
-- No trigger: on PostgreSQL the statement's proposed row is itself the decision over an owner
-- without state (src/sql/dialect.h), and nothing else is written.
CREATE TABLE quota_log_inline (
  limit_name          text    COLLATE "C" NOT NULL,
  owner               text    COLLATE "C" NOT NULL,
  maximum             bigint  CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           bigint  CONSTRAINT "valid period_ms" CHECK (period_ms >= 1),
  events              jsonb,
  denied              bigint  CONSTRAINT "valid denied" CHECK (denied >= 0),
  seen_ms             bigint,
  cost                bigint,
  last_allowed        boolean,
  last_reason         text    COLLATE "C",
  last_remaining      bigint,
  last_retry_after_ms bigint,
  last_reset_at_ms    bigint,
  shadow_denied       bigint  DEFAULT 0
                      CONSTRAINT "valid shadow_denied" CHECK (shadow_denied >= 0),
  blocked_until_ms    bigint,
  UNIQUE (owner, limit_name)
);
