-- Embeddings and retrieval spaces (issue 10). A case's embedding sets: each one covers every
-- record of one records version, L2-normalised, and is immutable (a content hash names it);
-- the newest set of the case's current records version is the one new evaluations pin.
-- Retrieved evidence now says which space and backend found it, and each evaluation records
-- how every retrieval ran (backend, recall measured against exact search, queries that fell
-- back to the exact search).
CREATE TABLE embedding_sets (
    case_id VARCHAR NOT NULL, records_version VARCHAR NOT NULL, embeddings_version VARCHAR NOT NULL,
    dim INTEGER NOT NULL, n_records BIGINT NOT NULL, method VARCHAR NOT NULL, source VARCHAR,
    created_at TIMESTAMP NOT NULL, PRIMARY KEY (case_id, embeddings_version));

CREATE TABLE record_embeddings (
    case_id VARCHAR NOT NULL, embeddings_version VARCHAR NOT NULL, record_key VARCHAR NOT NULL,
    vector FLOAT[] NOT NULL);

ALTER TABLE candidates ADD COLUMN retrieval VARCHAR DEFAULT 'tfidf:exact';

CREATE TABLE eval_retrievals (
    eval_id VARCHAR NOT NULL, retrieval VARCHAR NOT NULL, purpose VARCHAR NOT NULL,
    payload VARCHAR NOT NULL);
