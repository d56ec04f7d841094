"""Server-rendered pages of the workspace core; they call the same services as the API."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.contrib import messages
from django.contrib.messages.storage.base import Message
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from collab.actor import actor_of
from collab.bodies import takes_uploads
from collab.edge import refusal_page
from collab.errors import DomainError, Invalid
from collab.sizes import format_bytes
from collab.web import attempt, identity_required
from quotas.sizes import SizeError, format_size, parse_size
from quotas.values import host_name
from workspace.items import selectors, services
from workspace.items.access import ItemRight, app_or_404, item_for, item_right
from workspace.items.config import AppDescriptor
from workspace.items.links import item_page as item_page_of
from workspace.items.links import own_list_page
from workspace.items.models import Item
from workspace.items.web import with_item
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes.filestore import open_read, read_file

EDITABLE_BYTES = 512 * 1024
# Rows of the page's file list, each with its forms; the terminal re-reads the page after every
# command, so a workspace of many thousand files must not make it megabytes long.
ITEM_PAGE_FILES = 500
# The item page's forms, so a refusal can be shown by the one that was refused.
ItemForm = Literal["details", "sandbox", "rename", "delete", "shrink", "folder", "upload", "open"]


# The tag of a message about the Files card (an upload, a new folder...): the item page shows it in
# that card, where the action's redirect (`_files_url`) scrolls to, not at the top of the page.
FILES_CARD = "files-card"


# The most of a refused field the page shows back: no title or owner is longer.
ECHOED_CHARS = 1000


def _item_url(item: Item, folder: str = "") -> str:
    """The item page, opened at `folder` (its file list) when one is given. An app with a page of
    its own (investigations) keeps `folder` even when empty: the bare URL opens that page instead."""
    url = reverse("ws-item", args=[item.app_slug, item.pk])
    return f"{url}?{urlencode({'folder': folder})}" if folder or own_list_page(item.app_slug) else url


def _files_url(item: Item, folder: str = "") -> str:
    """The item page scrolled to its Files card, opened at `folder`: where a file action lands."""
    return f"{_item_url(item, folder)}#files"


def _files_said(request: HttpRequest, text: str) -> None:
    """Tells what a file action did, in the Files card (FILES_CARD)."""
    messages.success(request, text, extra_tags=FILES_CARD)


def _at(request: HttpRequest) -> str:
    """The folder the page showed when a form on it was sent (each form carries it as `at`)."""
    return request.POST.get("at", "").strip().strip("/")


# The fields of the item page's forms; one a client did not send was typed empty, as the views read it.
_UNSENT = dict.fromkeys(("title", "owner", "source", "target", "path", "size", "file_path", "open", "folder"), "")


def refused_on_the_item_page(form: ItemForm) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A refused action comes back as the item page with the refusal's status: the refusal sits
    by `form` (the form that was refused) and that form still holds what the person typed.

    A 507 (a quota) names every limit that bound and links to My resources, where the person
    can free capacity (`items/refusal.html`).
    """

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, slug: str, item_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, slug, item_id, *args, **kwargs)
            except DomainError as exc:
                # The payer's own refusals (a 403 for what only the creator may) show on their page too.
                app, item = item_for(slug, item_id, actor=actor_of(request), need=ItemRight.TEND)
                typed = {**_UNSENT, **kwargs, **request.GET.dict(), **request.POST.dict()}
                folder = typed.get("at") or request.GET.get("folder", "")
                return _render_item(request, app, item, folder=folder, refused=exc, refused_form=form, typed=typed)

        return wrapper

    return decorate


@identity_required
def apps_page(request: HttpRequest) -> HttpResponse:
    return render(request, "items/apps.html", {"apps": selectors.apps()})


def _handover_note(item: Item) -> str:
    if not item.pending_owner:
        return ""
    return f" {item.pending_owner} pays for it once they accept on their My resources page; you pay until then."


@identity_required
def items_page(request: HttpRequest, slug: str) -> HttpResponse:
    app = app_or_404(slug)
    if own_list := own_list_page(slug):
        return HttpResponseRedirect(own_list)
    refused: DomainError | None = None
    if request.method == "POST":
        try:
            item = services.item_create(
                app=app,
                title=request.POST.get("title", ""),
                payer=request.POST.get("owner", ""),
                actor=actor_of(request),
            )
        except DomainError as exc:
            # The refusal, with its status, sits by the New item form, which keeps what was typed.
            refused = exc
        else:
            messages.success(request, f"Created {item.title}.{_handover_note(item)}")
            return HttpResponseRedirect(_item_url(item))
    page = selectors.items_of_app(app_slug=slug, actor=actor_of(request))
    # What was typed comes back for correcting, no more of it than a field takes.
    typed = {name: request.POST.get(name, "")[:ECHOED_CHARS] if refused else "" for name in ("title", "owner")}
    context = {"app": app, "items": page.results, "refused": refused, "typed": typed}
    return refusal_page(request, "items/items.html", context, refused)


def _render_item(
    request: HttpRequest,
    app: AppDescriptor,
    item: Item,
    *,
    folder: str = "",
    refused: DomainError | None = None,
    refused_form: ItemForm | None = None,
    typed: dict[str, str] | None = None,
) -> HttpResponse:
    """The item page, its file list at `folder`. Who only pays for the item (`ItemRight.TEND`)
    gets its title, sandbox, disk and files with Shrink and Delete: no terminal, editor, chat or
    workflows, and a way to hand the bill back."""
    actor = actor_of(request)
    may_use = item_right(item, actor=actor) == ItemRight.USE
    detail = selectors.item_detail(item)
    try:
        files = selectors.item_folder(item, folder, limit=ITEM_PAGE_FILES + 1)
    except DomainError:
        if refused is None:
            raise
        # The folder the refused form was sent from went away meanwhile: show the workspace.
        folder, files = "", selectors.item_folder(item, limit=ITEM_PAGE_FILES + 1)
    folder = folder.strip().strip("/")
    page_said, files_said = _messages_by_place(request)
    context = {
        "app": app,
        "item": item,
        "may_use": may_use,
        "sandbox": detail.sandbox,
        "disk": detail.disk,
        "folder": folder,
        "crumbs": _crumbs(folder),
        "files": files[:ITEM_PAGE_FILES],
        "files_more": len(files) > ITEM_PAGE_FILES,
        "sizes": {
            "cpu": app.resources.sandbox.cpu_cores,
            "memory": format_size(app.resources.sandbox.memory_bytes),
            "disk": format_size(app.resources.disk_bytes),
        },
        "sandbox_memory": format_size(detail.sandbox.memory_bytes) if detail.sandbox else "",
        "sandbox_host": host_name(detail.sandbox.host) if detail.sandbox else "",
        "exec_timeout": f"{services.exec_timeout(None):g} s",
        "page_url": _item_url(item, folder),
        "own_page": item_page_of(item.app_slug, item.pk) if own_list_page(item.app_slug) else "",
        "refused": refused,
        "refused_form": refused_form,
        "typed": typed or {},
        # Overrides the context processor's `messages`, which base.html shows at the top.
        "messages": page_said,
        "files_said": files_said,
    }
    return refusal_page(request, "items/item.html", context, refused)


def _messages_by_place(request: HttpRequest) -> tuple[list[Message], list[Message]]:
    """The messages for the top of the item page, and those its Files card shows (FILES_CARD)."""
    said = [(message, FILES_CARD in message.tags.split()) for message in messages.get_messages(request)]
    return [message for message, in_card in said if not in_card], [message for message, in_card in said if in_card]


def _crumbs(folder: str) -> list[tuple[str, str]]:
    """(name, path) of each folder from the workspace down to `folder`."""
    parts = [part for part in folder.split("/") if part]
    return [(part, "/".join(parts[: depth + 1])) for depth, part in enumerate(parts)]


@identity_required
def item_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    if request.method == "POST":
        return _item_update(request, slug, item_id)
    if "open" in request.GET:
        return _file_open_by_path(request, slug, item_id)
    app, item = item_for(slug, item_id, actor=actor_of(request), need=ItemRight.TEND)
    # One page per item: an app's own page (an investigation's) is the item's place; its terminal
    # and files stay here, opened with `folder` (`_item_url`). Who only pays for it stays here too.
    if (
        "folder" not in request.GET
        and own_list_page(slug)
        and item_right(item, actor=actor_of(request)) == ItemRight.USE
    ):
        return HttpResponseRedirect(item_page_of(slug, item.pk))
    return _render_item(request, app, item, folder=request.GET.get("folder", ""))


@refused_on_the_item_page("details")
@with_item()
def _item_update(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    services.item_update(
        item=item,
        actor=actor_of(request),
        title=request.POST.get("title") or None,
        payer=request.POST.get("owner"),
    )
    messages.success(request, f"Saved.{_handover_note(item)}")
    return HttpResponseRedirect(_item_url(item))


@refused_on_the_item_page("open")
@with_item()
def _file_open_by_path(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    """The "text file" form: to the editor of the path typed, once the file store accepts it
    (a browser would quietly drop a `..` from the address instead)."""
    path = selectors.item_file_path(item, request.GET["open"])
    return HttpResponseRedirect(reverse("ws-item-file", args=[item.app_slug, item.pk, path]))


@identity_required
def file_page(request: HttpRequest, slug: str, item_id: int, file_path: str) -> HttpResponse:
    if request.method == "POST" and request.POST.get("action") == "delete":
        return _file_delete(request, slug, item_id, file_path=file_path)
    if request.method == "POST":
        return _file_save(request, slug, item_id, file_path=file_path)
    return _file_open(request, slug, item_id, file_path=file_path)


@refused_on_the_item_page("delete")
@with_item(ItemRight.TEND)
def _file_delete(request: HttpRequest, app: AppDescriptor, item: Item, *, file_path: str) -> HttpResponse:
    services.file_delete(item=item, path=file_path)
    _files_said(request, f"Deleted {file_path}.")
    return HttpResponseRedirect(_files_url(item, _at(request)))


def _file_exists(item: Item, path: str) -> bool:
    try:
        read_file(item_workspace_root(item), path)
    except DomainError:
        return False
    return True


@with_item()
def _file_save(request: HttpRequest, app: AppDescriptor, item: Item, *, file_path: str) -> HttpResponse:
    text = request.POST.get("content", "").replace("\r\n", "\n")
    try:
        services.file_write(item=item, path=file_path, chunks=[text.encode("utf-8")])
    except DomainError as exc:
        # A refused save keeps what was typed, and says which limits bound and where to free room.
        context = {
            "app": app,
            "item": item,
            "path": file_path,
            "content": text,
            "editable": True,
            "new": not _file_exists(item, file_path),
            "refused": exc,
        }
        return refusal_page(request, "items/file.html", context, exc)
    messages.success(request, f"Saved {file_path}.")
    return HttpResponseRedirect(_item_url(item))


@refused_on_the_item_page("open")
@with_item()
def _file_open(request: HttpRequest, app: AppDescriptor, item: Item, *, file_path: str) -> HttpResponse:
    try:
        root = item_workspace_root(item)
        target = read_file(root, file_path)
    except DomainError as exc:
        if exc.error != "file_not_found":
            raise
        # A path that does not exist yet opens an empty editor: saving creates the file.
        context = {"app": app, "item": item, "path": file_path, "content": "", "editable": True, "new": True}
        return render(request, "items/file.html", context)
    if request.GET.get("raw"):
        return FileResponse(open_read(root, target), as_attachment=True, filename=target.name)
    text = _editable_text(root, target)
    return render(
        request,
        "items/file.html",
        {"app": app, "item": item, "path": file_path, "content": text or "", "editable": text is not None},
    )


def _editable_text(root: Path, target: Path) -> str | None:
    """The file's text for the editor; None when it is longer than the editor takes or not UTF-8.
    Never read past that length: sandbox code may be growing the file meanwhile."""
    with open_read(root, target) as handle:
        if os.fstat(handle.fileno()).st_size > EDITABLE_BYTES:
            return None
        data = handle.read(EDITABLE_BYTES + 1)
    if len(data) > EDITABLE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@takes_uploads(lambda: settings.WORKSPACE_MAX_FILE_BYTES)
@identity_required
@require_POST
@refused_on_the_item_page("upload")
@with_item()
def upload_page(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        raise Invalid(error="no_file", detail="Choose a file to upload.")
    folder = request.POST.get("folder", "").strip().strip("/")
    path = f"{folder}/{upload.name}" if folder else upload.name
    services.file_write(item=item, path=path, chunks=upload.chunks())
    _files_said(request, f"Uploaded {path}.")
    return HttpResponseRedirect(_files_url(item, folder))


@identity_required
@require_POST
@refused_on_the_item_page("rename")
@with_item()
def file_move_page(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    source, target = request.POST.get("source", ""), request.POST.get("target", "").strip().strip("/")
    services.file_move(item=item, source=source, target=target)
    _files_said(request, f"Renamed {source} to {target}.")
    return HttpResponseRedirect(_files_url(item, _at(request)))


@identity_required
@require_POST
@refused_on_the_item_page("folder")
@with_item()
def folder_create_page(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    path = request.POST.get("path", "").strip().strip("/")
    services.folder_create(item=item, path=path)
    _files_said(request, f"Created the folder {path}.")
    return HttpResponseRedirect(_files_url(item, _at(request)))


@identity_required
@require_POST
@refused_on_the_item_page("shrink")
@with_item(ItemRight.TEND)
def file_shrink_page(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    path = request.POST.get("path", "")
    change = services.file_truncate(item=item, path=path, size=_kept_bytes(request.POST.get("size", "0")))
    _files_said(request, f"Shrank {change.path} to {format_bytes(change.new_size)}.")
    return HttpResponseRedirect(_files_url(item, _at(request)))


def _kept_bytes(typed: str) -> int:
    """The shrink form's size: bytes, or a size with a unit (`512K`)."""
    try:
        return parse_size(typed.strip() or "0")
    except SizeError as exc:
        raise Invalid(error="invalid_size", detail=f"Keep how much? {exc}.") from exc


@identity_required
@require_POST
@refused_on_the_item_page("sandbox")
@with_item(ItemRight.TEND)
def sandbox_close_page(request: HttpRequest, app: AppDescriptor, item: Item) -> HttpResponse:
    closed = services.item_sandbox_close(item=item, actor=actor_of(request))
    messages.success(request, "The sandbox is shut down." if closed else "There was no live sandbox.")
    return HttpResponseRedirect(_item_url(item))


@identity_required
@require_POST
def handover_answer_page(request: HttpRequest, item_id: int, answer: str) -> HttpResponse:
    """Accept or decline paying for an item, or hand its bill back, from the My resources page."""
    if answer not in {"accept", "decline", "return"}:
        raise Http404("No such answer.")
    actor = actor_of(request)
    if answer == "return":
        if item := attempt(request, lambda: services.item_bill_return(item_id=item_id, actor=actor)):
            messages.success(request, f"{item.created_by} pays for {item.title} again.")
    else:
        accept = answer == "accept"
        if item := attempt(request, lambda: services.item_handover_answer(item_id=item_id, actor=actor, accept=accept)):
            messages.success(request, f"{'You pay for' if accept else 'You declined paying for'} {item.title}.")
    return HttpResponseRedirect(reverse("my-resources"))
