"""Investigations: items of the `rca` app with members, a status and a conversation (DESIGN.md §6)."""
