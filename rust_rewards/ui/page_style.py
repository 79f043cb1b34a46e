"""CSS the dashboard adds to marimo's own.

marimo's table footer shows, besides the row-selection count ("1 selected"), a note for its spreadsheet-style cell
selection (sums and means of selected cells) that reads "No selection" until two cells are selected: a table with a
selected row said both at once. The note is hidden; the row count, and the stats once cells are selected, stay.
"""

from __future__ import annotations

import marimo as mo

TABLE_FOOTER_CSS = "[part~='table-footer'] span.italic { display: none; }"
"""Hides the footer's "No selection" note (the only italic text of marimo's table footer)."""


def page_style() -> mo.Html:
    """A ``<style>`` to show once at the top of the page: marimo copies every style whose title starts with
    ``marimo`` into the shadow roots its tables draw in."""
    return mo.Html(f"<style title='marimo-dashboard'>{TABLE_FOOTER_CSS}</style>")
