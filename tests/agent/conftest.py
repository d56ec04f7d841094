"""Agent fixtures: private workspaces and items (from the core's conftest), knowledge-base helpers."""

from tests.investigations.conftest import carol_api, make_investigation  # noqa: F401 - shared fixtures
from tests.knowledge.conftest import handbook, make_collection, upload  # noqa: F401
from tests.workspace.conftest import make_item, workspace_dirs  # noqa: F401
