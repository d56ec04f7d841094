"""The base every API view of the service extends."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.request import Request
from rest_framework.views import APIView


class ServiceApiView(APIView):
    """An APIView that refuses a malformed body even where the endpoint ignores its body.

    DRF parses lazily, so `POST /notifications/read-all` with broken JSON would otherwise
    succeed; a client that sent garbage should hear about it (400 `malformed_request`).
    """

    # A view that streams the raw request body itself (file writes) sets this, so nothing parses it first.
    reads_raw_body: ClassVar[bool] = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not self.reads_raw_body and request.method in ("POST", "PUT", "PATCH") and request.stream is not None:
            request.data  # noqa: B018 - parsing raises ParseError for a malformed body
