"""Job result files stored in the database in chunks, served from any node."""

import hashlib
import io
import re
from collections.abc import Iterator

from django.db import transaction

from demofarm.reports.conf import get_config
from demofarm.reports.models import ResultChunk, ResultFile
from webfarm.progress.api import Job

# What a result file may be called: it is a URL segment (/jobs/<id>/files/<name>).
RESULT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class ResultWriter(io.RawIOBase):
    """A writable binary stream that lands in ResultChunk rows.

    Wrap it in io.TextIOWrapper for csv; call close() (or use `with`) to mark
    the file complete. A file left incomplete (the job died) is never served.
    """

    def __init__(self, job: Job, name: str, content_type: str) -> None:
        if not RESULT_NAME_RE.fullmatch(name):
            raise ValueError(f"result file name {name!r} is not one a URL can carry")
        super().__init__()
        ResultFile.objects.filter(job=job, name=name).delete()  # a retried job starts over
        self.file = ResultFile.objects.create(job=job, name=name, content_type=content_type)
        self._buffer = bytearray()
        self._chunk_bytes = get_config()["RESULT_CHUNK_BYTES"]
        self._hash = hashlib.sha256()
        self._seq = 0
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._buffer += data
        self._hash.update(data)
        self._size += len(data)
        while len(self._buffer) >= self._chunk_bytes:
            self._store(bytes(self._buffer[: self._chunk_bytes]))
            del self._buffer[: self._chunk_bytes]
        return len(data)

    @property
    def bytes_written(self) -> int:
        return self._size

    def _store(self, data: bytes) -> None:
        ResultChunk.objects.create(file=self.file, seq=self._seq, data=data)
        self._seq += 1

    def close(self) -> None:
        if self.closed:
            return
        if self._buffer:
            self._store(bytes(self._buffer))
            self._buffer.clear()
        with transaction.atomic():
            ResultFile.objects.filter(pk=self.file.pk).update(
                size=self._size, chunks=self._seq, sha256=self._hash.hexdigest(), complete=True
            )
        super().close()


def save_bytes(job: Job, name: str, content_type: str, data: bytes) -> ResultFile:
    with ResultWriter(job, name, content_type) as out:
        out.write(data)
    return ResultFile.objects.get(pk=out.file.pk)


def iter_chunks(file: ResultFile) -> Iterator[bytes]:
    """Yield the file's bytes chunk by chunk, one query each, so memory stays flat."""
    for seq in range(file.chunks):
        data = ResultChunk.objects.filter(file_id=file.pk, seq=seq).values_list("data", flat=True).get()
        yield bytes(data)


def read_all(file: ResultFile) -> bytes:
    return b"".join(iter_chunks(file))
