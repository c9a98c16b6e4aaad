"""The upload size limit (STUDIO_MAX_UPLOAD_MB), enforced before any byte of a file is kept.

Two places, because the web server reads a request in two steps:

- `BodySizeGuard` (ASGI, around the whole HTTP app): Django's ASGI handler spools a request's body
  to a temporary file before any view or upload handler sees it, so only here can a body be refused
  from its Content-Length without being stored. One with no (or a false) length is counted as it
  arrives and cut off past the limit.
- `SizeLimitHandler` (Django's first upload handler, for any server that reaches Django with the
  body unread, and for the test client): stops passing a file's bytes on past the limit, so no
  temporary file grows beyond it, and hands the view a `RefusedUpload` that says why.
"""

from __future__ import annotations

import asyncio
import html
import json
from io import BytesIO
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler

MB = 1024 * 1024
# Room for the form fields and multipart framing around a file as large as the limit.
FORM_ALLOWANCE = MB
YIELD_EVERY = MB  # bytes of a body passed on between two turns of the event loop


def limit_bytes() -> int:
    return settings.MAX_UPLOAD_MB * MB


def too_large(size: int | None = None) -> str:
    """The message for an upload over the limit, naming the limit and the setting."""
    size_text = f"{size / MB:,.0f} MB, " if size else ""
    return (
        f"the upload is {size_text}larger than the limit of {settings.MAX_UPLOAD_MB:,} MB "
        "(STUDIO_MAX_UPLOAD_MB); nothing was kept"
    )


class RefusedUpload(UploadedFile):
    """What the view gets in place of a file past the limit: its name and why, and no content."""

    def __init__(self, name: str, reason: str, size: int) -> None:
        super().__init__(BytesIO(b""), name=name, size=size)
        self.reason = reason


class SizeLimitHandler(FileUploadHandler):
    """Counts each file's bytes and keeps none past the limit (the handlers after it never see them)."""

    refused: str | None = None  # set from the request's Content-Length
    reason: str | None = None  # why the current file is refused

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None) -> None:
        self.refused = too_large(content_length) if content_length > limit_bytes() + FORM_ALLOWANCE else None

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.reason = self.refused

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        if self.reason is None and start + len(raw_data) > limit_bytes():
            self.reason = too_large()
        return None if self.reason else raw_data

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if not self.reason:
            return None  # the next handler (memory or temporary file) has the file
        # The handlers after this one opened their file (a temporary file is deleted on close) and
        # got the bytes up to the limit; as Django's own parser does, they keep it as `file`.
        for handler in self.request.upload_handlers if self.request else ():
            if handler is not self and hasattr(handler, "file"):
                handler.file.close()
        return RefusedUpload(self.file_name, self.reason, file_size)


class BodySizeGuard:
    """ASGI middleware: answers 413 to a request whose body is over the upload limit, storing none of it."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = limit_bytes() + FORM_ALLOWANCE
        length = _content_length(scope)
        if length is not None and length > limit:
            await _drain(receive)  # read and dropped, so that the client is there to read the answer
            return await _refuse(scope, send, too_large(length))
        received, over = 0, False

        async def counted_receive() -> dict[str, Any]:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                before, received = received, received + len(message.get("body", b""))
                if before // YIELD_EVERY != received // YIELD_EVERY:
                    # daphne queues a whole body at once, so Django's spooling would never give the
                    # event loop back: other requests wait for all of it without this
                    await asyncio.sleep(0)
                if received > limit:
                    over = True
                    if message.get("more_body"):
                        await _drain(receive)
                    return {"type": "http.disconnect"}  # Django drops what it spooled and answers nothing
            return message

        await self.app(scope, counted_receive, send)
        if over:
            await _refuse(scope, send, too_large())


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _drain(receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _refuse(scope, send, message: str) -> None:
    """413, as the API's field error on `file` for API paths, else a short page."""
    if scope.get("path", "").startswith("/api/"):
        body, kind = json.dumps({"file": [message]}).encode(), b"application/json"
    else:
        text = html.escape(message[0].upper() + message[1:])
        body = f"<!doctype html><title>Upload too large</title><p>{text}.</p><p><a href=''>Back</a></p>".encode()
        kind = b"text/html; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def stop_daphne_parsing_forms() -> None:
    """Have daphne's Twisted requests leave POST bodies unparsed.

    Twisted parses a whole multipart body into `request.args` (read into memory, with the email
    module) on the server's one thread before daphne hands the request on, and daphne never reads
    `args`: a 200 MB upload held every other request for about 15 s. Twisted's Request takes
    `parsePOSTFormSubmission=False` for this; daphne builds its requests from the module's
    `WebRequest`, so that name gets a subclass that passes it. Django parses the form itself,
    streaming, in the view's thread.
    """
    try:
        from daphne import http_protocol
    except ImportError:  # served by another ASGI server
        return
    if getattr(http_protocol.WebRequest, "leaves_forms_unparsed", False):
        return

    class WebRequest(http_protocol.WebRequest):
        leaves_forms_unparsed = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parsePOSTFormSubmission", False)
            super().__init__(*args, **kwargs)

    http_protocol.WebRequest = WebRequest
