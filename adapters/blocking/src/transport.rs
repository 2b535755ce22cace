//! One broker connection on a non-blocking socket, plaintext or TLS (rustls, feature `tls`),
//! behind one type. Every call returns at once: `WouldBlock` means "wait for the poll".

use std::io::{self, Read, Write};

use mio::net::TcpStream;
#[cfg(feature = "tls")]
use stagger::AttemptError;

/// An open connection to a broker. Dropping it closes the socket.
pub(crate) enum Transport {
    Tcp(TcpStream),
    /// TLS over TCP; `bool`: the peer closed its side.
    #[cfg(feature = "tls")]
    Tls(Box<(TcpStream, rustls::ClientConnection, bool)>),
}

impl Transport {
    /// Starts TLS on a connected socket, verifying `host`; the handshake runs as the host
    /// reads and writes.
    #[cfg(feature = "tls")]
    pub(crate) fn tls(tcp: TcpStream, tls: &crate::options::Tls, host: &str) -> Result<Transport, AttemptError> {
        let tls_error = |e: &dyn std::fmt::Display| AttemptError::with_detail(stagger::ErrorKind::Tls, e.to_string());
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| tls_error(&format_args!("{host:?} is not a valid TLS server name: {e}")))?;
        let conn = rustls::ClientConnection::new(tls.config.clone(), name).map_err(|e| tls_error(&e))?;
        Ok(Transport::Tls(Box::new((tcp, conn, false))))
    }

    pub(crate) fn is_tls(&self) -> bool {
        !matches!(self, Transport::Tcp(_))
    }

    /// Whether a TLS handshake is still under way (the connection is not secured yet).
    pub(crate) fn is_handshaking(&self) -> bool {
        match self {
            Transport::Tcp(_) => false,
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => tls.1.is_handshaking(),
        }
    }

    /// Reads what has arrived (decrypted): `Ok(0)` at the end of the stream.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(tcp) => tcp.read(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => loop {
                let (tcp, conn, eof) = &mut **tls;
                match conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    other => return other,
                }
                if *eof {
                    return Ok(0);
                }
                match conn.read_tls(tcp) {
                    Ok(0) => *eof = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
                if let Err(e) = conn.process_new_packets() {
                    // Send rustls's alert if the socket takes it; the error is what matters.
                    let _ = write_records(tcp, conn);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                // The handshake may have something to say back.
                write_records(tcp, conn)?;
            },
        }
    }

    /// Writes as much of `out` as the socket takes now, removing it from `out`; the rest
    /// waits for the next writable event. (rustls takes it all and encrypts it when it can;
    /// only its records wait for the socket.)
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
                let (tcp, conn, _) = &mut **tls;
                conn.writer().write_all(out)?;
                out.clear();
                write_records(tcp, conn)
            }
        }
    }
}

/// Writes rustls's pending records until the socket would block.
#[cfg(feature = "tls")]
fn write_records(tcp: &mut TcpStream, conn: &mut rustls::ClientConnection) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(tcp) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether `e` is rustls refusing the peer (a bad certificate, a protocol violation).
pub(crate) fn is_tls_error(e: &io::Error) -> bool {
    #[cfg(feature = "tls")]
    return e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>());
    #[cfg(not(feature = "tls"))]
    {
        let _ = e;
        false
    }
}
