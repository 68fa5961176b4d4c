"""Live lift: deterministic exposure-arm assignment and the arm-typed exemplar path."""
