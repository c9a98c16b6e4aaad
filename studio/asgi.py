"""ASGI entry: HTTP (Django) and websockets (Channels) in one application, served by daphne."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_http = get_asgi_application()  # sets up Django before the consumers are imported

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from studio.datasets.uploads import BodySizeGuard, stop_daphne_parsing_forms  # noqa: E402
from studio.lib.static import StaticFilesHandler  # noqa: E402
from studio.runs.live.auth import AllowedHostsBrowserOriginValidator, SessionOrTokenAuthMiddleware  # noqa: E402
from studio.runs.live.routing import websocket_urlpatterns  # noqa: E402

# The studio serves its own static files (a single-command install has no separate web server);
# at team scale a reverse proxy may serve STATIC_ROOT instead (STUDIO_SERVE_STATIC=0). They carry nosniff.
http = StaticFilesHandler(django_http) if os.environ.get("STUDIO_SERVE_STATIC", "1") != "0" else django_http
# A body over the upload limit is refused from its Content-Length before Django spools it to disk,
# and daphne does not parse upload forms on its one thread (Django does, in the view's).
http = BodySizeGuard(http)
stop_daphne_parsing_forms()

application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": AllowedHostsBrowserOriginValidator(SessionOrTokenAuthMiddleware(URLRouter(websocket_urlpatterns))),
    }
)
