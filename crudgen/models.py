"""Tables of DjangoStorage: one row per resource (with its current data) and one per revision."""

from __future__ import annotations

from django.db import models


class StoredResource(models.Model):
    """A resource's metadata plus a copy of its current data, so a read is one indexed lookup.

    Every list filter and sort has an index led by (namespace, is_deleted), the predicate every
    list query carries, and ending in resource_id, the tie-break of every sort, so a page is an
    index walk that stops after `page_size` rows instead of a sort of the whole namespace.
    """

    namespace = models.CharField(max_length=200)
    resource_id = models.CharField(max_length=100)
    current_revision_id = models.CharField(max_length=200)
    is_deleted = models.BooleanField(default=False)
    created_time = models.DateTimeField()
    updated_time = models.DateTimeField()
    created_by = models.CharField(max_length=200, null=True, blank=True)
    updated_by = models.CharField(max_length=200, null=True, blank=True)
    revision_count = models.PositiveIntegerField(default=1)
    schema_version = models.CharField(max_length=100, null=True, blank=True)
    data = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "resource_id"], name="crudgen_resource_unique_id"),
        ]
        indexes = [
            models.Index(
                fields=["namespace", "is_deleted", "created_time", "resource_id"], name="crudgen_res_created_time"
            ),
            models.Index(
                fields=["namespace", "is_deleted", "updated_time", "resource_id"], name="crudgen_res_updated_time"
            ),
            models.Index(
                fields=["namespace", "is_deleted", "created_by", "resource_id"], name="crudgen_res_created_by"
            ),
            models.Index(
                fields=["namespace", "is_deleted", "updated_by", "resource_id"], name="crudgen_res_updated_by"
            ),
            models.Index(fields=["namespace", "is_deleted", "resource_id"], name="crudgen_res_resource_id"),
            # An access scope (ListScope.created_by) listed newest first: an index walk per creator.
            models.Index(
                fields=["namespace", "is_deleted", "created_by", "created_time", "resource_id"],
                name="crudgen_res_scope_created",
            ),
            models.Index(fields=["namespace", "schema_version"], name="crudgen_res_schema_version"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.resource_id}"


class StoredRevision(models.Model):
    """An immutable snapshot; a switch points the resource at an older one, it never rewrites history."""

    resource = models.ForeignKey(StoredResource, on_delete=models.CASCADE, related_name="revisions")
    revision_id = models.CharField(max_length=200)
    parent_revision_id = models.CharField(max_length=200, null=True, blank=True)
    number = models.PositiveIntegerField()
    data = models.JSONField()
    schema_version = models.CharField(max_length=100, null=True, blank=True)
    created_time = models.DateTimeField()
    created_by = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["resource", "revision_id"], name="crudgen_revision_unique_id"),
            models.UniqueConstraint(fields=["resource", "number"], name="crudgen_revision_unique_number"),
        ]

    def __str__(self) -> str:
        return self.revision_id


class NamespaceTally(models.Model):
    """How many live and soft-deleted resources a namespace holds, kept beside every write.

    An unfiltered list's `total` is the sum of a namespace's slots: a handful of rows, whatever
    the namespace's size, where `COUNT(*)` would walk every row. Writers add to one random slot
    so that concurrent creates seldom queue on the same row lock.
    """

    namespace = models.CharField(max_length=200)
    slot = models.PositiveSmallIntegerField()
    live = models.BigIntegerField(default=0)
    deleted = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "slot"], name="crudgen_tally_unique_slot"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}[{self.slot}]: {self.live} live, {self.deleted} deleted"
