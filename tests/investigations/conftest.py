"""Investigation fixtures: private workspaces (from the core's conftest) and investigations to work on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.knowledge.conftest import handbook, make_collection, upload  # noqa: F401 - shared fixtures
from tests.workspace.conftest import make_item, workspace_dirs  # noqa: F401
from workspace.investigations import services
from workspace.models import Investigation


@pytest.fixture
def make_investigation(db: None) -> Callable[..., Investigation]:
    def build(
        *, title: str = "Disk alerts on node 4", owner: str = "alice", members: tuple[str, ...] = ()
    ) -> Investigation:
        return services.investigation_create(title=title, user_id=owner, members=list(members))

    return build


@pytest.fixture
def carol_api(api_client_for):
    return api_client_for("carol")
