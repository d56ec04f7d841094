"""Items for workflows to name: the workspace fixtures (nobody is staff unless a test says so)."""

from tests.workspace.conftest import make_item, workspace_dirs  # noqa: F401 - shared fixtures
