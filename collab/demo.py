"""Demo identities: a Django account per mock user (password "demo") and an admin."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser

from collab.identity import MockDirectory

DEMO_PASSWORD = "demo"
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "admin"


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: an existing account keeps its password. The mock directory's staff
    (WORKSPACE_MOCK_STAFF) get staff rights on their account too, so they can sign in to /admin/."""
    accounts = get_user_model().objects
    for person in MockDirectory().all():
        first, _, last = person.name.partition(" ")
        account, created = accounts.get_or_create(
            username=person.id, defaults={"first_name": first, "last_name": last, "email": person.email}
        )
        if created:
            account.set_password(DEMO_PASSWORD)
            account.save(update_fields=["password"])
            say(f"created account {person.id} (password {DEMO_PASSWORD!r})")
        if person.id in settings.WORKSPACE_MOCK_STAFF:
            _grant_staff(account, say=say)
    if not accounts.filter(username=ADMIN_USERNAME).exists():
        accounts.create_superuser(ADMIN_USERNAME, "admin@example.com", ADMIN_PASSWORD)
        say(f"created superuser {ADMIN_USERNAME} (password {ADMIN_PASSWORD!r}) for /admin/")


def _grant_staff(account: AbstractUser, *, say: Callable[[str], None]) -> None:
    # Django admin shows a staff account only what its permissions allow; the demo's operations
    # lead looks after everything, as the mock identity's staff flag means everywhere else.
    if account.is_staff and account.is_superuser:
        return
    account.is_staff = account.is_superuser = True
    account.save(update_fields=["is_staff", "is_superuser"])
    say(f"{account.username} is staff: /admin/ with password {DEMO_PASSWORD!r}")
