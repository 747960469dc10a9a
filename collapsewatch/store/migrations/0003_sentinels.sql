-- 0003: sentinels — one row per (run, rank, step, sentinel): a fixed known-correct or known-incorrect response scored
-- under the current policy every k steps (collapsewatch/sentinels.py, issue 24). The step means are logged scalars
-- (sentinel_logp_correct_mean …); this table keeps each sentinel's own curve, which the means average away.

CREATE TABLE sentinels (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    step BIGINT NOT NULL,
    sentinel VARCHAR NOT NULL,         -- c:<task id> known-correct, i:<task id> known-incorrect (built-in trainer)
    correct BOOLEAN NOT NULL,
    n_tokens INTEGER NOT NULL,         -- scored (model-written) response tokens
    logp_sum DOUBLE,                   -- Σ log π_θ over them, softmax(logits / τ), no grad
    logp_mean DOUBLE                   -- logp_sum / n_tokens
);
