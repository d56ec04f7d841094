"""A crudgen app whose models use every kind of field crudgen supports; CI validates its OpenAPI document.

Run: DJANGO_SETTINGS_MODULE=workspace.settings .venv/bin/python -m tests.crudgen.example_app [oas-version]
prints the document of `create_app` (as served at /api/v1/openapi.json) as JSON.
"""

from __future__ import annotations

import enum
import json
import sys
import types
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Address:
    city: str
    zip_code: str | None = None


class Dimensions(TypedDict):
    width: float
    height: float
    unit: NotRequired[Literal["cm", "in"]]


class Label(msgspec.Struct):
    text: str
    weight: Annotated[int, msgspec.Meta(gt=0, le=10)] = 1


@dataclass
class Product:
    """Every supported field kind, optional and required, nested and flat."""

    id: str
    name: str
    price: float
    stock: int
    active: bool
    colour: Colour
    size: Literal["s", "m", "l"]
    tags: list[str]
    attributes: dict[str, int]
    address: Address
    dimensions: Dimensions
    labels: list[Label]
    pair: tuple[int, str]
    raw: bytes
    released: datetime | None = None
    replaced_by: Address | None = None
    note: str | None = None
    created_by: str | None = None
    updated_by: str | None = None
    created_time: datetime | None = None
    updated_time: datetime | None = None
    rating: int | str | None = None
    extra: list[dict[str, Any]] = field(default_factory=list)


def build_system() -> Any:
    from crudgen import CRUDSystem, MetadataConfig

    system = CRUDSystem(metadata_config=MetadataConfig.with_full_tracking(), use_plural=True)
    system.register_model(Product, default_values={"stock": 0, "tags": []}, indexed_fields=("name",))
    system.register_model(Dimensions, resource_name="dimension-sets")
    system.register_model(Label, resource_name="labels")
    return system


def openapi_document(oas_version: str | None = None) -> dict[str, Any]:
    """The document `create_app` serves, fetched through Django's test client."""
    from django.test import Client, override_settings
    from drf_spectacular.settings import patched_settings

    urls = types.ModuleType("crudgen_example_urls")
    urls.urlpatterns = build_system().create_app(title="Example shop", version="2.0.0")  # type: ignore[attr-defined]
    with override_settings(ROOT_URLCONF=urls), patched_settings({"OAS_VERSION": oas_version} if oas_version else {}):
        response = Client().get("/api/v1/openapi.json", HTTP_X_USER_ID="alice")
    if response.status_code != 200:
        raise RuntimeError(f"openapi.json answered {response.status_code}: {response.content[:300]!r}")
    return json.loads(response.content)


if __name__ == "__main__":
    import django

    django.setup()
    json.dump(openapi_document(sys.argv[1] if len(sys.argv) > 1 else None), sys.stdout, indent=1)
