//! Kafka's framing: every request and response is a 4-byte big-endian length, then that many
//! bytes.
//!
//! This is where hostile sizes are stopped: a length prefix above the maximum (or negative)
//! is refused as soon as its four bytes arrive, and the receive buffer only ever grows by the
//! bytes actually received, so a 2 GiB prefix costs four bytes, not 2 GiB.

use alloc::format;
use alloc::string::{String, ToString};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{AttemptError, ErrorKind};

/// Size of the length prefix in front of every frame.
const PREFIX_LEN: usize = 4;

/// Builds one outgoing frame: `write` appends the message (header and body), and the length
/// prefix in front is filled in afterwards, so the message is encoded exactly once.
pub(crate) fn encode_frame(write: impl FnOnce(&mut BytesMut) -> Result<(), String>) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    buf.put_i32(0); // placeholder, patched below
    write(&mut buf)?;
    let len = i32::try_from(buf.len() - PREFIX_LEN).map_err(|_| "request larger than 2 GiB".to_string())?;
    buf[..PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// Reassembles incoming bytes, split however the transport likes, into whole frames.
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    /// Bytes received and not yet handed out as a frame.
    buf: BytesMut,
    /// Largest frame body accepted.
    max_frame_size: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames whose body exceeds `max_frame_size` bytes.
    pub(crate) fn new(max_frame_size: usize) -> Self {
        FrameDecoder { buf: BytesMut::new(), max_frame_size }
    }

    /// Appends received bytes; nothing is allocated beyond what they need.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame body (without its prefix), `Ok(None)` while one is still
    /// incomplete, or `FrameTooLarge` as soon as a bad length prefix is visible.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>, AttemptError> {
        let Some(len) = self.announced_len()? else { return Ok(None) };
        if self.buf.len() - PREFIX_LEN < len {
            return Ok(None);
        }
        self.buf.advance(PREFIX_LEN);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Describes a partially received frame, for the error when the peer hangs up mid-way.
    pub(crate) fn partial(&self) -> Option<String> {
        if self.buf.is_empty() {
            return None;
        }
        Some(match self.announced_len() {
            Ok(Some(len)) => format!("{} of {} bytes received", self.buf.len() - PREFIX_LEN, len),
            Ok(None) => format!("{} of the {PREFIX_LEN} length-prefix bytes received", self.buf.len()),
            Err(bad_prefix) => bad_prefix.detail.into_owned(),
        })
    }

    /// How many received bytes wait for the rest of their frame (at most the maximum frame
    /// size plus the prefix and the last piece pushed).
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops everything buffered: once the exchange has its outcome, more bytes mean nothing.
    pub(crate) fn clear(&mut self) {
        self.buf = BytesMut::new();
    }

    /// The body length announced by the prefix, once all four bytes are here, checked
    /// against the maximum before anyone can act on it.
    fn announced_len(&self) -> Result<Option<usize>, AttemptError> {
        let Some(&[a, b, c, d]) = self.buf.get(..PREFIX_LEN) else { return Ok(None) };
        let len = i32::from_be_bytes([a, b, c, d]);
        let too_large = |detail: String| AttemptError::with_detail(ErrorKind::FrameTooLarge, detail);
        let len = usize::try_from(len).map_err(|_| too_large(format!("negative length prefix {len}")))?;
        if len > self.max_frame_size {
            return Err(too_large(format!(
                "length prefix of {len} bytes exceeds the maximum frame size of {} bytes",
                self.max_frame_size
            )));
        }
        Ok(Some(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> FrameDecoder {
        FrameDecoder::new(1024)
    }

    #[test]
    fn encode_frame_prefixes_the_length() {
        let frame = encode_frame(|buf| {
            buf.put_slice(b"hello");
            Ok(())
        })
        .unwrap();
        assert_eq!(&frame[..], b"\0\0\0\x05hello");
    }

    #[test]
    fn encode_frame_passes_errors_through() {
        assert_eq!(encode_frame(|_| Err("nope".to_string())).unwrap_err(), "nope");
    }

    #[test]
    fn frames_split_anywhere_are_reassembled() {
        let mut d = decoder();
        let wire = b"\0\0\0\x03abc\0\0\0\0\0\0\0\x01z";
        let mut frames = alloc::vec::Vec::new();
        for byte in wire {
            d.push(&[*byte]);
            while let Some(frame) = d.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, [&b"abc"[..], b"", b"z"]);
        assert_eq!(d.partial(), None);
    }

    #[test]
    fn oversize_prefix_fails_without_waiting_for_the_body() {
        let mut d = decoder();
        d.push(&0x7fff_ffffu32.to_be_bytes());
        let err = d.next_frame().unwrap_err();
        assert_eq!(err.kind, ErrorKind::FrameTooLarge);
        assert!(err.detail.contains("2147483647"), "{err}");
        // Nothing proportional to the announced size was reserved.
        assert!(d.buf.capacity() < 1024, "capacity {}", d.buf.capacity());
    }

    #[test]
    fn limit_is_inclusive() {
        let mut d = FrameDecoder::new(3);
        d.push(b"\0\0\0\x03abc");
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"abc"[..]));
        d.push(b"\0\0\0\x04");
        assert_eq!(d.next_frame().unwrap_err().kind, ErrorKind::FrameTooLarge);
    }

    #[test]
    fn negative_prefix_is_too_large() {
        let mut d = decoder();
        d.push(&(-1i32).to_be_bytes());
        let err = d.next_frame().unwrap_err();
        assert_eq!(err.kind, ErrorKind::FrameTooLarge);
        assert!(err.detail.contains("negative"), "{err}");
    }

    #[test]
    fn partial_describes_what_is_missing() {
        let mut d = decoder();
        d.push(b"\0\0");
        assert_eq!(d.partial().as_deref(), Some("2 of the 4 length-prefix bytes received"));
        d.push(b"\0\x09ab");
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.partial().as_deref(), Some("2 of 9 bytes received"));
        d.clear();
        assert_eq!(d.partial(), None);
    }
}
