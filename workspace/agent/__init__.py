"""The agent behind chat send: a protocol, its tools, and a deterministic built-in that needs no model."""
