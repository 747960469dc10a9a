"""A real S3-compatible server on 127.0.0.1 for the object-store tests and the multi-writer bench (moto's
ThreadedMotoServer, from PyPI: it serves the S3 REST API over HTTP, in a thread of this process)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow.fs as pafs

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    server: object
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the server (credentials are moto's dummies)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, **CREDENTIALS}

    def create_bucket(self, bucket: str) -> None:
        host = self.endpoint.removeprefix("http://")
        fs = pafs.S3FileSystem(endpoint_override=host, scheme="http", access_key="testing", secret_key="testing",
                               region="us-east-1", allow_bucket_creation=True)
        fs.create_dir(bucket)

    def stop(self) -> None:
        self.server.stop()


def reach(server: S3Server, monkeypatch, cache: str | None = None, bucket: str | None = None) -> str | None:
    """This process reaches ``server`` through its environment (``monkeypatch.setenv``); ``cache``: the
    ``COLLAPSEWATCH_CACHE`` to use (None keeps the session's); with ``bucket``, a fresh prefix of it as an s3:// URL."""
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    if cache is not None:
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", cache)
    return f"s3://{bucket}/{uuid.uuid4().hex[:8]}" if bucket else None


def start() -> S3Server:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return S3Server(server, f"http://{host}:{port}")


@contextmanager
def serving(bucket: str) -> Iterator[S3Server]:
    """A server with ``bucket`` created, stopped on exit (a test module's fixture: ``with serving(B) as s: yield s``)."""
    server = start()
    try:
        server.create_bucket(bucket)
        yield server
    finally:
        server.stop()


def module_server(bucket: str):
    """A module-scoped pytest fixture serving ``bucket`` (``s3 = s3server.module_server(BUCKET)`` in a test module)."""
    import pytest

    @pytest.fixture(scope="module")
    def s3() -> Iterator[S3Server]:
        with serving(bucket) as server:
            yield server

    return s3


if __name__ == "__main__":  # a server in a process of its own: prints its endpoint, ends with its parent
    import os
    import time

    parent = os.getppid()
    s = start()
    print(s.endpoint, flush=True)
    while os.getppid() == parent:  # a test process killed before its teardown leaves no server behind
        time.sleep(0.5)
