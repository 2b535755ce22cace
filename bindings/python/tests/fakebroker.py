"""A fake Kafka broker for the tests: answers ApiVersions (v0..v3) and Metadata v12, the
version it advertises, encoded byte by byte after Kafka's message schemas
(ApiVersionsResponse.json, MetadataResponse.json). The session decodes the answers with the
kafka-protocol crate, so a wrong byte fails the tests that read the metadata back.

It runs on threads of its own, so asyncio and blocking callers alike can use it, and it can
also answer without sockets (``FakeBroker.respond``) for the sans-IO tests. Modes:
``answer`` (the default), ``hang`` (accepts, reads, never answers: a stopped broker) and
``close`` (accepts and closes at once); ``delay`` seconds pass before each answer.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

API_VERSIONS = 18
METADATA = 3
METADATA_VERSION = 12


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_string(s: Optional[str]) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def compact_int32s(values: Sequence[int]) -> bytes:
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


NO_TAGS = b"\x00"


@dataclass
class Cluster:
    """What the fake says: brokers (node id, host, port) and topics (name, partitions,
    replication factor)."""

    brokers: List[Tuple[int, str, int]]
    topics: List[Tuple[str, int, int]] = field(default_factory=list)
    cluster_id: str = "fake-cluster"
    controller_id: int = 1

    def metadata_body(self) -> bytes:
        """MetadataResponse v12 (flexible): throttle, brokers, cluster id, controller,
        topics (each with its id, partitions and authorised operations), no tagged fields."""
        out = bytearray(struct.pack(">i", 0))
        out += uvarint(len(self.brokers) + 1)
        for node, host, port in self.brokers:
            out += struct.pack(">i", node) + compact_string(host) + struct.pack(">i", port)
            out += compact_string(None) + NO_TAGS  # rack
        out += compact_string(self.cluster_id) + struct.pack(">i", self.controller_id)
        out += uvarint(len(self.topics) + 1)
        nodes = [b[0] for b in self.brokers]
        for index, (name, partitions, replication) in enumerate(self.topics):
            out += struct.pack(">h", 0) + compact_string(name)
            out += uuid.UUID(int=index + 1).bytes + b"\x00"  # topic id, is_internal
            out += uvarint(partitions + 1)
            for p in range(partitions):
                replicas = [nodes[(p + r) % len(nodes)] for r in range(min(replication, len(nodes)))]
                out += struct.pack(">hiii", 0, p, replicas[0], 5)  # error, index, leader, epoch
                out += compact_int32s(replicas) + compact_int32s(replicas) + compact_int32s([])
                out += NO_TAGS
            out += struct.pack(">i", -2147483648) + NO_TAGS  # authorised operations: not asked
        out += NO_TAGS
        return bytes(out)


def api_versions_body(version: int) -> bytes:
    """ApiVersionsResponse: error 0, the APIs (ApiVersions 0..3, Metadata 12..12), throttle."""
    apis = [(API_VERSIONS, 0, 3), (METADATA, METADATA_VERSION, METADATA_VERSION)]
    if version >= 3:
        out = bytearray(struct.pack(">h", 0)) + uvarint(len(apis) + 1)
        for key, low, high in apis:
            out += struct.pack(">hhh", key, low, high) + NO_TAGS
        return bytes(out + struct.pack(">i", 0) + NO_TAGS)
    out = bytearray(struct.pack(">hi", 0, len(apis)))
    for key, low, high in apis:
        out += struct.pack(">hhh", key, low, high)
    if version >= 1:
        out += struct.pack(">i", 0)
    return bytes(out)


class FakeBroker:
    """One fake broker on 127.0.0.1 (see the module doc)."""

    def __init__(self, cluster: Optional[Cluster] = None, mode: str = "answer", delay: float = 0.0) -> None:
        self.mode = mode
        self.delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.cluster = cluster or Cluster(brokers=[(1, "127.0.0.1", self.port)])
        self._metadata: Optional[bytes] = None
        self.lock = threading.Lock()
        self.accepted = 0
        self.closed = 0
        self.requests: Dict[int, int] = {}
        self.changed = threading.Condition(self.lock)
        self._conns: List[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept, name=f"fake-broker-{self.port}", daemon=True)
        self._thread.start()

    # --- the protocol, without sockets ------------------------------------------------------

    def respond(self, frame: bytes) -> Optional[bytes]:
        """The response (length prefix included) to one request frame (without its prefix)."""
        api_key, version, correlation = struct.unpack_from(">hhi", frame)
        with self.changed:
            self.requests[api_key] = self.requests.get(api_key, 0) + 1
            self.changed.notify_all()
        if api_key == API_VERSIONS:
            # ApiVersions answers with a v0 header whatever its version.
            payload = struct.pack(">i", correlation) + api_versions_body(version)
        elif api_key == METADATA and version == METADATA_VERSION:
            if self._metadata is None:
                self._metadata = self.cluster.metadata_body()
            payload = struct.pack(">i", correlation) + NO_TAGS + self._metadata
        else:
            return None
        return struct.pack(">i", len(payload)) + payload

    # --- sockets ----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self.changed:
                self.accepted += 1
                self._conns.append(conn)
                self.changed.notify_all()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = bytearray()
        try:
            if self.mode == "close":
                return
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                if self.mode == "hang":
                    continue
                buf += chunk
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4 : 4 + size])
                    del buf[: 4 + size]
                    answer = self.respond(frame)
                    if answer is None:
                        return
                    if self.delay:
                        time.sleep(self.delay)
                    conn.sendall(answer)
        except OSError:
            return
        finally:
            conn.close()
            with self.changed:
                self.closed += 1
                self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = 10.0) -> bool:
        """Waits (bounded) until ``predicate(self)`` holds; says whether it did."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self), timeout)

    def close(self) -> None:
        self._stop = True
        self._listener.close()
        with self.lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "FakeBroker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def frames(data: bytes) -> Tuple[List[bytes], bytes]:
    """Splits length-prefixed frames off ``data``; returns them and the rest."""
    out = []
    while len(data) >= 4:
        (size,) = struct.unpack_from(">i", data)
        if len(data) < 4 + size:
            break
        out.append(data[4 : 4 + size])
        data = data[4 + size :]
    return out, data
