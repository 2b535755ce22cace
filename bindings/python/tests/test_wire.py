"""The batch codec (stagger._wire), byte for byte as docs/abi.md describes it, and its numbers
against the native library's header."""

from __future__ import annotations

import random
import struct

import pytest

import stagger
from stagger import _abi, _wire
from stagger._wire import (
    BatchError,
    Cause,
    Close,
    Closed,
    Connected,
    Dial,
    ErrorKind,
    IoError,
    NeedNonce,
    NeedToken,
    Nonce,
    Rebootstrapped,
    Received,
    Refreshed,
    RefreshFailed,
    RefreshRequested,
    RequestRefresh,
    Resolve,
    Resolved,
    ResolveFailed,
    Secured,
    Send,
    Token,
    TokenFailed,
    decode_actions,
    encode_events,
)


def test_every_number_of_the_codec_is_the_one_the_native_header_defines():
    checks = {
        "STAGGER_ABI_VERSION": _wire.ABI_VERSION,
        "STAGGER_NO_WAKEUP": _wire.NO_WAKEUP,
        "STAGGER_DEFAULT_MAX_FRAME_SIZE": _wire.DEFAULT_MAX_FRAME_SIZE,
    }
    for kind in ErrorKind:
        checks[f"STAGGER_ERROR_{kind.name}"] = kind.value
    for cause in Cause:
        checks[f"STAGGER_CAUSE_{cause.name}"] = cause.value
    for event in _wire._EventKind:
        checks[f"STAGGER_EVENT_{event.name}"] = event.value
    for action in _wire._ActionKind:
        checks[f"STAGGER_ACTION_{action.name}"] = action.value
    for name, value in checks.items():
        assert _abi.native_constant(name) == value, name
    assert stagger.abi_version() == stagger.ABI_VERSION == 1


def test_the_abi_version_check_refuses_a_library_of_another_version():
    _abi._check_version(1)
    with pytest.raises(stagger.AbiVersionError, match="ABI version 2"):
        _abi._check_version(2)


def record(kind: int, body: bytes) -> bytes:
    return struct.pack("<BI", kind, len(body)) + body


def test_events_are_encoded_as_the_event_table_says():
    batch = encode_events(
        [
            Connected(1),
            Secured(1),
            Received(1, b"\x00\x01"),
            Closed(2, reset=True),
            IoError(3, ErrorKind.REFUSED, "no", code=0),
            IoError(3, ErrorKind.BROKER, "", code=35),
            Resolved(4, (("10.0.0.1", 9092), ("::1", 9093))),
            ResolveFailed(5, ErrorKind.DNS, "nx"),
            Nonce(6, bytes(range(18))),
            Token(7, "tok"),
            TokenFailed(7, "why"),
            RequestRefresh(Cause.STALE_METADATA, "b1:9092"),
        ]
    )
    c = lambda n: struct.pack("<Q", n)  # noqa: E731
    expected = struct.pack("<HHI", 1, 0, 12) + b"".join(
        [
            record(1, c(1)),
            record(2, c(1)),
            record(3, c(1) + b"\x00\x01"),
            record(4, c(2) + b"\x01"),
            record(5, c(3) + b"\x02" + struct.pack("<h", 0) + b"no"),
            record(5, c(3) + b"\x08" + struct.pack("<h", 35)),
            record(6, c(4) + b"\x04\x0a\x00\x00\x01" + struct.pack("<H", 9092) + b"\x06" + bytes(15) + b"\x01" + struct.pack("<H", 9093)),
            record(7, c(5) + b"\x01" + struct.pack("<h", 0) + b"nx"),
            record(8, c(6) + bytes(range(18))),
            record(9, c(7) + b"tok"),
            record(10, c(7) + b"why"),
            record(11, b"\x03b1:9092"),
        ]
    )
    assert batch == expected


def test_a_detail_longer_than_1024_bytes_is_cut_on_a_character_boundary():
    batch = encode_events([IoError(1, ErrorKind.IO, "é" * 600)])
    body = batch[8 + 5 + 11 :]
    assert len(body) <= 1024 and body.decode() == "é" * 512


def action_batch(records, wakeup=_wire.NO_WAKEUP, version=1, flags=0, count=None) -> bytes:
    count = len(records) if count is None else count
    return struct.pack("<HHIQ", version, flags, count, wakeup) + b"".join(records)


def every_action() -> bytes:
    c = lambda n: struct.pack("<Q", n)  # noqa: E731
    address = b"b1:9093"
    return action_batch(
        [
            record(1, c(1) + b"\x01" + struct.pack("<H", len(address)) + address + b"b1.example"),
            record(1, c(2) + b"\x00" + struct.pack("<H", len(address)) + address),
            record(2, c(1) + b"\x00\x00\x00\x05hello"),
            record(3, c(2)),
            record(4, c(9) + b"name:9092"),
            record(5, c(1)),
            record(6, c(1)),
            record(7, struct.pack("<II", 3, 1) + b"b1:9093"),
            record(8, struct.pack("<I", 4) + b'{"message": "gave up"}'),
            record(9, b""),
            record(10, struct.pack("<I", 5)),
        ],
        wakeup=123_456_789,
    )


def test_actions_are_decoded_as_the_action_table_says():
    actions, wakeup = decode_actions(every_action())
    assert wakeup == 123_456_789
    assert actions == [
        Dial(1, "b1:9093", "b1.example"),
        Dial(2, "b1:9093", None),
        Send(1, b"\x00\x00\x00\x05hello"),
        Close(2),
        Resolve(9, "name:9092"),
        NeedNonce(1),
        NeedToken(1),
        Refreshed(3, 1, "b1:9093"),
        RefreshFailed(4, '{"message": "gave up"}'),
        Rebootstrapped(),
        RefreshRequested(5),
    ]
    assert actions[0].tls and not actions[1].tls
    assert decode_actions(action_batch([])).next_wakeup_ns is None


@pytest.mark.parametrize(
    "batch, says",
    [
        (b"", "the version needs 2 bytes"),
        (action_batch([], version=2), "version 2"),
        (action_batch([], flags=1), "flags"),
        (action_batch([], count=1), "action 0: the kind needs 1 bytes"),
        (action_batch([record(42, b"")]), "unknown action kind 42"),
        (action_batch([struct.pack("<BI", 3, 100) + bytes(8)]), "the body needs 100 bytes"),
        (action_batch([record(3, bytes(9))]), "1 bytes after the body's last field"),
        (action_batch([record(3, bytes(7))]), "conn needs 8 bytes"),
        (action_batch([record(4, bytes(8) + b"\xff\xfe")]), "not UTF-8"),
        (action_batch([record(1, bytes(8) + b"\x02\x00\x00")]), "tls is 2"),
        (action_batch([record(1, bytes(8) + b"\x00\x09\x00ab")]), "the address needs 9 bytes"),
        (action_batch([record(9, b"")]) + b"\x00", "1 bytes after the last action"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_malformed_action_batch_is_refused_with_where_and_why(batch, says):
    with pytest.raises(BatchError, match=says):
        decode_actions(batch)


def test_any_damage_to_an_action_batch_is_a_clean_batch_error_or_a_batch():
    good = every_action()
    rng = random.Random(24)
    for _ in range(3000):
        damaged = bytearray(good)
        what = rng.randrange(3)
        if what == 0:
            damaged = damaged[: rng.randrange(len(good))]
        elif what == 1:
            for _ in range(rng.randrange(1, 4)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        else:
            damaged[rng.randrange(len(damaged)) :] = bytes(rng.randrange(64))
        try:
            decode_actions(bytes(damaged))
        except BatchError:
            pass


def test_reprs_never_show_tokens_nonces_or_the_bytes_sent_and_received():
    secret = "s3cr3t-value"
    shown = " ".join(
        repr(x)
        for x in [
            Token(1, secret),
            Nonce(1, secret.encode()[:12] + bytes(6)),
            Send(1, secret.encode()),
            Received(1, secret.encode()),
            stagger.RawEvent(3, secret.encode()),
        ]
    )
    assert "s3cr3t" not in shown and "<redacted>" in shown and "12 bytes" in shown


def test_a_nonce_of_the_wrong_size_is_refused_before_the_library_sees_it():
    with pytest.raises(BatchError, match="18 bytes"):
        encode_events([Nonce(1, b"short")])


def test_the_plain_reader_decodes_what_the_checked_one_does_and_refuses_the_rest():
    good = every_action()
    rng = random.Random(25)
    plain = 0
    for i in range(4000):
        damaged = bytearray(good)
        if i:
            what = rng.randrange(3)
            if what == 0:
                damaged = damaged[: rng.randrange(len(good))]
            elif what == 1:
                for _ in range(rng.randrange(1, 4)):
                    damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            else:
                damaged[rng.randrange(len(damaged)) :] = bytes(rng.randrange(64))
        data = bytes(damaged)
        try:
            checked = _wire._decode_checked(data)
        except BatchError:
            checked = None
        try:
            fast = _wire._decode_plain(data)
        except Exception:
            continue
        assert fast == checked, data
        plain += 1
    assert plain > 100
