"""Demo items: a couple of notebooks for alice, each with a file to look at."""

from __future__ import annotations

from collections.abc import Callable

from collab.actor import Actor
from workspace.items import services
from workspace.items.access import app_or_404
from workspace.items.models import Item

DEMO_ITEMS = [
    ("Scratch notebook", "README.md", "# Scratch\n\nRun `ls` in the terminal below.\n"),
    ("Data exploration", "explore.py", "import statistics\nprint(statistics.mean([3, 5, 8]))\n"),
]


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: an item with the same title for alice is left as it is."""
    app = app_or_404("notebook")
    for title, path, text in DEMO_ITEMS:
        if Item.objects.filter(app_slug=app.slug, created_by="alice", title=title).exists():
            continue
        item = services.item_create(app=app, title=title, actor=Actor("alice"))
        services.file_write(item=item, path=path, chunks=[text.encode()])
        say(f"created notebook item {item.pk} {title!r} for alice")
