-- 0001: the initial schema. Long, typed tables; one row per (run, rank, step[, sequence[, token]]).
-- Step metric columns of `step_metrics` are generated from collapsewatch.catalogue.STEP_METRICS by the
-- runner (the *_metric_columns placeholders), so the catalogue and the schema cannot drift apart.

CREATE TABLE runs (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    world_size INTEGER NOT NULL,
    status VARCHAR NOT NULL,           -- running | finished | crashed (derived in the view from heartbeat)
    started_at TIMESTAMP WITH TIME ZONE NOT NULL,
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL,  -- heartbeat: rewritten at every flush
    heartbeat_s DOUBLE NOT NULL,       -- promised heartbeat interval; silence for 3x means crashed
    ended_at TIMESTAMP WITH TIME ZONE,
    host VARCHAR,
    pid INTEGER,
    objective VARCHAR,
    config VARCHAR,                    -- the run's configuration as JSON (configuration, not metrics)
    versions VARCHAR,                  -- package versions as JSON
    dropped_batches BIGINT NOT NULL,   -- batches the recorder dropped (queue full, drop policy)
    write_errors BIGINT NOT NULL,      -- flushes that failed (disk full, permissions)
    probe_errors BIGINT NOT NULL       -- observed batches the probe could not process (logged once)
);

CREATE TABLE step_metrics (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step BIGINT NOT NULL,
    ts TIMESTAMP WITH TIME ZONE NOT NULL,
    {step_metric_columns}
);

CREATE TABLE scalars (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step BIGINT NOT NULL,
    key VARCHAR NOT NULL,              -- the key as logged (e.g. TRL's 'clip_ratio/region_mean')
    value DOUBLE
);

CREATE TABLE sequences (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step BIGINT NOT NULL,
    seq_id BIGINT NOT NULL,
    group_id BIGINT,
    {sequence_metric_columns}
);

CREATE TABLE tokens (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step BIGINT NOT NULL,
    seq_id BIGINT NOT NULL,
    pos INTEGER NOT NULL,
    token_id BIGINT,
    turn_id INTEGER,
    mask BOOLEAN NOT NULL,
    advantage DOUBLE,
    {token_metric_columns}
);

CREATE TABLE events (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    detector VARCHAR NOT NULL,         -- isdd | lld | entropy | grad | nonfinite | starvation | length | mismatch
    phase VARCHAR NOT NULL,            -- e.g. drift, early_stagnation, steady_decay, accelerated_collapse
    step_start BIGINT NOT NULL,
    step_end BIGINT NOT NULL,          -- rewritten rows extend an open phase; the view keeps the latest
    severity VARCHAR NOT NULL,         -- info | warning | critical
    metric VARCHAR,                    -- the metric whose rule fired
    value DOUBLE,                      -- its value at step_end
    threshold DOUBLE,                  -- the threshold it crossed
    window_steps INTEGER,              -- the window the rule looked at
    message VARCHAR NOT NULL,          -- one line a person reads
    evidence VARCHAR,                  -- JSON: every signal the rule looked at, with values
    source VARCHAR NOT NULL,           -- online | offline
    written_at TIMESTAMP WITH TIME ZONE NOT NULL  -- the view keeps the latest-written row of an episode
);
