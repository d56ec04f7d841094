"""Project package: settings, URLs and the workspace core."""
