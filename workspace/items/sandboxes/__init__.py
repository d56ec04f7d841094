"""Sandbox backends (local control groups, an HTTP sandbox host) and the lifecycle around them."""
