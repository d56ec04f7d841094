"""Personal API tokens: created, listed and revoked by their owner; stored hashed (issue 12.6)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction

from collab import clock
from collab.converters import is_row_id
from collab.errors import Conflict, Forbidden, Invalid, NotFound
from collab.identity import standing_of
from collab.models import ApiToken

TOKEN_PREFIX = "wst_"
MAX_TOKENS_PER_USER = 50
# last_used_at is written at most this often, so a busy script does not write on every request.
LAST_USED_GRANULARITY = timedelta(minutes=1)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    """The only moment the token itself exists outside its owner's hands."""

    row: ApiToken
    token: str


@transaction.atomic
def token_create(*, user_id: str, name: str, via_token: bool = False) -> IssuedToken:
    """A new token of `user_id`'s. `via_token`: the request came with a token, which may not make
    another: a leaked token would otherwise mint one that outlives its own revocation."""
    if via_token:
        raise Forbidden(
            error="token_cannot_create_tokens",
            detail="A token cannot create tokens: sign in (the API tokens page, or your password) to make one.",
        )
    name = name.strip()
    if not name or len(name) > 100:
        raise Invalid(error="invalid_name", detail="A token needs a name of 1 to 100 characters.")
    live = ApiToken.objects.select_for_update().filter(created_by=user_id, revoked_at__isnull=True)
    if live.count() >= MAX_TOKENS_PER_USER:
        raise Conflict(
            error="too_many_tokens",
            detail=f"You have {MAX_TOKENS_PER_USER} live tokens; revoke one you no longer use first.",
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, prefix=token[: len(TOKEN_PREFIX) + 6], key_hash=_hash(token))
    row.stamp_created(user_id)
    row.save()
    return IssuedToken(row=row, token=token)


@transaction.atomic
def token_revoke(*, token_id: int, user_id: str) -> ApiToken:
    """The owner revokes one of theirs; someone else's, or no such token, is 404."""
    row = (
        ApiToken.objects.select_for_update().filter(pk=token_id, created_by=user_id).first()
        if is_row_id(token_id)
        else None
    )
    if row is None:
        raise NotFound(error="not_found", detail="No such token of yours.")
    if row.revoked_at is None:
        row.revoked_at = clock.now()
        row.stamp_updated(user_id)
        row.save(update_fields=["revoked_at", "updated_by", "updated_at"])
    return row


@transaction.atomic
def tokens_revoke_as_staff(*, token_ids: list[int], user_id: str) -> int:
    """Admin: staff revoke anyone's tokens; returns how many were live."""
    return ApiToken.objects.filter(pk__in=token_ids, revoked_at__isnull=True).update(
        revoked_at=clock.now(), updated_by=user_id, updated_at=clock.now()
    )


def tokens_of(*, user_id: str) -> list[ApiToken]:
    return list(ApiToken.objects.filter(created_by=user_id).order_by("-id")[:200])


@dataclass(frozen=True)
class TokenHolder:
    user_id: str
    is_staff: bool


def token_holder(token: str) -> TokenHolder | None:
    """Who a presented token acts for, or None (unknown, revoked, or its owner left): one indexed
    lookup, plus the owner's standing, read now so a demoted or removed owner loses access."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    row = ApiToken.objects.filter(key_hash=_hash(token), revoked_at__isnull=True).first()
    if row is None:
        return None
    standing = standing_of(row.created_by)
    if not standing.active:
        return None
    moment = clock.now()
    if row.last_used_at is None or moment - row.last_used_at >= LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=moment)
    return TokenHolder(user_id=row.created_by, is_staff=standing.is_staff)
