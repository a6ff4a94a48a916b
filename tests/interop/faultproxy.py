"""A fault-injecting TCP proxy for the cluster tests: forwards one loopback port to another, and on
`block()` drops every connection through it and refuses new ones (they are accepted and closed at
once) until `unblock()`. The cluster puts one in front of each broker's inter-broker listener and
one per (source, target) pair of controller voters, so a test can cut a broker off from the rest
of the cluster while clients still reach it directly.

All proxies of a test share one asyncio loop running in a daemon thread (`ProxyHub`).
"""

from __future__ import annotations

import asyncio
import socket
import threading


class Proxy:
    """Forwards connections to `listen_port` on to `target_port` (both on 127.0.0.1)."""

    def __init__(self, hub: "ProxyHub", target_port: int, name: str):
        self.hub = hub
        self.target_port = target_port
        self.name = name
        self.blocked = False
        self.connections: set[asyncio.StreamWriter] = set()
        self.accepted = 0
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            self.refused += 1
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.accepted += 1
        self.connections.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while not self.blocked:
                    data = await src.read(65536)
                    if not data or self.blocked:
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        self.connections.discard(writer)
        self.connections.discard(up_writer)

    def _drop_all(self) -> None:
        for w in list(self.connections):
            transport = w.transport
            if transport is not None:
                transport.abort()
        self.connections.clear()

    def block(self) -> None:
        """Cuts every connection through the proxy and refuses new ones."""
        self.blocked = True
        self.hub.call(self._drop_all)

    def unblock(self) -> None:
        self.blocked = False


class ProxyHub:
    """The event loop the proxies run on."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="faultproxy")
        self.thread.start()
        self.proxies: list[Proxy] = []

    def proxy(self, target_port: int, name: str) -> Proxy:
        p = Proxy(self, target_port, name)
        asyncio.run_coroutine_threadsafe(p._start(), self.loop).result(10)
        self.proxies.append(p)
        return p

    def call(self, fn) -> None:
        done = threading.Event()

        def run():
            try:
                fn()
            finally:
                done.set()

        self.loop.call_soon_threadsafe(run)
        done.wait(10)

    def close(self) -> None:
        for p in self.proxies:
            p.blocked = True

        def stop():
            for p in self.proxies:
                p._drop_all()
                if p._server is not None:
                    p._server.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(10)


def self_test() -> None:
    """Forwards, blocks and unblocks a loopback echo server (used by test_cluster_tools.py)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]

    def echo():
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return

            def serve(conn):
                with conn:
                    while True:
                        d = conn.recv(4096)
                        if not d:
                            return
                        conn.sendall(d)

            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=echo, daemon=True).start()
    hub = ProxyHub()
    try:
        p = hub.proxy(port, "echo")
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(b"hello")
            assert s.recv(5) == b"hello"
            p.block()
            s.settimeout(5)
            try:
                got = s.recv(5)
            except OSError:
                got = b""
            assert got == b"", "a blocked proxy must cut the connection"
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.settimeout(5)
            try:
                s.sendall(b"x")
                got = s.recv(1)
            except OSError:
                got = b""
            assert got == b"", "a blocked proxy must refuse new connections"
        p.unblock()
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(b"again")
            assert s.recv(5) == b"again"
    finally:
        hub.close()
        server.close()
