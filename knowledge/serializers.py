"""Module-level, uniquely named serializers of the knowledge-base endpoints."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from knowledge.models import Document, KbChatMessage
from knowledge.services.text import QUESTION_MAX


class KbCollectionCreateInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class KbCollectionUpdateInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=5000, help_text="Left as it is when omitted."
    )


class KbCollectionOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    owner = serializers.CharField()
    documents = serializers.IntegerField(help_text="Number of documents.")
    cited = serializers.IntegerField(help_text="Citation events naming this collection.")
    writers = serializers.ListField(
        child=serializers.CharField(), help_text="Who may change its documents: the creator, then those added."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


@extend_schema_field(OpenApiTypes.BINARY)
class _UploadedFileField(serializers.FileField):
    """A file part of a multipart body, documented as binary: drf-spectacular documents a FileField as a
    URI string, and clients generated from that send the upload as a text field."""


class KbDocumentUploadInputSerializer(serializers.Serializer):
    # Empty files pass here so the service can refuse them with its own clear error.
    file = _UploadedFileField(allow_empty_file=True)


class KbDocumentAcceptedOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=Document.Status.choices)


class KbDocumentOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    collection_id = serializers.CharField()
    filename = serializers.CharField()
    content_type = serializers.CharField()
    status = serializers.ChoiceField(choices=Document.Status.choices)
    reason = serializers.CharField(help_text="Why ingest failed; empty otherwise.")
    owner = serializers.CharField(help_text="The uploader (creator).")
    size = serializers.IntegerField(help_text="Stored bytes.")
    chunks = serializers.IntegerField()
    cited = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    replaced_by = serializers.CharField(help_text="Who last replaced the content by re-uploading; empty if never.")
    replaced_at = serializers.DateTimeField(allow_null=True, help_text="When the content was last replaced.")


class KbChunksQuerySerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The document id.")


class KbChunkOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    document_id = serializers.CharField()
    ordinal = serializers.IntegerField()
    title = serializers.CharField(help_text="The headings the passage sits under, e.g. 'Backup policy › Schedule'.")
    page = serializers.IntegerField(allow_null=True, help_text="The PDF page it is on; null for other formats.")
    text = serializers.CharField()
    cited = serializers.IntegerField(help_text="Citation events whose source_chunk_ids include this chunk.")


class KbCitationOutputSerializer(serializers.Serializer):
    marker = serializers.IntegerField()
    collection_id = serializers.CharField()
    document_id = serializers.CharField()
    document_name = serializers.CharField()
    source_chunk_ids = serializers.ListField(child=serializers.CharField())
    quote = serializers.CharField(allow_blank=True)
    # Answers stored before chunks had titles carry none.
    title = serializers.CharField(
        allow_blank=True, default="", help_text="The headings of the cited section; empty when it has none."
    )


class KbChatMessageOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    role = serializers.ChoiceField(choices=KbChatMessage.Role.choices)
    content = serializers.CharField()
    citations = KbCitationOutputSerializer(many=True)
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class KbChatCreateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    collection_ids = serializers.ListField(child=serializers.CharField(max_length=40), allow_empty=False)


class KbChatOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    owner = serializers.CharField()
    collection_ids = serializers.ListField(child=serializers.CharField())
    shared_with = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class KbChatDetailOutputSerializer(KbChatOutputSerializer):
    messages = KbChatMessageOutputSerializer(many=True)


class KbChatRenameInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)


class KbChatCopyInputSerializer(serializers.Serializer):
    title = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text='Default: "Copy of <title>".'
    )


class KbChatMessageInputSerializer(serializers.Serializer):
    content = serializers.CharField(max_length=QUESTION_MAX)


class KbChatExchangeOutputSerializer(serializers.Serializer):
    question = KbChatMessageOutputSerializer()
    answer = KbChatMessageOutputSerializer()


class KbChatShareInputSerializer(serializers.Serializer):
    user_ids = serializers.ListField(child=serializers.CharField(max_length=150), allow_empty=True, max_length=200)


class KbWritersInputSerializer(serializers.Serializer):
    user_ids = serializers.ListField(child=serializers.CharField(max_length=150), allow_empty=False, max_length=200)


class KbWritersOutputSerializer(serializers.Serializer):
    writers = serializers.ListField(child=serializers.CharField(), help_text="The creator first, then those added.")


class KbDocumentRenameInputSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=255)


class KbChatSharedWithOutputSerializer(serializers.Serializer):
    shared_with = serializers.ListField(child=serializers.CharField())
