"""Workflow execution on items: manual runs, the scheduler, and the runs they record."""
