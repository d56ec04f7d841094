"""Personal API tokens: created, listed and revoked by their creator; stored hashed (issue 12.6)."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from collab import clock
from collab.actor import Actor, actor_now
from collab.converters import is_row_id
from collab.errors import Conflict, Forbidden, Invalid, NotFound
from collab.identity import mock_identity_enabled
from collab.models import ApiToken

TOKEN_PREFIX = "wst_"
MAX_TOKENS_PER_USER = 50
# last_used_at is written at most this often, so a busy script does not write on every request.
LAST_USED_GRANULARITY = timedelta(minutes=1)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    """The only moment the token itself exists outside its creator's hands."""

    row: ApiToken
    token: str


@transaction.atomic
def token_create(*, actor: Actor, name: str, via_token: bool = False) -> IssuedToken:
    """A new token of `actor`'s, which acts as them. `via_token`: the request came with a token,
    which may not make another: a leaked token would otherwise mint one that outlives its own
    revocation."""
    if via_token:
        raise Forbidden(
            error="token_cannot_create_tokens",
            detail="A token cannot create tokens: sign in (the API tokens page, or your password) to make one.",
        )
    name = name.strip()
    if not name or len(name) > 100:
        raise Invalid(error="invalid_name", detail="A token needs a name of 1 to 100 characters.")
    live = ApiToken.objects.select_for_update().filter(created_by=actor.user_id, revoked_at__isnull=True)
    if live.count() >= MAX_TOKENS_PER_USER:
        raise Conflict(
            error="too_many_tokens",
            detail=f"You have {MAX_TOKENS_PER_USER} live tokens; revoke one you no longer use first.",
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, prefix=token[: len(TOKEN_PREFIX) + 6], key_hash=_hash(token))
    row.stamp_created(actor.user_id)
    row.save()
    return IssuedToken(row=row, token=token)


@transaction.atomic
def token_revoke(*, token_id: int, actor: Actor) -> ApiToken:
    """Its creator revokes one of theirs; someone else's (staff's too: they revoke in admin), or no
    such token, is 404."""
    row = (
        ApiToken.objects.select_for_update().filter(pk=token_id, created_by=actor.user_id).first()
        if is_row_id(token_id)
        else None
    )
    if row is None:
        raise NotFound(error="not_found", detail="No such token of yours.")
    if row.revoked_at is None:
        row.revoked_at = clock.now()
        row.stamp_updated(actor.user_id)
        row.save(update_fields=["revoked_at", "updated_by", "updated_at"])
    forget_token_holders(token_ids=[row.pk])
    return row


@transaction.atomic
def tokens_revoke_as_staff(*, token_ids: list[int], actor: Actor) -> int:
    """Admin: staff revoke anyone's tokens; returns how many were live."""
    forget_token_holders(token_ids=token_ids)
    return ApiToken.objects.filter(pk__in=token_ids, revoked_at__isnull=True).update(
        revoked_at=clock.now(), updated_by=actor.user_id, updated_at=clock.now()
    )


def tokens_of(*, actor: Actor) -> list[ApiToken]:
    """The tokens `actor` created, newest first."""
    return list(ApiToken.objects.filter(created_by=actor.user_id).order_by("-id")[:200])


@dataclass
class _Remembered:
    holder: Actor
    token_id: int
    last_used_at: datetime | None
    until: float  # time.monotonic()


# Who each recently presented token acts for, by the token's hash, in this process only
# (WORKSPACE_IDENTITY_CACHE_SECONDS). Revoking and user changes empty it (forget_token_holders).
_holders: dict[str, _Remembered] = {}
_holders_lock = threading.Lock()
# Only live tokens are remembered, and only for seconds; past this many, the expired ones go.
_MAX_REMEMBERED = 10_000


def _forget_expired() -> None:
    now = time.monotonic()
    for key in [key for key, entry in _holders.items() if entry.until <= now]:
        del _holders[key]


def forget_token_holders(*, token_ids: Iterable[int] | None = None) -> None:
    """Drops what this process remembers of these tokens (None: of every token), now and again when
    the transaction commits, so a lookup made in between cannot bring back the old answer."""

    def forget() -> None:
        with _holders_lock:
            if token_ids is None:
                _holders.clear()
                return
            gone = set(token_ids)
            for key in [key for key, entry in _holders.items() if entry.token_id in gone]:
                del _holders[key]

    forget()
    transaction.on_commit(forget)


def forget_holders_of_changed_user(**_signal: object) -> None:
    """A user row was saved or deleted (its standing, its name): forget every remembered holder.
    Rare enough (a login saves last_login) that forgetting all is cheaper than keeping an index."""
    forget_token_holders()


def token_holder(token: str) -> Actor | None:
    """Who a presented token acts for, or None (unknown, revoked, or its creator left): one indexed
    lookup, plus its creator's standing, read now so a demoted or removed creator loses access; both
    remembered WORKSPACE_IDENTITY_CACHE_SECONDS in this process."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    key = _hash(token)
    remembered = _holders.get(key)
    if remembered is not None and remembered.until > time.monotonic():
        holder: Actor | None = remembered.holder
        if mock_identity_enabled():
            # The mock directory and its staff list are settings, read in memory: always fresh.
            holder = actor_now(remembered.holder.user_id)
            if holder is None:
                return None
        _note_use(remembered.token_id, remembered)
        return holder
    row = ApiToken.objects.filter(key_hash=key, revoked_at__isnull=True).first()
    if row is None:
        return None
    holder = actor_now(row.created_by)
    if holder is None:
        return None
    remembered = _Remembered(holder, row.pk, row.last_used_at, 0.0)
    _note_use(row.pk, remembered)
    seconds = settings.WORKSPACE_IDENTITY_CACHE_SECONDS
    if seconds > 0:
        remembered.until = time.monotonic() + seconds
        with _holders_lock:
            if len(_holders) >= _MAX_REMEMBERED:
                _forget_expired()
            _holders[key] = remembered
    return holder


def _note_use(token_id: int, remembered: _Remembered) -> None:
    """last_used_at, written at most once per LAST_USED_GRANULARITY."""
    moment = clock.now()
    if remembered.last_used_at is None or moment - remembered.last_used_at >= LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=moment)
        remembered.last_used_at = moment
