"""Domain errors: what services, the file store, the sandbox lifecycle and the gates raise when
they refuse. Plain Python, no HTTP in them, so a task, a command or another service can call
business code and catch what it means; `collab.edge` is the one place that turns them into a
status, a JSON body, a page, an admin message or a task's failure line.

Each carries the `error` code clients branch on, a human `detail`, and the extra fields of its
answer (`limit`, `path`, `used`...). The kind (the class) is what the edge maps to a status.
Lives in `collab`, the lowest of our layers, so every layer that refuses may import it.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A refusal the caller caused (or a state they must wait out); never a bug."""

    def __init__(self, *, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.error = error
        self.detail = detail
        self.extra = extra

    def __repr__(self) -> str:
        return f"{type(self).__name__}(error={self.error!r}, detail={self.detail!r})"


class Invalid(DomainError):
    """What was asked cannot be done as asked (a blank title, a path out of the workspace)."""


class NotAuthenticated(DomainError):
    """Nobody we know is asking."""


class Forbidden(DomainError):
    """The caller is known and the thing exists, but they may not do this to it."""


class NotFound(DomainError):
    """Missing, or not the caller's to see (both read the same)."""


class Unprocessable(DomainError):
    """The request was read, but a value in it breaks a rule of the resource it writes (a generated
    route's contract names these apart from a malformed request: a schedule or steps out of bounds)."""


class Conflict(DomainError):
    """The thing is in a state that refuses this now (a name taken, a sandbox still opening)."""


class Gone(DomainError):
    """It existed and was deleted; restoring it comes first."""


class TooLarge(DomainError):
    """The content is larger than this may hold."""


class UnsupportedType(DomainError):
    """The content is of a kind this cannot take."""


class UpgradeRequired(DomainError):
    """The resource speaks another protocol than the request's (a WebSocket asked for over plain HTTP)."""


class _WorthRetrying(DomainError):
    """`retry_after` (seconds, optional) says when the same request may work. Not a body field:
    the edge sends it as a header (Retry-After)."""

    def __init__(self, *, error: str, detail: str, retry_after: int | None = None, **extra: Any) -> None:
        super().__init__(error=error, detail=detail, **extra)
        self.retry_after = retry_after


class TooManyRequests(_WorthRetrying):
    """The caller already holds as much as they may at once (running commands, password guesses)."""


class Misconfigured(DomainError):
    """The server is set up so that this cannot work; waiting will not help, its administrator can."""


class Unavailable(_WorthRetrying):
    """Something this needs does not answer now (a sandbox host, the database); the same request may
    work in a moment."""


class QuotaExceeded(DomainError):
    """A limit on what the payer may hold binds; only a new action by the person frees it (no
    retry_after, ever). `also` lists the other binding limits as QuotaExceeded errors too."""
