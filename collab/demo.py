"""Demo identities: a Django account per mock user (password "demo") and an admin."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import get_user_model

from collab.identity import MockDirectory

DEMO_PASSWORD = "demo"
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "admin"


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: existing accounts are left as they are."""
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
    if not accounts.filter(username=ADMIN_USERNAME).exists():
        accounts.create_superuser(ADMIN_USERNAME, "admin@example.com", ADMIN_PASSWORD)
        say(f"created superuser {ADMIN_USERNAME} (password {ADMIN_PASSWORD!r}) for /admin/")
