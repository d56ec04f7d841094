"""crudgen: DRF routes with revisions, generated from registered dataclasses and TypedDicts."""
