"""Collaboration layer: identity, notifications, tracking and the API conventions."""
