-- The cache of calls to OpenAI-compatible chat endpoints. One row per answered call, keyed by
-- the sha256 of the canonical request (endpoint, model, messages, parameters, response format,
-- trial): a re-run, a re-execution from failure or a run killed halfway and started again
-- finds what was already paid for. The answer's text and the tokens the endpoint reported are
-- kept; the API key never is (it is not part of the request that is hashed, nor stored).
CREATE TABLE chat_calls (
    key VARCHAR PRIMARY KEY, endpoint VARCHAR NOT NULL, model VARCHAR NOT NULL,
    trial INTEGER NOT NULL, response_text VARCHAR, input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL, created_at TIMESTAMP NOT NULL);
