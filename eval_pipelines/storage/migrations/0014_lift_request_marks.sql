-- Live lift (issue 28): what marks a logged request as a later one of its conversation (its
-- 1-based turn) or of its trace (a child span), for the check that a conversation or trace key
-- was not logged per request.
ALTER TABLE lift_events ADD COLUMN turn INTEGER;
ALTER TABLE lift_events ADD COLUMN child_span BOOLEAN;
