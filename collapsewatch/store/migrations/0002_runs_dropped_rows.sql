-- 0002: runs.dropped_rows — rows the writer dropped because they could not be written in time (flushes failing
-- while more than MAX_PENDING_ROWS rows of a table were pending). The writer counted them in memory and wrote them
-- nowhere (issue 12 §3), so the loss was silent. NULL in run rows written before this migration.

ALTER TABLE runs ADD COLUMN dropped_rows BIGINT;
