"""An upload's size, judged before its body is read.

Django reads a multipart body whole (spooling files to disk) before a view or
form sees it, so a form's size check answers only after the last byte
arrived. Here a body that says it is too long (Content-Length) is refused
without reading it, and one that does not say (chunked) is cut off by an
upload handler at the first chunk past the limit.
"""

from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest

# Room for the multipart framing and the form's other fields around the file.
FRAMING = 64 * 1024


class SizeLimit(FileUploadHandler):
    """Stops reading an upload once one of its files passes `limit` bytes,
    and marks the request (`upload_too_large`)."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.request.upload_too_large = True  # type: ignore[union-attr]
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def declared_too_large(request: HttpRequest, limit: int) -> bool:
    """Whether the body says it is longer than an upload of `limit` bytes may be."""
    declared = request.META.get("CONTENT_LENGTH", "")
    return isinstance(declared, str) and declared.isdigit() and int(declared) > limit + FRAMING


def limit_upload(request: HttpRequest, limit: int) -> None:
    """Read this request's files no further than `limit` bytes each (call it
    before anything reads request.POST or request.FILES)."""
    request.upload_handlers.insert(0, SizeLimit(request, limit))


def cut_off(request: HttpRequest) -> bool:
    return bool(getattr(request, "upload_too_large", False))
