"""Serializers of the workflow run endpoints (module-level, uniquely named)."""

from __future__ import annotations

from rest_framework import serializers

from collab.serializers import BlankAsNullField


class WorkflowStepResultOutputSerializer(serializers.Serializer):
    command = serializers.CharField()
    exit_code = serializers.IntegerField()
    stdout = serializers.CharField(allow_blank=True)
    stderr = serializers.CharField(allow_blank=True)
    timed_out = serializers.BooleanField()
    duration_ms = serializers.IntegerField()


class WorkflowRunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workflow_id = serializers.CharField()
    number = serializers.IntegerField(help_text="Its place among the workflow's runs: 1 for its first.")
    revision_id = serializers.CharField(allow_blank=True, help_text="The revision that ran (blank if none was read).")
    item_id = serializers.IntegerField(allow_null=True)
    trigger = serializers.ChoiceField(choices=["manual", "scheduled"])
    status = serializers.ChoiceField(choices=["running", "succeeded", "failed", "not_run"])
    reason = serializers.CharField(allow_blank=True, help_text='e.g. "not run due to quota: ..." for a scheduled run')
    steps = WorkflowStepResultOutputSerializer(many=True)
    started_at = serializers.DateTimeField(allow_null=True, help_text="null when it never started")
    finished_at = serializers.DateTimeField(allow_null=True)
    created_by = BlankAsNullField(help_text="null for a scheduled run")


class WorkflowDefinitionOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    revision_id = serializers.CharField()
    name = serializers.CharField()
    steps = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField(allow_blank=True)
    item_id = serializers.CharField(allow_null=True)
    every_seconds = serializers.IntegerField(allow_null=True)
    enabled = serializers.BooleanField()


class WorkflowRunsOutputSerializer(serializers.Serializer):
    workflow = WorkflowDefinitionOutputSerializer()
    runs = WorkflowRunOutputSerializer(many=True)
