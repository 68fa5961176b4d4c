-- Records and trees become immutable versions: replacing a case adds a version and keeps the
-- versions older evaluations pinned, so they stay readable and re-runnable.
ALTER TABLE records ADD COLUMN records_version VARCHAR;
UPDATE records SET records_version = cases.records_version FROM cases
    WHERE cases.case_id = records.case_id;
ALTER TABLE tree_nodes ADD COLUMN tree_version VARCHAR;
UPDATE tree_nodes SET tree_version = cases.tree_version FROM cases
    WHERE cases.case_id = tree_nodes.case_id;

CREATE TABLE records_versions (
    case_id VARCHAR NOT NULL, records_version VARCHAR NOT NULL, n_records BIGINT NOT NULL,
    metadata_columns VARCHAR NOT NULL, source VARCHAR, created_at TIMESTAMP NOT NULL);
INSERT INTO records_versions
    SELECT case_id, records_version, n_records, coalesce(metadata_columns, '[]'), source,
        created_at FROM cases;

CREATE TABLE tree_versions (
    case_id VARCHAR NOT NULL, tree_version VARCHAR NOT NULL, tree_mode VARCHAR NOT NULL,
    prefix_lengths VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);
INSERT INTO tree_versions
    SELECT case_id, tree_version, tree_mode, coalesce(prefix_lengths, '[]'), created_at
        FROM cases;

-- Evaluations have a kind (holdout so far); a report records the run that wrote it.
ALTER TABLE evaluations ADD COLUMN kind VARCHAR DEFAULT 'holdout';
UPDATE evaluations SET kind = 'holdout';
ALTER TABLE eval_reports ADD COLUMN run_id VARCHAR;

-- One row per variant and tree level, for SQL readers and the variant_scores asset's table.
CREATE TABLE variant_level_scores (
    eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, position INTEGER NOT NULL,
    depth INTEGER NOT NULL, level_name VARCHAR NOT NULL, is_target BOOLEAN NOT NULL,
    n INTEGER NOT NULL, right_count INTEGER NOT NULL, accuracy DOUBLE, accuracy_low DOUBLE,
    accuracy_high DOUBLE, declined INTEGER NOT NULL, ceiling_count INTEGER NOT NULL);
