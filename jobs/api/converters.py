"""Path converters of the API's and the console's routes, registered once, when this module
is first imported (by either's URLs)."""

from __future__ import annotations

from django.urls import register_converter
from django.urls.converters import PathConverter


class LimitNameConverter(PathConverter):
    """A limit's name, the path's last segment: a job type's name may hold a `/`, and any
    character at all reaches the view, which answers one a name cannot hold with a 400
    (Django's `path` stops at a newline: its route was a 404)."""

    regex = r"[\s\S]+"


register_converter(LimitNameConverter, "limit_name")
