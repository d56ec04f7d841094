"""Server-rendered pages of the knowledge base; they share paths with the API (collab.web.html_or_api)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from collab.actor import actor_of
from collab.capacity import runs_long
from collab.edge import status_of
from collab.errors import DomainError, Forbidden
from collab.identity import get_user_directory
from collab.web import attempt, identity_required
from knowledge import selectors, services
from knowledge.access import (
    ChatRight,
    CollectionRight,
    chat_for,
    chat_right_of,
    collection_for,
    collection_right_of,
    document_for,
)
from knowledge.model_answers import answer_model


def _see_other(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


@identity_required
@require_http_methods(["GET", "POST"])
def collections_page(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        actor = actor_of(request)
        name, description = request.POST.get("name", ""), request.POST.get("description", "")
        created = attempt(request, lambda: services.collection_create(actor=actor, name=name, description=description))
        if created is not None:
            messages.success(request, f"Created the collection {created.name}.")
            return _see_other(reverse("kb-collection-documents", args=[created.id]))
        return _see_other(reverse("kb-collections"))
    return render(request, "knowledge/collections.html", {"collections": selectors.collections_with_counts()})


@dataclass(frozen=True)
class RefusedForm:
    """A rename the service refused: the page shows its form again, open, with what was typed and why."""

    intent: str
    values: dict[str, str]
    detail: str


@dataclass(frozen=True)
class ManageForms:
    """The rename and delete forms of one page, posted to the resource's own path with an `intent`
    (a form cannot send the API's PATCH or DELETE). Each callable runs one service and returns
    the message to show; `page` renders the page again around a refused rename."""

    rename_fields: tuple[str, ...]
    rename: Callable[[dict[str, str]], str]
    delete: Callable[[], str]
    stay: str
    leave: str
    page: Callable[[RefusedForm, int], HttpResponse]


def _manage(request: HttpRequest, forms: ManageForms) -> HttpResponse:
    intent = request.POST.get("intent", "")
    if intent == "delete":
        done = attempt(request, forms.delete)
        if done is None:
            return _see_other(forms.stay)
        messages.success(request, done)
        return _see_other(forms.leave)
    if intent != "rename":
        messages.error(request, "That form is not one this page sends; nothing changed.")
        return _see_other(forms.stay)
    values = {name: request.POST.get(name, "") for name in forms.rename_fields}
    try:
        messages.success(request, forms.rename(values))
    except DomainError as exc:
        if isinstance(exc, Forbidden):
            # Not about what was typed: the person may not rename at all (a page from before a change).
            messages.error(request, str(exc.detail))
            return _see_other(forms.stay)
        return forms.page(RefusedForm(intent=intent, values=values, detail=str(exc.detail)), status_of(exc))
    return _see_other(forms.stay)


@identity_required
@require_http_methods(["GET", "POST"])
def collection_documents_page(request: HttpRequest, collection_id: str) -> HttpResponse:
    here = reverse("kb-collection-documents", args=[collection_id])
    if request.method == "POST":
        _upload_from_form(request, collection_id)
        return _see_other(here)
    return _documents_response(request, collection_id)


def _documents_response(
    request: HttpRequest, collection_id: str, refused: RefusedForm | None = None, status: int = 200
) -> HttpResponse:
    collection = selectors.collection_with_counts(collection_id=collection_id)
    if collection is None:
        raise Http404("No such collection.")
    documents = selectors.documents_with_counts(collection_id=collection_id)
    right = collection_right_of(creator=collection.owner, writers=collection.writers, actor=actor_of(request))
    context = {
        "collection": collection,
        "documents": documents,
        "can_write": right is not None and right >= CollectionRight.WRITE,
        "is_creator": right == CollectionRight.OWN,
        "ingesting": any(document.status == "pending" for document in documents),
        "refused": refused,
        "staff": actor_of(request).is_staff,
        "embeddings": selectors.collection_embedding_progress(collection_id=collection_id)
        if actor_of(request).is_staff
        else None,
    }
    return render(request, "knowledge/documents.html", context, status=status)


@identity_required
@require_http_methods(["GET", "POST"])
def collection_page(request: HttpRequest, collection_id: str) -> HttpResponse:
    """A collection is shown by its documents page; this path takes its rename and delete forms."""
    documents_url = reverse("kb-collection-documents", args=[collection_id])
    if request.method == "GET":
        collection_for(collection_id, actor=actor_of(request))
        return HttpResponseRedirect(documents_url)
    actor = actor_of(request)

    def rename(values: dict[str, str]) -> str:
        renamed = services.collection_rename(collection_id=collection_id, actor=actor, **values)
        return f"Renamed the collection to {renamed.name}."

    def delete() -> str:
        name = collection_for(collection_id, actor=actor).name
        services.collection_delete(collection_id=collection_id, actor=actor)
        return f"Deleted the collection {name} with its documents."

    return _manage(
        request,
        ManageForms(
            rename_fields=("name", "description"),
            rename=rename,
            delete=delete,
            stay=documents_url,
            leave=reverse("kb-collections"),
            page=lambda refused, status: _documents_response(request, collection_id, refused, status),
        ),
    )


def _upload_from_form(request: HttpRequest, collection_id: str) -> None:
    actor = actor_of(request)
    collection_for(collection_id, actor=actor)
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a file to upload.")
        return
    document = attempt(
        request,
        lambda: services.document_upload(
            collection_id=collection_id,
            actor=actor,
            filename=upload.name or "",
            content_type=upload.content_type or "",
            data=upload,
        ),
    )
    if document is not None:
        messages.success(request, f"Uploaded {document.filename}; it is being split into chunks and indexed.")


@identity_required
@require_http_methods(["GET"])
def document_page(request: HttpRequest, document_id: str | None = None) -> HttpResponse:
    return _document_response(request, document_id or request.GET.get("id", ""))


def _document_response(
    request: HttpRequest, document_id: str, refused: RefusedForm | None = None, status: int = 200
) -> HttpResponse:
    document = selectors.document_with_counts(document_id=document_id)
    if document is None:
        raise Http404("No such document.")
    collection = selectors.collection_with_counts(collection_id=document.collection_id)
    right = (
        None
        if collection is None
        else collection_right_of(creator=collection.owner, writers=collection.writers, actor=actor_of(request))
    )
    context = {
        "document": document,
        "collection": collection,
        "chunks": selectors.chunks_with_counts(document_id=document_id),
        "can_write": right is not None and right >= CollectionRight.WRITE,
        "refused": refused,
    }
    return render(request, "knowledge/document.html", context, status=status)


@identity_required
@require_http_methods(["GET", "POST"])
def document_detail_page(request: HttpRequest, document_id: str) -> HttpResponse:
    """The document's page; its rename and delete forms post here."""
    if request.method == "GET":
        return _document_response(request, document_id)
    actor = actor_of(request)
    document = document_for(document_id, actor=actor)

    def rename(values: dict[str, str]) -> str:
        renamed = services.document_rename(document_id=document_id, actor=actor, **values)
        return f"Renamed {document.filename} to {renamed.filename}."

    def delete() -> str:
        services.document_delete(document_id=document_id, actor=actor)
        return f"Deleted {document.filename}."

    return _manage(
        request,
        ManageForms(
            rename_fields=("filename",),
            rename=rename,
            delete=delete,
            stay=reverse("kb-document", args=[document_id]),
            leave=reverse("kb-collection-documents", args=[document.collection_id]),
            page=lambda refused, status: _document_response(request, document_id, refused, status),
        ),
    )


@identity_required
@require_http_methods(["GET", "POST"])
def chats_page(request: HttpRequest) -> HttpResponse:
    actor = actor_of(request)
    if request.method == "POST":
        title, collection_ids = request.POST.get("title", ""), request.POST.getlist("collection_ids")
        chat = attempt(request, lambda: services.chat_create(actor=actor, title=title, collection_ids=collection_ids))
        return _see_other(reverse("kb-chat", args=[chat.id]) if chat else reverse("kb-chats"))
    context = {
        "chats": selectors.chats_for_reader(actor=actor),
        "collections": selectors.collections_with_counts(),
        "people": {user.id: user for user in get_user_directory().all()},
    }
    return render(request, "knowledge/chats.html", context)


@identity_required
@require_http_methods(["GET", "POST"])
def chat_page(request: HttpRequest, chat_id: str) -> HttpResponse:
    """The chat as its owner or a reader sees it; the owner's rename and delete forms post here."""
    if request.method == "GET":
        return _chat_response(request, chat_id)
    actor = actor_of(request)
    title = chat_for(chat_id, actor=actor).title

    def rename(values: dict[str, str]) -> str:
        renamed = services.chat_rename(chat_id=chat_id, actor=actor, **values)
        return f"Renamed the chat to {renamed.title}."

    def delete() -> str:
        services.chat_delete(chat_id=chat_id, actor=actor)
        return f"Deleted the chat {title}."

    return _manage(
        request,
        ManageForms(
            rename_fields=("title",),
            rename=rename,
            delete=delete,
            stay=reverse("kb-chat", args=[chat_id]),
            leave=reverse("kb-chats"),
            page=lambda refused, status: _chat_response(request, chat_id, refused, status),
        ),
    )


def _chat_response(
    request: HttpRequest, chat_id: str, refused: RefusedForm | None = None, status: int = 200
) -> HttpResponse:
    actor = actor_of(request)
    chat = selectors.chat_detail(chat=chat_for(chat_id, actor=actor))
    directory = get_user_directory().all()
    context = {
        "chat": chat,
        "is_owner": chat_right_of(owner=chat.owner, readers=chat.shared_with, actor=actor) == ChatRight.OWN,
        "transcript": selectors.chat_transcript(messages=chat.messages),
        "people": {user.id: user for user in directory},
        "shareable": [user for user in directory if user.id != chat.owner and user.id not in chat.shared_with],
        "collection_names": selectors.collection_names(collection_ids=chat.collection_ids),
        "refused": refused,
        "answer_model": answer_model(),
    }
    return render(request, "knowledge/chat.html", context, status=status)


@identity_required
@require_POST
def chat_copy_page(request: HttpRequest, chat_id: str) -> HttpResponse:
    actor, title = actor_of(request), request.POST.get("title", "")
    copy = attempt(request, lambda: services.chat_copy(chat_id=chat_id, actor=actor, title=title))
    if copy is None:
        return _see_other(reverse("kb-chat", args=[chat_id]))
    messages.success(request, f"This is your copy, {copy.title}: ask your own questions here.")
    return _see_other(reverse("kb-chat", args=[copy.id]))


@runs_long
@identity_required
@require_POST
def chat_message_page(request: HttpRequest, chat_id: str) -> HttpResponse:
    actor, content = actor_of(request), request.POST.get("content", "")
    exchange = attempt(request, lambda: services.chat_message_send(chat_id=chat_id, actor=actor, content=content))
    anchor = f"#msg-{exchange.answer.id}" if exchange else ""
    return _see_other(reverse("kb-chat", args=[chat_id]) + anchor)


@identity_required
@require_POST
def chat_share_page(request: HttpRequest, chat_id: str) -> HttpResponse:
    actor, wanted = actor_of(request), request.POST.getlist("user_ids")
    shared_with = attempt(request, lambda: services.chat_share(chat_id=chat_id, actor=actor, user_ids=wanted))
    if shared_with is not None and wanted:
        messages.success(request, f"Shared read-only with {', '.join(wanted)}.")
    return _see_other(reverse("kb-chat", args=[chat_id]))


@identity_required
@require_POST
def chat_unshare_page(request: HttpRequest, chat_id: str, user_id: str) -> HttpResponse:
    owner = actor_of(request)
    done = attempt(request, lambda: services.chat_unshare(chat_id=chat_id, actor=owner, reader_id=user_id) or True)
    if done:
        messages.success(request, f"{user_id} can no longer read this chat.")
    return _see_other(reverse("kb-chat", args=[chat_id]))


@identity_required
@require_POST
def collection_writers_page(request: HttpRequest, collection_id: str) -> HttpResponse:
    actor, wanted = actor_of(request), request.POST.getlist("user_ids")
    writers = attempt(
        request, lambda: services.collection_writers_add(collection_id=collection_id, actor=actor, user_ids=wanted)
    )
    if writers is not None:
        messages.success(request, f"{', '.join(wanted)} can now change this collection's documents.")
    return _see_other(reverse("kb-collection-documents", args=[collection_id]))


@identity_required
@require_POST
def collection_writer_remove_page(request: HttpRequest, collection_id: str, user_id: str) -> HttpResponse:
    creator = actor_of(request)
    done = attempt(
        request,
        lambda: (
            services.collection_writer_remove(collection_id=collection_id, actor=creator, writer_id=user_id) or True
        ),
    )
    if done:
        messages.success(request, f"{user_id} can no longer change this collection's documents.")
    return _see_other(reverse("kb-collection-documents", args=[collection_id]))
