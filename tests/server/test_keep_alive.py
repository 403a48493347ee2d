"""A client's idle connection outlives a slow answer to another task (``veriloop serve``'s keep-alive)."""

from __future__ import annotations

import http.client
import time

from veriloop.server.main import KEEP_ALIVE_S


def test_an_idle_connection_stays_open_past_uvicorns_default(process_servers, tmp_path):
    # uvicorn's default of 5 s closed connections that a busy client was about to reuse (ReadError).
    server = process_servers(f"sqlite:///{tmp_path / 'tasks.sqlite'}")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        assert connection.getresponse().read() and connection.sock is not None
        time.sleep(6)  # idle for longer than uvicorn's default keep-alive
        connection.request("GET", "/healthz")  # on the same socket: a closed one fails here
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    assert KEEP_ALIVE_S > 6
