"""Sphinx configuration: plain reStructuredText, no extension beyond Sphinx itself."""

from __future__ import annotations

project = "pytest-dagorder"
author = "pytest-dagorder contributors"
copyright = "pytest-dagorder contributors"
release = "0.1.0"

extensions: list[str] = []
root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
# The demo suite and the Markdown files are read on GitHub, not built here.
exclude_patterns = ["_build", "examples", "*.md", "**/*.md"]

html_theme = "alabaster"
html_static_path: list[str] = []
highlight_language = "python"
