"""Demo items: a couple of notebooks for alice, each with a file to look at, and, where a model is
connected, an item of the model assistant (workspace/apps/assistant.toml) to chat with."""

from __future__ import annotations

from collections.abc import Callable

from collab.actor import Actor
from workspace.items import services
from workspace.items.access import app_or_404
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item

DEMO_ITEMS = [
    ("Scratch notebook", "README.md", "# Scratch\n\nRun `ls` in the terminal below.\n"),
    ("Data exploration", "explore.py", "import statistics\nprint(statistics.mean([3, 5, 8]))\n"),
]
MODEL_DEMO_APP = "assistant"
MODEL_DEMO_ITEM = (
    "Try the model agent",
    "README.md",
    "# Try the model agent\n\nAsk in the chat below, for example:\n\n"
    "- Run the command `uname -a` and tell me what it printed.\n"
    "- What happens when my sandboxes reach their memory limit?\n",
)


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: an item with the same title for alice is left as it is."""
    app = app_or_404("notebook")
    for title, path, text in DEMO_ITEMS:
        _item(app, title, path, text, say=say)
    if (assistant := get_config().app(MODEL_DEMO_APP)) is not None:
        _item(assistant, *MODEL_DEMO_ITEM, say=say)


def _item(app: AppDescriptor, title: str, path: str, text: str, *, say: Callable[[str], None]) -> None:
    if Item.objects.filter(app_slug=app.slug, created_by="alice", title=title).exists():
        return
    item = services.item_create(app=app, title=title, actor=Actor("alice"))
    services.file_write(item=item, path=path, chunks=[text.encode()])
    say(f"created {app.slug} item {item.pk} {title!r} for alice")
