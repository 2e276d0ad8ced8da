"""Placeholder until the API lands: the error envelope of api.md lives here."""

from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    return drf_exception_handler(exc, context)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)


def server_error_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {"error": {"code": "internal_error", "message": "Internal error."}}, status=500
    )
