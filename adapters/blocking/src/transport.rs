//! One broker connection on a non-blocking socket, plaintext or TLS, behind one type so the
//! attempt does not care which. Every call returns at once: `WouldBlock` means "wait for
//! the poll", never an error.

use std::io::{self, Read, Write};

use mio::net::TcpStream;

/// An open connection to a broker. Dropping it closes the socket.
#[derive(Debug)]
pub(crate) enum Transport {
    /// Plain TCP.
    Tcp(TcpStream),
    /// TLS over TCP (boxed: the TLS state is large and this enum moves around).
    #[cfg(feature = "tls")]
    Tls(Box<tls::TlsStream>),
}

impl Transport {
    /// Whether the bytes on this connection are unencrypted.
    pub(crate) fn is_plaintext(&self) -> bool {
        matches!(self, Transport::Tcp(_))
    }

    /// Whether a TLS handshake is still under way (a failure then is a TLS failure).
    pub(crate) fn is_handshaking(&self) -> bool {
        match self {
            Transport::Tcp(_) => false,
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => tls.conn.is_handshaking(),
        }
    }

    /// Reads what has arrived: `Ok(0)` at the end of the stream, `WouldBlock` when nothing
    /// more is there yet.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(tcp) => tcp.read(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => tls.read(buf),
        }
    }

    /// Writes as much of `out` as the socket takes now, removing it from `out`; the rest
    /// waits for the next writable event.
    pub(crate) fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Transport::Tcp(tcp) => {
                while !out.is_empty() {
                    match tcp.write(out) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => drop(out.drain(..n)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => {
                // rustls buffers plaintext (also before the handshake is done) and encrypts
                // it when it can; only the records wait for the socket.
                tls.conn.writer().write_all(out)?;
                out.clear();
                tls.flush_records()
            }
        }
    }
}

#[cfg(feature = "tls")]
pub(crate) mod tls {
    use std::io::{self, Read};
    use std::sync::Arc;

    use mio::net::TcpStream;
    use rustls::pki_types::ServerName;
    use rustls::ClientConnection;
    use stagger::{AttemptError, ErrorKind};

    use crate::options::Tls;

    /// rustls's client state over a non-blocking socket.
    #[derive(Debug)]
    pub(crate) struct TlsStream {
        pub(crate) tcp: TcpStream,
        pub(crate) conn: ClientConnection,
        /// The peer closed its side (read_tls returned 0).
        eof: bool,
    }

    impl TlsStream {
        /// Starts a TLS client on a connected socket to `host` (the name it verifies); the
        /// handshake runs as the host reads and writes.
        pub(crate) fn new(tls: &Tls, tcp: TcpStream, host: &str) -> Result<TlsStream, AttemptError> {
            let tls_error = |e: &dyn std::fmt::Display| AttemptError::with_detail(ErrorKind::Tls, e.to_string());
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| tls_error(&format_args!("{host:?} is not a valid TLS server name: {e}")))?;
            let conn = ClientConnection::new(Arc::clone(&tls.config), name).map_err(|e| tls_error(&e))?;
            Ok(TlsStream { tcp, conn, eof: false })
        }

        /// Decrypted bytes: from rustls's buffer, else from the socket until it would block.
        pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            loop {
                match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    other => return other,
                }
                if self.eof {
                    return Ok(0);
                }
                match self.conn.read_tls(&mut self.tcp) {
                    Ok(0) => self.eof = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
                if let Err(e) = self.conn.process_new_packets() {
                    // Send rustls's alert if the socket takes it; the error is what matters.
                    let _ = self.flush_records();
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                // The handshake may have something to say back.
                self.flush_records()?;
            }
        }

        /// Writes pending TLS records until the socket would block.
        pub(crate) fn flush_records(&mut self) -> io::Result<()> {
            while self.conn.wants_write() {
                match self.conn.write_tls(&mut self.tcp) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
    }

    /// Whether `e` is rustls refusing the peer (a bad certificate, a protocol violation).
    pub(crate) fn is_tls_error(e: &io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
    }
}
