"""A TCP relay: a server of the test's that listens on loopback, reached from pods at another address.

The session's slapd (and other servers) listen on 127.0.0.1 only, never on the machine's external
interfaces. A pod reaches the host at the node's address on the pod bridge (`KubeCluster.pod_gateway`);
`Relay(pod_gateway, port)` listens there on a free port and copies bytes both ways to the server, so a
pod talks to the real server without it listening anywhere else. Nothing is parsed or changed.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

from tests.support.ports import free_port


class Relay:
    def __init__(self, listen_host: str, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.host = listen_host
        self.port = free_port()
        self._target = (target_host, target_port)
        self._listener = socket.create_server((listen_host, self.port))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self) -> None:
        self._listener.settimeout(0.5)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self._target, timeout=10)
        except OSError:
            client.close()
            return
        peers = {client: server, server: client}
        with selectors.DefaultSelector() as selector, client, server:
            for end in peers:
                end.setblocking(False)
                selector.register(end, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.5):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    try:
                        data = ready.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return
                    if not data:
                        return
                    other = peers[ready]
                    with contextlib.suppress(OSError):
                        other.setblocking(True)
                        other.sendall(data)
                        other.setblocking(False)

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)
