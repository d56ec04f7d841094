"""Knowledge-base app configuration."""

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from knowledge.embeddings import check_embedding_settings
        from knowledge.llm import check_provider_settings
        from knowledge.rerank import check_rerank_settings

        check_provider_settings()
        check_embedding_settings()
        check_rerank_settings()
