"""Renderers: results become a plain `Document` (tables, key figures, notes, and the JSON payload), and each
output format renders a `Document` to text. Renderers do no IO; the CLI writes what they return."""

from __future__ import annotations

from opscope.report.document import Column, Document, Table
from opscope.report.render import FORMATS, RenderOptions, render

__all__ = ["FORMATS", "Column", "Document", "RenderOptions", "Table", "render"]
