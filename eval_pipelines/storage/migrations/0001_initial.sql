-- The schema of release 0.1.0 (before schema versioning). A warehouse written by that
-- release already holds these tables and is recorded as version 1 without running this file.

CREATE TABLE cases (
    case_id VARCHAR NOT NULL, tree_mode VARCHAR NOT NULL, prefix_lengths VARCHAR,
    target_depth VARCHAR NOT NULL, records_version VARCHAR NOT NULL,
    tree_version VARCHAR NOT NULL, n_records BIGINT NOT NULL, metadata_columns VARCHAR,
    source VARCHAR, created_at TIMESTAMP NOT NULL, eval_sequence BIGINT NOT NULL DEFAULT 0);

CREATE TABLE records (
    case_id VARCHAR NOT NULL, record_key VARCHAR NOT NULL, text VARCHAR NOT NULL,
    label VARCHAR NOT NULL, label_node VARCHAR NOT NULL, metadata VARCHAR NOT NULL);

CREATE TABLE tree_nodes (
    case_id VARCHAR NOT NULL, code VARCHAR NOT NULL, parent VARCHAR, depth INTEGER NOT NULL,
    title VARCHAR, kind VARCHAR);

CREATE TABLE memo_entries (
    case_id VARCHAR NOT NULL, entry_id VARCHAR NOT NULL, status VARCHAR NOT NULL,
    instruction VARCHAR NOT NULL, entry_json VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
    approved_by VARCHAR, approved_at TIMESTAMP);

CREATE TABLE evaluations (
    eval_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, sequence BIGINT NOT NULL,
    seed BIGINT NOT NULL, spec_json VARCHAR NOT NULL, run_id VARCHAR,
    created_at TIMESTAMP NOT NULL);

CREATE TABLE holdout_samples (
    eval_id VARCHAR NOT NULL, position INTEGER NOT NULL, record_key VARCHAR NOT NULL,
    sample_hash VARCHAR NOT NULL, requested_size INTEGER NOT NULL);

CREATE TABLE leave_out (
    eval_id VARCHAR NOT NULL, sample_key VARCHAR NOT NULL, excluded_key VARCHAR NOT NULL,
    reason VARCHAR NOT NULL);

CREATE TABLE candidates (
    eval_id VARCHAR NOT NULL, sample_key VARCHAR NOT NULL, rank INTEGER NOT NULL,
    evidence_key VARCHAR NOT NULL, similarity FLOAT NOT NULL);

CREATE TABLE predictions (
    eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, record_key VARCHAR NOT NULL,
    code VARCHAR, confidence DOUBLE NOT NULL, route VARCHAR NOT NULL,
    candidates VARCHAR NOT NULL, requested_candidates INTEGER NOT NULL,
    effective_candidates INTEGER NOT NULL, memo_applied VARCHAR NOT NULL, error VARCHAR,
    tokens BIGINT NOT NULL);

CREATE TABLE variant_runs (
    eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, position INTEGER NOT NULL,
    memo_version VARCHAR NOT NULL, usage_json VARCHAR NOT NULL);

CREATE TABLE variant_scores (
    eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, position INTEGER NOT NULL,
    score_json VARCHAR NOT NULL, failed_rows INTEGER NOT NULL,
    leave_out_json VARCHAR NOT NULL);

CREATE TABLE eval_reports (
    eval_id VARCHAR NOT NULL, report_json VARCHAR NOT NULL, markdown VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL);
