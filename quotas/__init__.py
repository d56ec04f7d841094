"""Sandbox resource quotas: resolution, per-user limits, ledgers and admission gates."""
