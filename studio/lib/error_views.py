"""Django's error views (handler400/403/404/500 in studio/urls.py): under the API's prefixes an error is
JSON in the shape DRF's own errors have ({"detail": ...}, `api_schema.ErrorSerializer`), elsewhere the
HTML page. DRF answers the errors of its views itself; these answer what never reaches one: a path no
route matches (an id spelled "abc" or "-1" where the route's converter takes digits), and a failure
DRF does not handle (an exception other than an APIException).

With DEBUG on, Django shows its technical pages for 404 and 500 instead of these, as it does anywhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

# The paths whose callers read JSON: the REST API and the OpenAI-compatible endpoint.
API_PREFIXES = ("/api/", "/v1/")
# "/api" alone (no slash) is the API's root too: CommonMiddleware sends it on to "/api/" when it exists.
API_ROOTS = ("/api", "/v1")


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIXES) or request.path in API_ROOTS


def _json(detail: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json("Bad request.", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json("You do not have permission to perform this action.", 403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json("Not found.", 404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    # What failed is in the log (django.request logs the traceback); the caller learns only that it did.
    if is_api(request):
        return _json("Server error: the studio could not answer (see its log).", 500)
    return defaults.server_error(request)
