"""Template tags of the workspace pages."""
