//! The upgrade request, read before tungstenite sees it: so the bridge can check it before
//! contacting the target, then hand every byte it read to tungstenite ([`Rewind`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The largest request head the bridge reads (a browser's is well under 2 KiB).
const MAX_HEAD: usize = 16 * 1024;

/// As many headers as tungstenite parses (its own limit), so both readings agree.
const MAX_HEADERS: usize = 124;

/// Reads from `stream` until the request head is complete (`\r\n\r\n`); returns everything
/// read, which may include bytes after the head. Fails on EOF or a head over 16 KiB.
pub(crate) async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(2048);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..n]);
        if head[from..].windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "upgrade request head over 16 KiB"));
        }
    }
}

/// The request target (`/path?query`) and every `Origin` header of a complete request head,
/// or `None` if it does not parse (tungstenite would refuse it too).
pub(crate) fn parse_head(head: &[u8]) -> Option<(String, Vec<Vec<u8>>)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    let target = request.path?.to_owned();
    let origins =
        request.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("origin")).map(|h| h.value.to_vec()).collect();
    Some((target, origins))
}

/// A TCP stream that first replays the bytes already read from it.
pub(crate) struct Rewind {
    prefix: Vec<u8>,
    position: usize,
    inner: TcpStream,
}

impl Rewind {
    pub(crate) fn new(prefix: Vec<u8>, inner: TcpStream) -> Self {
        Rewind { prefix, position: 0, inner }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.position < this.prefix.len() {
            let n = (this.prefix.len() - this.position).min(buf.remaining());
            buf.put_slice(&this.prefix[this.position..this.position + n]);
            this.position += n;
            if this.position == this.prefix.len() {
                this.prefix = Vec::new();
                this.position = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_gives_its_target_and_origins() {
        let head = b"GET /x?token=abc HTTP/1.1\r\nHost: h\r\norigin: http://a\r\nOrigin: http://b\r\n\r\n";
        let (target, origins) = parse_head(head).unwrap();
        assert_eq!(target, "/x?token=abc");
        assert_eq!(origins, [b"http://a".to_vec(), b"http://b".to_vec()]);
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap().1.len(), 0);
        assert!(parse_head(b"GARBAGE\r\n\r\n").is_none());
    }
}
