"""Quota fixtures: the workspace's config and item fixtures, per-user limits written per test, fresh memos."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from quotas.limits import forget_memos
from tests.workspace.conftest import make_item, workspace_dirs, write_config  # noqa: F401 - fixtures

GIB = 1024**3
MIB = 1024**2

# The shipped apps: notebook declares cpu 1 and memory 512M; rca declares nothing. Both take
# their disk limit from `workspace_quota`.


@pytest.fixture(autouse=True)
def fresh_memos() -> Iterator[None]:
    forget_memos()
    yield
    forget_memos()


@pytest.fixture
def per_user(write_config) -> Callable[..., Path]:  # noqa: F811 - the imported fixture
    """Writes a config whose `[resources.per_user]` holds the given values (TOML literals)."""

    def write(
        *, workspace_quota: str = "1G", extra: str = "", apps: dict[str, str] | None = None, **limits: object
    ) -> Path:
        lines = [f"{name} = {_toml(value)}" for name, value in limits.items()]
        head = f'[sandbox]\nworkspace_quota = "{workspace_quota}"\n{extra}'
        return write_config(head + "[resources.per_user]\n" + "\n".join(lines) + "\n", apps)

    return write


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
