"""`manage.py load_demo` creates logins with known passwords, so it refuses where people sign in for real."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def test_the_demo_refuses_to_load_where_identity_is_real_accounts(settings) -> None:
    # Given a deployment whose people sign in with Django accounts
    settings.WORKSPACE_CURRENT_USER_PROVIDER = "collab.identity.RequestUserProvider"
    # When someone loads the demo into it
    with pytest.raises(CommandError, match="--with-real-accounts"):
        call_command("load_demo")
    # Then no login with a known password was created
    assert not get_user_model().objects.filter(username__in=["admin", "alice"]).exists()


def test_the_demo_loads_with_real_accounts_when_asked_to(settings) -> None:
    # Given a deployment whose people sign in with Django accounts
    settings.WORKSPACE_CURRENT_USER_PROVIDER = "collab.identity.RequestUserProvider"
    # When the demo is loaded with the explicit flag
    call_command("load_demo", "--with-real-accounts")
    # Then its accounts exist
    assert get_user_model().objects.filter(username="admin", is_superuser=True).exists()
