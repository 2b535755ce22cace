//! A counting TCP forwarder in front of one broker, on 127.0.0.1.
//!
//! Every byte is passed on unchanged; on the way the forwarder cuts both directions into
//! Kafka frames (4-byte big-endian size, then the body) and reads each request's header
//! (int16 api_key, int16 api_version, int32 correlation id, int16-length client id). For
//! every request it records when it passed, its API and whether it came from the fleet (its
//! client id), and matches it with its response (Kafka answers a connection's requests in
//! order), so it also knows how long the broker took: the time between the request passing
//! and the end of its response passing. Connections accepted are counted too.
//!
//! Over TLS ([`Framing::Tls`]) the frames are encrypted: the forwarder then cuts both
//! directions into TLS records (1-byte content type, 2-byte version, 2-byte length, the
//! payload) and records, per connection, when the ClientHello passed, when the broker's
//! first handshake record (its ServerHello) came back, when the client's first encrypted
//! record passed (TLS 1.3's client Finished: sent only once it has verified the broker's whole
//! first flight; the dummy ChangeCipherSpec of middlebox compatibility may come earlier and
//! is not counted), and when the broker first sent anything after that (the handshake is
//! established: a session ticket or the first answer). That much is visible in the clear;
//! requests are not.
//!
//! A forwarder can be made to refuse ([`Forwarder::refuse`]): it closes its listener (new
//! connections are refused by the kernel, as a dead broker's are) and every connection it
//! carries; [`Forwarder::accept_again`] binds the same port again.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Kafka API key of Metadata.
pub const METADATA: i16 = 3;
/// Kafka API key of ApiVersions.
pub const API_VERSIONS: i16 = 18;

/// Bytes of a request body kept for the header: api key, version, correlation id, client id.
const HEADER_BYTES: usize = 8 + 2 + 64;

/// One request that passed the forwarder.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// When its last byte passed, µs since the run's time base.
    pub at_us: u64,
    /// Its API key.
    pub api: i16,
    /// Whether its client id is the fleet's.
    pub ours: bool,
    /// Until its response's last byte passed back (µs), if it was answered.
    pub took_us: Option<u64>,
}

/// The TLS handshake of one connection as it passed a [`Framing::Tls`] forwarder (µs since
/// the time base).
#[derive(Clone, Copy, Debug, Default)]
pub struct Handshake {
    /// The client's ClientHello (its first handshake record) passed.
    pub hello_us: u64,
    /// The broker's first handshake record (ServerHello) passed back: the broker process
    /// did the key exchange (a stopped broker never gets here).
    pub answered_us: Option<u64>,
    /// The client's first encrypted record (its Finished) passed: it had verified the
    /// broker's whole first flight.
    pub finished_us: Option<u64>,
    /// The broker sent something after the client's Finished: established.
    pub established_us: Option<u64>,
}

/// What one forwarder saw.
#[derive(Debug, Default)]
pub struct Log {
    /// Every request, in the order it was answered or (unanswered) as the connection ended;
    /// at [`Forwarder::take`] also those still unanswered on open connections, such as a
    /// stopped broker's kept connection a client abandoned but still holds (none for
    /// [`Framing::Tls`]: its requests are encrypted).
    pub requests: Vec<Request>,
    /// When each connection was accepted (µs since the time base).
    pub accepted_us: Vec<u64>,
    /// How long each TCP connect from the forwarder to the broker took (µs).
    pub upstream_connect_us: Vec<u64>,
    /// Every TLS handshake begun ([`Framing::Tls`]), logged once established (a kept
    /// connection may stay open long after) or else as its connection ends.
    pub handshakes: Vec<Handshake>,
}

/// What a forwarder reads of the bytes it passes on.
#[derive(Clone, Debug)]
pub enum Framing {
    /// Plain Kafka frames; requests whose client id is this one are the fleet's.
    Kafka(String),
    /// TLS records (the Kafka frames inside are encrypted).
    Tls,
}

/// A running forwarder. Its tasks end when the runtime they were spawned on shuts down.
#[derive(Debug)]
pub struct Forwarder {
    address: SocketAddr,
    log: Arc<Mutex<Log>>,
    waiting: Waiting,
    open: watch::Sender<bool>,
}

/// Each open connection's requests not yet answered.
type Waiting = Arc<Mutex<Vec<Weak<Mutex<VecDeque<Request>>>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Forwarder {
    /// Listens on `bind` and forwards each connection to `target` (which may not be
    /// listening yet: a connection is then closed at once). `bind` should lie outside the
    /// ephemeral port range, so no outgoing connection can take it while the forwarder
    /// refuses.
    pub async fn start(
        bind: SocketAddr,
        target: SocketAddr,
        base: Instant,
        framing: Framing,
    ) -> std::io::Result<Forwarder> {
        let listener = TcpListener::bind(bind).await?;
        let address = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Log::default()));
        let (open, opened) = watch::channel(true);
        let waiting = Waiting::default();
        let ctx = Arc::new(Ctx { target, base, framing, log: log.clone(), waiting: waiting.clone() });
        tokio::spawn(serve(listener, address, ctx, opened));
        Ok(Forwarder { address, log, waiting, open })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops listening and closes every connection it carries.
    pub fn refuse(&self) {
        self.open.send_replace(false);
    }

    /// Listens again (on the same port) after [`Forwarder::refuse`].
    pub fn accept_again(&self) {
        self.open.send_replace(true);
    }

    /// Takes everything logged so far, with the requests still unanswered on open
    /// connections (logged again, with their arrival time, when their connection ends).
    pub fn take(&self) -> Log {
        let mut log = std::mem::take(&mut *lock(&self.log));
        let mut waiting = lock(&self.waiting);
        waiting.retain(|w| w.strong_count() > 0);
        for queue in waiting.iter().filter_map(Weak::upgrade) {
            log.requests.extend(lock(&queue).iter().copied());
        }
        log
    }
}

struct Ctx {
    target: SocketAddr,
    base: Instant,
    framing: Framing,
    log: Arc<Mutex<Log>>,
    waiting: Waiting,
}

impl Ctx {
    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }
}

async fn serve(mut listener: TcpListener, address: SocketAddr, ctx: Arc<Ctx>, mut open: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                lock(&ctx.log).accepted_us.push(ctx.now_us());
                tokio::spawn(carry(client, ctx.clone(), open.clone()));
            }
            changed = open.changed() => {
                if changed.is_err() {
                    return;
                }
                if !*open.borrow_and_update() {
                    drop(listener);
                    // Closed: wait until told to listen again, then bind the same port.
                    loop {
                        if open.changed().await.is_err() {
                            return;
                        }
                        if *open.borrow_and_update() {
                            break;
                        }
                    }
                    listener = loop {
                        match TcpListener::bind(address).await {
                            Ok(l) => break l,
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    };
                }
            }
        }
    }
}

/// One connection: connect upstream, then pass bytes both ways, logging what the framing
/// shows, until either side closes or the forwarder is told to refuse.
async fn carry(client: TcpStream, ctx: Arc<Ctx>, open: watch::Receiver<bool>) {
    let _ = client.set_nodelay(true);
    let started = Instant::now();
    let Ok(server) = TcpStream::connect(ctx.target).await else { return };
    let _ = server.set_nodelay(true);
    lock(&ctx.log).upstream_connect_us.push(started.elapsed().as_micros() as u64);
    match &ctx.framing {
        Framing::Kafka(client_id) => carry_kafka(client, server, &ctx, client_id.as_bytes(), open).await,
        Framing::Tls => carry_tls(client, server, &ctx, open).await,
    }
}

/// Resolves when the forwarder is told to refuse (or is gone).
async fn refused(mut open: watch::Receiver<bool>) {
    loop {
        if !*open.borrow_and_update() || open.changed().await.is_err() {
            return;
        }
    }
}

/// Passes Kafka frames both ways, logging each request and when its answer passed back.
async fn carry_kafka(client: TcpStream, server: TcpStream, ctx: &Ctx, fleet_id: &[u8], open: watch::Receiver<bool>) {
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    // Requests sent and not yet answered, oldest first.
    let pending: Arc<Mutex<VecDeque<Request>>> = Arc::default();
    lock(&ctx.waiting).push(Arc::downgrade(&pending));
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut frames = Frames::default();
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            frames.feed(&buf[..n], |header| {
                let api = i16::from_be_bytes([
                    header.first().copied().unwrap_or(0xff),
                    header.get(1).copied().unwrap_or(0xff),
                ]);
                let ours = client_id(header).is_some_and(|id| id == fleet_id);
                lock(&pending).push_back(Request { at_us: ctx.now_us(), api, ours, took_us: None });
            });
            if server_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut frames = Frames::default();
        loop {
            let n = match server_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            // The response's end is logged as it leaves for the client (after the write).
            let mut done = 0;
            frames.feed(&buf[..n], |_| done += 1);
            if client_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
            let now = ctx.now_us();
            for _ in 0..done {
                if let Some(mut request) = lock(&pending).pop_front() {
                    request.took_us = Some(now.saturating_sub(request.at_us));
                    lock(&ctx.log).requests.push(request);
                }
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        () = refused(open) => {}
    }
    // Requests never answered are logged too (a hung broker's).
    let unanswered: Vec<Request> = lock(&pending).drain(..).collect();
    lock(&ctx.log).requests.extend(unanswered);
}

/// TLS record content types (RFC 8446 §5.1).
const CHANGE_CIPHER_SPEC: u8 = 20;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// Passes TLS records both ways, logging the handshake's steps (see the module docs).
async fn carry_tls(client: TcpStream, server: TcpStream, ctx: &Ctx, open: watch::Receiver<bool>) {
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    // Both directions run in this one task (the select below), and a record is logged
    // before it is passed on: the client's Finished is logged after every record of the
    // broker's first flight, which it needed to write it.
    let handshake: Mutex<Option<Handshake>> = Mutex::new(None);
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut records = Records::default();
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            records.feed(&buf[..n], |kind| {
                let mut h = lock(&handshake);
                match (&mut *h, kind) {
                    (None, HANDSHAKE) => *h = Some(Handshake { hello_us: ctx.now_us(), ..Handshake::default() }),
                    // Middlebox compatibility's dummy ChangeCipherSpec may pass before the
                    // broker's whole first flight did: it is not the Finished.
                    (Some(_), CHANGE_CIPHER_SPEC) => {}
                    (Some(h), APPLICATION_DATA) if h.answered_us.is_some() && h.finished_us.is_none() => {
                        h.finished_us = Some(ctx.now_us());
                    }
                    _ => {}
                }
            });
            if server_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut records = Records::default();
        loop {
            let n = match server_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            records.feed(&buf[..n], |kind| {
                let mut h = lock(&handshake);
                if let Some(h) = h.as_mut() {
                    if h.answered_us.is_none() && kind == HANDSHAKE {
                        h.answered_us = Some(ctx.now_us());
                    } else if h.finished_us.is_some() && h.established_us.is_none() {
                        h.established_us = Some(ctx.now_us());
                        lock(&ctx.log).handshakes.push(*h);
                    }
                }
            });
            if client_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        () = refused(open) => {}
    }
    // One never established is logged as its connection ends.
    let unestablished = lock(&handshake).take().filter(|h| h.established_us.is_none());
    if let Some(h) = unestablished {
        lock(&ctx.log).handshakes.push(h);
    }
}

/// Cuts a byte stream into TLS records.
#[derive(Default)]
struct Records {
    /// The current record's header (type, version, length) read so far.
    head: [u8; 5],
    head_got: usize,
    /// Payload bytes of the current record still to come (when `head_got == 5`).
    left: usize,
}

impl Records {
    /// Feeds `data`; calls `on_record(content type)` for every record completed.
    fn feed(&mut self, mut data: &[u8], mut on_record: impl FnMut(u8)) {
        while !data.is_empty() {
            if self.head_got < 5 {
                let take = (5 - self.head_got).min(data.len());
                self.head[self.head_got..self.head_got + take].copy_from_slice(&data[..take]);
                self.head_got += take;
                data = &data[take..];
                if self.head_got == 5 {
                    self.left = u16::from_be_bytes([self.head[3], self.head[4]]) as usize;
                    if self.left == 0 {
                        on_record(self.head[0]);
                        self.head_got = 0;
                    }
                }
                continue;
            }
            let take = self.left.min(data.len());
            self.left -= take;
            data = &data[take..];
            if self.left == 0 {
                on_record(self.head[0]);
                self.head_got = 0;
            }
        }
    }
}

/// The client id of a request header (api key, version, correlation id, then an int16
/// length and the bytes), if the kept header holds all of it.
fn client_id(header: &[u8]) -> Option<&[u8]> {
    let len = i16::from_be_bytes([*header.get(8)?, *header.get(9)?]);
    if len < 0 {
        return None;
    }
    header.get(10..10 + len as usize)
}

/// Cuts a byte stream into Kafka frames.
#[derive(Default)]
struct Frames {
    /// Bytes of the current size prefix read so far.
    size: [u8; 4],
    size_got: usize,
    /// Body bytes of the current frame still to come (when `size_got == 4`).
    left: usize,
    /// The first [`HEADER_BYTES`] of the current body.
    header: Vec<u8>,
}

impl Frames {
    /// Feeds `data`; calls `on_frame(first bytes of the body)` for every frame completed.
    fn feed(&mut self, mut data: &[u8], mut on_frame: impl FnMut(&[u8])) {
        while !data.is_empty() {
            if self.size_got < 4 {
                let take = (4 - self.size_got).min(data.len());
                self.size[self.size_got..self.size_got + take].copy_from_slice(&data[..take]);
                self.size_got += take;
                data = &data[take..];
                if self.size_got == 4 {
                    self.left = u32::from_be_bytes(self.size) as usize;
                    self.header.clear();
                    if self.left == 0 {
                        on_frame(&self.header);
                        self.size_got = 0;
                    }
                }
                continue;
            }
            let take = self.left.min(data.len());
            let keep = HEADER_BYTES.saturating_sub(self.header.len()).min(take);
            self.header.extend_from_slice(&data[..keep]);
            self.left -= take;
            data = &data[take..];
            if self.left == 0 {
                on_frame(&self.header);
                self.size_got = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_cut_across_reads() {
        let mut stream = Vec::new();
        for (api, id) in [(18i16, "fleet"), (3, "other")] {
            let mut body = Vec::new();
            body.extend_from_slice(&api.to_be_bytes());
            body.extend_from_slice(&0i16.to_be_bytes());
            body.extend_from_slice(&7i32.to_be_bytes());
            body.extend_from_slice(&(id.len() as i16).to_be_bytes());
            body.extend_from_slice(id.as_bytes());
            body.extend_from_slice(&[0; 300]);
            stream.extend_from_slice(&(body.len() as u32).to_be_bytes());
            stream.extend_from_slice(&body);
        }
        let mut seen = Vec::new();
        let mut frames = Frames::default();
        for chunk in stream.chunks(3) {
            frames.feed(chunk, |h| seen.push((i16::from_be_bytes([h[0], h[1]]), client_id(h).map(<[u8]>::to_vec))));
        }
        assert_eq!(seen, vec![(18, Some(b"fleet".to_vec())), (3, Some(b"other".to_vec()))]);
    }

    /// A Metadata request to a server that never answers, on a connection still open, is in
    /// the log taken: a stopped broker's kept connection a client abandoned but holds.
    #[tokio::test]
    async fn a_request_unanswered_on_an_open_connection_is_taken_as_unanswered() {
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = silent.local_addr().unwrap();
        let holder = tokio::spawn(async move {
            let (conn, _) = silent.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(conn);
        });
        let forwarder =
            Forwarder::start("127.0.0.1:0".parse().unwrap(), target, Instant::now(), Framing::Kafka("fleet".into()))
                .await
                .unwrap();
        let mut client = TcpStream::connect(forwarder.address()).await.unwrap();
        let mut body = Vec::new();
        body.extend_from_slice(&3i16.to_be_bytes());
        body.extend_from_slice(&12i16.to_be_bytes());
        body.extend_from_slice(&1i32.to_be_bytes());
        body.extend_from_slice(&5i16.to_be_bytes());
        body.extend_from_slice(b"fleet");
        client.write_all(&(body.len() as u32).to_be_bytes()).await.unwrap();
        client.write_all(&body).await.unwrap();
        let mut requests = Vec::new();
        for _ in 0..200 {
            requests = forwarder.take().requests;
            if !requests.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let [request] = requests[..] else { panic!("one request: {requests:?}") };
        assert!(request.ours && request.api == 3 && request.took_us.is_none(), "{request:?}");
        holder.abort();
    }

    #[test]
    fn records_are_cut_across_reads() {
        let mut stream = Vec::new();
        for (kind, len) in
            [(HANDSHAKE, 517usize), (CHANGE_CIPHER_SPEC, 1), (APPLICATION_DATA, 0), (APPLICATION_DATA, 70)]
        {
            stream.extend_from_slice(&[kind, 3, 3]);
            stream.extend_from_slice(&(len as u16).to_be_bytes());
            stream.extend(std::iter::repeat_n(0xAB, len));
        }
        for chunk_len in [1, 4, 5, 7, 1000] {
            let mut seen = Vec::new();
            let mut records = Records::default();
            for chunk in stream.chunks(chunk_len) {
                records.feed(chunk, |kind| seen.push(kind));
            }
            assert_eq!(seen, vec![HANDSHAKE, CHANGE_CIPHER_SPEC, APPLICATION_DATA, APPLICATION_DATA], "{chunk_len}");
        }
    }
}
