"""Fixtures every test package shares: a movable clock, switchable identity, API clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from collab import clock as clock_module
from collab.identity import MockUserProvider, get_user_provider


class MovableClock:
    """A clock that stands still until a test moves it."""

    def __init__(self, start: datetime) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@pytest.fixture
def clock() -> Iterator[MovableClock]:
    movable = MovableClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    clock_module.set_source(movable.now)
    yield movable
    clock_module.reset_source()


@pytest.fixture
def acting_as() -> Iterator[Callable[[str | None], None]]:
    """Switches the mock provider's user between requests, as the spec's test mock does."""
    provider = get_user_provider()
    assert isinstance(provider, MockUserProvider)
    original = provider.current_user_id()
    yield provider.switch
    provider.switch(original)


@pytest.fixture
def api_client_for() -> Callable[[str], APIClient]:
    """An API client that names its user with the mock-mode `X-User-Id` header."""

    def build(user_id: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_X_USER_ID=user_id)
        return client

    return build


@pytest.fixture
def alice_api(api_client_for: Callable[[str], APIClient]) -> APIClient:
    return api_client_for("alice")


@pytest.fixture
def bob_api(api_client_for: Callable[[str], APIClient]) -> APIClient:
    return api_client_for("bob")
