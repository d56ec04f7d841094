"""Server-rendered pages of the workspace core; they call the same services as the API."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from collab.errors import ApiError
from collab.web import identity_required
from quotas.sizes import format_size
from workspace.items import selectors, services
from workspace.items.access import app_or_404, item_for_viewer
from workspace.items.filestore import open_read, read_file, workspace_prepared
from workspace.items.links import own_list_page
from workspace.items.models import Item

EDITABLE_BYTES = 512 * 1024


def _viewer_item(request: HttpRequest, slug: str, item_id: int):
    identity = request.identity
    return item_for_viewer(slug, item_id, user_id=identity.user_id, is_staff=identity.is_staff)


def _item_url(slug: str, item_id: int) -> str:
    return reverse("ws-item", args=[slug, item_id])


def errors_as_messages(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A refused action on a page comes back as a flash message on the item page, not a JSON body.

    A 507 (a quota) keeps the detail, which names the limit, and links to My resources, where
    the person can free capacity.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, slug: str, item_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, slug, item_id, *args, **kwargs)
        except ApiError as exc:
            if exc.status_code == 507:
                link = reverse("my-resources")
                text = format_html('{} <a href="{}">Free capacity on My resources</a>', str(exc.detail), link)
                messages.error(request, text)
            else:
                messages.error(request, str(exc.detail))
            return HttpResponseRedirect(_item_url(slug, item_id))

    return wrapper


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
    identity = request.identity
    if request.method == "POST":
        try:
            item = services.item_create(
                app=app,
                title=request.POST.get("title", ""),
                owner=request.POST.get("owner", ""),
                user_id=identity.user_id,
                is_staff=identity.is_staff,
            )
        except ApiError as exc:
            messages.error(request, str(exc.detail))
        else:
            messages.success(request, f"Created {item.title}.{_handover_note(item)}")
            return HttpResponseRedirect(_item_url(slug, item.pk))
    page = selectors.items_of_app(app_slug=slug, user_id=identity.user_id, is_staff=identity.is_staff)
    return render(request, "items/items.html", {"app": app, "items": page.results})


@identity_required
@errors_as_messages
def item_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    app, item = _viewer_item(request, slug, item_id)
    if request.method == "POST":
        services.item_update(
            item=item,
            user_id=request.identity.user_id,
            is_staff=request.identity.is_staff,
            title=request.POST.get("title") or None,
            owner=request.POST.get("owner"),
        )
        messages.success(request, f"Saved.{_handover_note(item)}")
        return HttpResponseRedirect(_item_url(slug, item_id))
    detail = selectors.item_detail(item)
    context = {
        "app": app,
        "item": item,
        "sandbox": detail.sandbox,
        "disk": detail.disk,
        "files": selectors.item_files(item),
        "sizes": {
            "cpu": app.resources.sandbox.cpu_cores,
            "memory": format_size(app.resources.sandbox.memory_bytes),
            "disk": format_size(app.resources.disk_bytes),
        },
        "sandbox_memory": format_size(detail.sandbox.memory_bytes) if detail.sandbox else "",
    }
    return render(request, "items/item.html", context)


@identity_required
@errors_as_messages
def file_page(request: HttpRequest, slug: str, item_id: int, file_path: str) -> HttpResponse:
    app, item = _viewer_item(request, slug, item_id)
    if request.method == "POST" and request.POST.get("action") == "delete":
        services.file_delete(item=item, path=file_path)
        messages.success(request, f"Deleted {file_path}.")
        return HttpResponseRedirect(_item_url(slug, item_id))
    if request.method == "POST":
        text = request.POST.get("content", "").replace("\r\n", "\n")
        try:
            services.file_write(item=item, path=file_path, chunks=[text.encode("utf-8")])
        except ApiError as exc:
            # A refused save keeps what was typed, and says which limit bound and where to free room.
            context = {"app": app, "item": item, "path": file_path, "content": text, "editable": True, "refused": exc}
            return render(request, "items/file.html", context, status=exc.status_code)
        messages.success(request, f"Saved {file_path}.")
        return HttpResponseRedirect(_item_url(slug, item_id))
    try:
        root = workspace_prepared(item.pk, item.app_slug)
        target = read_file(root, file_path)
    except ApiError as exc:
        if exc.error != "file_not_found":
            raise
        # A path that does not exist yet opens an empty editor: saving creates the file.
        context = {"app": app, "item": item, "path": file_path, "content": "", "editable": True, "new": True}
        return render(request, "items/file.html", context)
    if request.GET.get("raw"):
        return FileResponse(open_read(root, target), as_attachment=True, filename=target.name)
    content, editable = "", target.stat().st_size <= EDITABLE_BYTES
    if editable:
        try:
            with open_read(root, target) as handle:
                content = handle.read().decode("utf-8")
        except UnicodeDecodeError:
            editable = False
    return render(
        request,
        "items/file.html",
        {"app": app, "item": item, "path": file_path, "content": content, "editable": editable},
    )


@identity_required
@require_POST
@errors_as_messages
def upload_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    _app, item = _viewer_item(request, slug, item_id)
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a file to upload.")
        return HttpResponseRedirect(_item_url(slug, item_id))
    folder = request.POST.get("folder", "").strip().strip("/")
    path = f"{folder}/{upload.name}" if folder else upload.name
    services.file_write(item=item, path=path, chunks=upload.chunks())
    messages.success(request, f"Uploaded {path}.")
    return HttpResponseRedirect(_item_url(slug, item_id))


@identity_required
@require_POST
@errors_as_messages
def file_move_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    _app, item = _viewer_item(request, slug, item_id)
    source, target = request.POST.get("source", ""), request.POST.get("target", "").strip().strip("/")
    services.file_move(item=item, source=source, target=target)
    messages.success(request, f"Renamed {source} to {target}.")
    return HttpResponseRedirect(_item_url(slug, item_id))


@identity_required
@require_POST
@errors_as_messages
def folder_create_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    _app, item = _viewer_item(request, slug, item_id)
    path = request.POST.get("path", "").strip().strip("/")
    services.folder_create(item=item, path=path)
    messages.success(request, f"Created the folder {path}.")
    return HttpResponseRedirect(_item_url(slug, item_id))


@identity_required
@require_POST
@errors_as_messages
def sandbox_close_page(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    _app, item = _viewer_item(request, slug, item_id)
    closed = services.item_sandbox_close(item=item)
    messages.success(request, "The sandbox is shut down." if closed else "There was no live sandbox.")
    return HttpResponseRedirect(_item_url(slug, item_id))


@identity_required
@require_POST
def handover_answer_page(request: HttpRequest, item_id: int, answer: str) -> HttpResponse:
    """Accept or decline paying for an item, from the My resources page."""
    if answer not in {"accept", "decline"}:
        raise Http404("No such answer.")
    try:
        item = services.item_handover_answer(
            item_id=item_id, user_id=request.identity.user_id, accept=answer == "accept"
        )
    except ApiError as exc:
        messages.error(request, str(exc.detail))
    else:
        done = "You pay for" if answer == "accept" else "You declined paying for"
        messages.success(request, f"{done} {item.title}.")
    return HttpResponseRedirect(reverse("my-resources"))
