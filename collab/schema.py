"""How the OpenAPI schema describes the service's authentication."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class WorkspaceAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "collab.authentication.WorkspaceAuthentication"
    name = ["basicAuth", "cookieAuth", "mockUserHeader"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        return [
            {"type": "http", "scheme": "basic"},
            {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            {
                "type": "apiKey",
                "in": "header",
                "name": "X-User-Id",
                "description": "Mock identity only (demo and tests): names the acting user.",
            },
        ]
