"""Investigations: items of the `rca` app with members, a status and a conversation (docs/ARCHITECTURE.md §6)."""
