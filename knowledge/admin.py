"""Admin: collections and documents are browsable; the citation log is read-only, as it is everywhere."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from collab.actor import admin_actor
from collab.edge import admin_refused
from collab.errors import DomainError
from collab.sizes import format_bytes
from knowledge.models import CitationEvent, Collection, CollectionWriter, Document, KbChat
from knowledge.selectors import collection_embedding_progress
from knowledge.services import collections_purge, document_rename_by_staff, documents_purge


class CollectionWriterInline(admin.TabularInline):
    """Who besides the creator changes the collection's documents; staff may correct the list."""

    model = CollectionWriter
    extra = 0
    fields = ("user_id", "created_by", "created_at")
    readonly_fields = ("created_by", "created_at")


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ("name", "created_by", "updated_at")
    search_fields = ("name",)
    readonly_fields = ("created_by", "updated_by", "created_at", "updated_at", "embeddings")
    inlines = [CollectionWriterInline]

    @admin.display(description="Embeddings")
    def embeddings(self, obj: Collection) -> str:
        """Staff see chunks still waiting for a vector (found by words only until then)."""
        progress = collection_embedding_progress(collection_id=obj.pk) if obj.pk else None
        if progress is None:
            return "No embedding provider: lexical search only."
        if progress.pending:
            return (
                f"{progress.pending} of {progress.chunks} chunks pending (searched by words only until "
                f"embedded); model {progress.model}"
            )
        return f"All {progress.chunks} chunks embedded; model {progress.model}"

    # Deleting goes through the service: documents, chunks and search-index rows go first (they
    # protect the collection), the citation log stays.
    def delete_model(self, request: HttpRequest, obj: Collection) -> None:
        collections_purge(collection_ids=[obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        collections_purge(collection_ids=list(queryset.values_list("pk", flat=True)))

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, dict[str, int], set[str], list[Any]]:
        """The documents that protect a collection from a plain delete are deleted with it by the service."""
        deleted, counts, perms_needed, _protected = super().get_deleted_objects(objs, request)
        counts[str(Document._meta.verbose_name_plural)] = Document.objects.filter(collection__in=list(objs)).count()
        return deleted, counts, perms_needed, []

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for row in formset.save(commit=False):
            if not row.pk:
                row.stamp_created(request.user.get_username())
            row.save()
        for gone in formset.deleted_objects:
            gone.delete()


class DocumentForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ("filename",)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    """Staff rename and delete documents through the services, so the rules and the search index
    hold; content, collection and status are the upload's and ingest's (the knowledge base pages)."""

    form = DocumentForm
    list_display = ("filename", "collection", "status", "shown_size", "created_by", "updated_at")
    list_filter = ("status",)
    search_fields = ("filename",)
    fields = (
        "filename", "collection", "content_type", "shown_size", "status", "reason", "content_version",
        "replaced_by", "replaced_at", "created_by", "updated_by", "created_at", "updated_at",
    )  # fmt: skip
    readonly_fields = (
        "collection", "content_type", "shown_size", "status", "reason", "content_version", "replaced_by",
        "replaced_at", "created_by", "updated_by", "created_at", "updated_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A document is an upload that ingest turns into searchable passages; admin has no file to give.
        return False

    @admin.display(description="size", ordering="size")
    def shown_size(self, obj: Document) -> str:
        return format_bytes(obj.size)  # as every page shows sizes

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).defer("content")

    def save_model(self, request: HttpRequest, obj: Document, form: DocumentForm, change: bool) -> None:
        document_rename_by_staff(document_id=obj.pk, actor=admin_actor(request), filename=form.cleaned_data["filename"])

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        """A refused rename (a name another document of the collection has) is a message on the form."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:
            admin_refused(self, request, exc)
            return HttpResponseRedirect(request.get_full_path())

    # Deleting goes through the service, so the chunks and their search-index rows go too.
    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        documents_purge(document_ids=[obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        documents_purge(document_ids=list(queryset.values_list("pk", flat=True)))


@admin.register(KbChat)
class KbChatAdmin(admin.ModelAdmin):
    list_display = ("title", "created_by", "updated_at")
    search_fields = ("title", "created_by")
    readonly_fields = ("created_by", "updated_by", "created_at", "updated_at")


@admin.register(CitationEvent)
class CitationEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "origin_kind", "origin_id", "document_id", "marker", "cited_by")
    list_filter = ("origin_kind",)
    search_fields = ("document_id", "origin_id", "message_id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
