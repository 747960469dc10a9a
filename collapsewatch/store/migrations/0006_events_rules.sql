-- 0006: events.rules — the digest of the detector rules (settings + rule code) that found each episode
-- (collapsewatch.detectors.rules). Stored episodes made by other rules than a reader's are recognised and the
-- reader shows its own rules' episodes, computed on read (issue 25 §1). NULL in rows written before this
-- migration: rules unknown, treated as other rules.

ALTER TABLE events ADD COLUMN rules VARCHAR;
