"""URLs of the knowledge base (the spec's /kb paths; pages share them by Accept)."""
urlpatterns: list = []
