-- Workflows and their content-addressed revisions (001). A revision id is unique across
-- workflows (the hash covers the name), and is the key of its Dagster partition. Saving
-- identical content again makes that revision the newest again (``last_saved_at``).
CREATE TABLE workflow_revisions (
    revision VARCHAR PRIMARY KEY, workflow VARCHAR NOT NULL, kind VARCHAR NOT NULL,
    content VARCHAR NOT NULL, source VARCHAR NOT NULL, saved_by VARCHAR,
    saved_at TIMESTAMP NOT NULL, last_saved_at TIMESTAMP NOT NULL);

-- The revision each committed workflow file held when last read: a file counts as saved
-- again only when its content changed.
CREATE TABLE workflow_files (
    path VARCHAR PRIMARY KEY, workflow VARCHAR NOT NULL, revision VARCHAR NOT NULL,
    seen_at TIMESTAMP NOT NULL);

-- The activation ledger: who made which revision live, when, on which gating runs, and the
-- gate's decision as it read then (a case deleted later changes its runs' scores, never this).
CREATE TABLE workflow_activations (
    workflow VARCHAR NOT NULL, revision VARCHAR NOT NULL, activated_by VARCHAR NOT NULL,
    activated_at TIMESTAMP NOT NULL, gate_runs VARCHAR NOT NULL, gate_decision VARCHAR NOT NULL);

-- Documents are stored whole, so a case is reproducible without the file it came from.
CREATE TABLE documents (
    document_id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, media_type VARCHAR NOT NULL,
    content BLOB NOT NULL, text VARCHAR NOT NULL, added_at TIMESTAMP NOT NULL);

-- Test runs: one workflow revision over one document, delivered nowhere. A reviewed result
-- (approve) carries the corrected values a golden case can be seeded from.
CREATE TABLE test_runs (
    test_run_id VARCHAR PRIMARY KEY, workflow VARCHAR NOT NULL, revision VARCHAR NOT NULL,
    document_id VARCHAR NOT NULL, outputs VARCHAR NOT NULL, error VARCHAR,
    created_at TIMESTAMP NOT NULL, approved_values VARCHAR, approved_node VARCHAR,
    approved_by VARCHAR, approved_at TIMESTAMP);

-- A node's output on a document, keyed by the hash of its configuration and every node
-- before it: an unchanged step is served from here and charges nothing.
CREATE TABLE step_cache (
    document_id VARCHAR NOT NULL, node_id VARCHAR NOT NULL, chain_hash VARCHAR NOT NULL,
    output VARCHAR, error VARCHAR, created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (document_id, node_id, chain_hash));

-- ``cases_created`` numbers the set's cases: an id is never reused, even after a delete.
CREATE TABLE golden_sets (
    set_name VARCHAR PRIMARY KEY, workflow VARCHAR NOT NULL, node_id VARCHAR NOT NULL,
    threshold DOUBLE NOT NULL, gate BOOLEAN NOT NULL, created_at TIMESTAMP NOT NULL,
    cases_created INTEGER NOT NULL DEFAULT 0);

-- Labels are keyed by field id; ``schema_fingerprint`` is the scored node's structure when
-- the case was authored (schema-drift flag).
CREATE TABLE golden_cases (
    set_name VARCHAR NOT NULL, case_id VARCHAR NOT NULL, document_id VARCHAR NOT NULL,
    labels VARCHAR NOT NULL, key_columns VARCHAR NOT NULL, from_test_run VARCHAR,
    schema_fingerprint VARCHAR NOT NULL, authored_revision VARCHAR NOT NULL,
    enabled BOOLEAN NOT NULL, created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (set_name, case_id));

-- One golden run per set and Dagster run. Case results outlive the Dagster run: they are
-- kept here whatever happens to the run's logs.
CREATE TABLE golden_runs (
    golden_run_id VARCHAR PRIMARY KEY, set_name VARCHAR NOT NULL, workflow VARCHAR NOT NULL,
    revision VARCHAR NOT NULL, dagster_run_id VARCHAR, status VARCHAR NOT NULL,
    started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP, executed_steps INTEGER NOT NULL,
    cached_steps INTEGER NOT NULL, cost_units DOUBLE NOT NULL, threshold DOUBLE NOT NULL);

CREATE TABLE golden_results (
    golden_run_id VARCHAR NOT NULL, set_name VARCHAR NOT NULL, case_id VARCHAR NOT NULL,
    revision VARCHAR NOT NULL, ran BOOLEAN NOT NULL, output VARCHAR, error VARCHAR,
    skip_reason VARCHAR, executed_steps INTEGER NOT NULL, cached_steps INTEGER NOT NULL,
    PRIMARY KEY (golden_run_id, case_id));
