//! Every number of the ABI in one place — its version, the statuses calls return, the kinds
//! of event and action records, the error kinds and refresh causes inside them — so the C
//! header's `#define`s (generated from this file and `ffi.rs`), the codec and `docs/abi.md`
//! agree. Names carry the `STAGGER_` prefix because C has no namespaces.

/// The ABI's version: the functions, their signatures and the byte layout of batches. Every
/// batch header carries it and a batch of another version is refused; it changes whenever a
/// host written against the previous one could misread anything. Separate from the crate's
/// version, which changes for reasons a host never sees.
pub const STAGGER_ABI_VERSION: u32 = 1;

/// The call succeeded; `out` holds its answer.
pub const STAGGER_OK: i32 = 0;
/// The session config was refused; the error JSON names the field.
pub const STAGGER_ERR_CONFIG: i32 = 1;
/// The event batch is malformed; nothing of it was applied.
pub const STAGGER_ERR_MALFORMED: i32 = 2;
/// No session has this handle (never created, or freed).
pub const STAGGER_ERR_UNKNOWN_HANDLE: i32 = 3;
/// The session panicked in an earlier call and takes no more calls; free it, build another.
pub const STAGGER_ERR_POISONED: i32 = 4;
/// This call panicked (a bug in stagger); its session, if it had one, is now poisoned.
pub const STAGGER_ERR_PANIC: i32 = 5;
/// An argument is unusable: a null `out`, or a null pointer with a non-zero length.
pub const STAGGER_ERR_ARGUMENT: i32 = 6;

/// Event: the connection of a `DIAL` is up (TCP connected). Body: conn `u64`.
pub const STAGGER_EVENT_CONNECTED: u8 = 1;
/// Event: its TLS handshake completed (sessions with `tls` only). Body: conn `u64`.
pub const STAGGER_EVENT_SECURED: u8 = 2;
/// Event: bytes read from a connection, raw. Body: conn `u64`, the bytes (the rest).
pub const STAGGER_EVENT_RECEIVED: u8 = 3;
/// Event: the peer ended a connection. Body: conn `u64`, how `u8` (0 clean, 1 reset).
pub const STAGGER_EVENT_CLOSED: u8 = 4;
/// Event: dialling, reading, writing or TLS failed. Body: conn `u64`, error kind `u8`,
/// Kafka error code `i16`, detail UTF-8 (the rest).
pub const STAGGER_EVENT_IO_ERROR: u8 = 5;
/// Event: the addresses a `RESOLVE` found. Body: lookup `u64`, then per address a family
/// `u8` (4 or 6), its 4 or 16 bytes and the port `u16`, to the end.
pub const STAGGER_EVENT_RESOLVED: u8 = 6;
/// Event: a `RESOLVE` failed. Body: lookup `u64`, error kind `u8`, code `i16`, detail UTF-8.
pub const STAGGER_EVENT_RESOLVE_FAILED: u8 = 7;
/// Event: the SCRAM nonce a `NEED_NONCE` asked for. Body: conn `u64`, 18 random bytes.
pub const STAGGER_EVENT_NONCE: u8 = 8;
/// Event: the OAUTHBEARER token a `NEED_TOKEN` asked for. Body: conn `u64`, token UTF-8.
pub const STAGGER_EVENT_TOKEN: u8 = 9;
/// Event: no token for a `NEED_TOKEN` (fails that attempt). Body: conn `u64`, why UTF-8.
pub const STAGGER_EVENT_TOKEN_FAILED: u8 = 10;
/// Event: ask for fresh metadata. Body: cause `u8`, the troubled broker's `host:port`
/// UTF-8 (the rest; empty for none).
pub const STAGGER_EVENT_REQUEST_REFRESH: u8 = 11;

/// Action: open a connection. Body: conn `u64`, tls `u8` (0/1), address length `u16`,
/// address UTF-8 (`host:port`), TLS server name UTF-8 (the rest; empty without TLS).
pub const STAGGER_ACTION_DIAL: u8 = 1;
/// Action: write bytes on a connection. Body: conn `u64`, the bytes (the rest).
pub const STAGGER_ACTION_SEND: u8 = 2;
/// Action: close a connection and forget it. Body: conn `u64`.
pub const STAGGER_ACTION_CLOSE: u8 = 3;
/// Action: look a name up. Body: lookup `u64`, `host:port` UTF-8 (the rest).
pub const STAGGER_ACTION_RESOLVE: u8 = 4;
/// Action: answer with a `NONCE` event for this connection. Body: conn `u64`.
pub const STAGGER_ACTION_NEED_NONCE: u8 = 5;
/// Action: answer with `TOKEN` (or `TOKEN_FAILED`) for this connection. Body: conn `u64`.
pub const STAGGER_ACTION_NEED_TOKEN: u8 = 6;
/// Action: a refresh succeeded. Body: epoch `u32`, broker index `u32`, its `host:port`.
pub const STAGGER_ACTION_REFRESHED: u8 = 7;
/// Action: a refresh gave up. Body: epoch `u32`, the error as JSON UTF-8 (the rest).
pub const STAGGER_ACTION_REFRESH_FAILED: u8 = 8;
/// Action: the session went back to the seeds (news for the application). Body: empty.
pub const STAGGER_ACTION_REBOOTSTRAPPED: u8 = 9;
/// Action: the epoch a `REQUEST_REFRESH` event was given, one per such event, in order.
/// Body: epoch `u32`.
pub const STAGGER_ACTION_REFRESH_REQUESTED: u8 = 10;

/// Error kind: the host name did not resolve.
pub const STAGGER_ERROR_DNS: u8 = 1;
/// Error kind: the connection was refused.
pub const STAGGER_ERROR_REFUSED: u8 = 2;
/// Error kind: the TCP handshake did not complete in time.
pub const STAGGER_ERROR_CONNECT_TIMEOUT: u8 = 3;
/// Error kind: connected, but no answer in time.
pub const STAGGER_ERROR_RESPONSE_TIMEOUT: u8 = 4;
/// Error kind: the peer closed the connection.
pub const STAGGER_ERROR_CLOSED: u8 = 5;
/// Error kind: bytes that do not decode as Kafka.
pub const STAGGER_ERROR_PROTOCOL: u8 = 6;
/// Error kind: a frame above the maximum frame size.
pub const STAGGER_ERROR_FRAME_TOO_LARGE: u8 = 7;
/// Error kind: a Kafka error code (in the `i16` beside the kind).
pub const STAGGER_ERROR_BROKER: u8 = 8;
/// Error kind: a metadata answer that lists no brokers.
pub const STAGGER_ERROR_NO_BROKERS: u8 = 9;
/// Error kind: the TLS layer refused the peer (a certificate, an alert, bytes that are not
/// TLS); a pass of them ends the refresh. A close during the handshake is `CLOSED`.
pub const STAGGER_ERROR_TLS: u8 = 10;
/// Error kind: SASL authentication failed (fatal for the refresh).
pub const STAGGER_ERROR_AUTHENTICATION: u8 = 11;
/// Error kind: not authorised (fatal for the refresh).
pub const STAGGER_ERROR_AUTHORIZATION: u8 = 12;
/// Error kind: any other I/O failure.
pub const STAGGER_ERROR_IO: u8 = 13;

/// Refresh cause: the application asked, for no reason the policy can read.
pub const STAGGER_CAUSE_REQUESTED: u8 = 0;
/// Refresh cause: there is no metadata yet.
pub const STAGGER_CAUSE_BOOTSTRAP: u8 = 1;
/// Refresh cause: the host's own schedule.
pub const STAGGER_CAUSE_PERIODIC: u8 = 2;
/// Refresh cause: a broker said the metadata is stale (NOT_LEADER_OR_FOLLOWER, …): gentle.
pub const STAGGER_CAUSE_STALE_METADATA: u8 = 3;
/// Refresh cause: a broker refused or reset a connection: gentle (a failover).
pub const STAGGER_CAUSE_CONNECTION_LOST: u8 = 4;
/// Refresh cause: a request to a broker timed out (that broker is tried last).
pub const STAGGER_CAUSE_REQUEST_TIMED_OUT: u8 = 5;

/// The next wake-up of an action batch when nothing is due, ever.
pub const STAGGER_NO_WAKEUP: u64 = 0xFFFF_FFFF_FFFF_FFFF;
/// The default `max_frame_size` of a session's config, in bytes (32 MiB; `docs/abi.md`
/// says why). A plain literal, so that the header's `#define` is one (cffi, which the Python
/// wheel's loader is generated with, takes integer literals only).
pub const STAGGER_DEFAULT_MAX_FRAME_SIZE: u32 = 33_554_432;
