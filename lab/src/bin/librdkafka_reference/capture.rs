//! The packet capture on `lo`: an `AF_PACKET` socket whose BPF filter keeps TCP segments with
//! SYN or RST set, each stamped with the kernel's receive time, so connect attempts are
//! counted without trusting librdkafka (needs `CAP_NET_RAW`).

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Res;

/// TCP flag bits, to classify captured segments.
pub const SYN: u8 = 0x02;
/// See [`SYN`].
pub const RST: u8 = 0x04;
/// See [`SYN`].
pub const ACK: u8 = 0x10;

/// A TCP segment with SYN or RST set between two 127.0.0.1 ports, with its kernel timestamp.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Kernel receive time.
    pub at: SystemTime,
    /// Source port.
    pub src: u16,
    /// Destination port.
    pub dst: u16,
    /// TCP flags ([`SYN`], [`RST`], [`ACK`]).
    pub flags: u8,
}

/// A packet capture on the loopback interface: the kernel's view of every connect attempt,
/// including those that never reach user space (refused, dropped SYNs).
pub struct Capture {
    /// The `AF_PACKET` socket.
    fd: OwnedFd,
    /// The loopback interface index (packets from elsewhere are skipped).
    lo: i32,
    /// Segments seen since the current run began.
    pub segments: Mutex<Vec<Segment>>,
    /// Tells the reader thread to end.
    pub stop: AtomicBool,
}

/// `struct tpacket_stats` (linux/if_packet.h), to read the capture's drop count.
#[repr(C)]
#[derive(Default)]
pub struct TpacketStats {
    /// Packets the filter kept.
    pub packets: u32,
    /// Packets lost because the socket buffer was full.
    pub drops: u32,
}

/// `SIOCGSTAMPNS`: the kernel receive timestamp of the last packet read (linux/sockios.h).
const SIOCGSTAMPNS: libc::Ioctl = 0x8907;
/// `PACKET_STATISTICS` (linux/if_packet.h).
const PACKET_STATISTICS: libc::c_int = 6;
/// `PACKET_OUTGOING` (linux/if_packet.h): skipped, so no segment is seen twice.
const PACKET_OUTGOING: u8 = 4;

/// Sets a socket option from a plain value.
fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the given size for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Capture {
    /// Opens the capture socket (filtered in the kernel to TCP segments with SYN or RST), binds
    /// it to `lo` and starts its reader thread.
    pub fn start() -> io::Result<Arc<Capture>> {
        let protocol = (libc::ETH_P_IP as u16).to_be();
        // SAFETY: plain socket(2); the descriptor is owned right below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, protocol.into()) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Classic BPF on the IPv4 header (SOCK_DGRAM: offset 0 is the network header): TCP,
        // not a fragment, SYN or RST set; keep 128 bytes (both headers).
        let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let mut program = [
            op(0x30, 0, 0, 9),      // ldb [9]              protocol
            op(0x15, 0, 6, 6),      // jeq #6 (TCP)         else drop
            op(0x28, 0, 0, 6),      // ldh [6]              flags + fragment offset
            op(0x45, 4, 0, 0x1fff), // jset fragment offset → drop
            op(0xb1, 0, 0, 0),      // ldxb 4*([0]&0xf)     IP header length
            op(0x50, 0, 0, 13),     // ldb [x+13]           TCP flags
            op(0x45, 0, 1, u32::from(SYN | RST)),
            op(0x06, 0, 0, 128), // accept 128 bytes
            op(0x06, 0, 0, 0),   // drop
        ];
        let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)?;
        let buffer: libc::c_int = 8 << 20;
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &buffer).is_err() {
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &buffer)?;
        }
        let poll = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &poll)?;
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int))?;
        // SAFETY: a NUL-terminated string literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) } as i32;
        if lo == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut address: libc::sockaddr_ll = unsafe { zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol;
        address.sll_ifindex = lo;
        // SAFETY: `address` is a valid sockaddr_ll of the given size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let capture = Arc::new(Capture { fd, lo, segments: Mutex::new(Vec::new()), stop: AtomicBool::new(false) });
        let reader = Arc::clone(&capture);
        std::thread::Builder::new().name("capture".into()).spawn(move || reader.read_loop())?;
        Ok(capture)
    }

    /// Reads segments until stopped (the 200 ms receive timeout lets it notice).
    fn read_loop(&self) {
        let mut buffer = [0u8; 256];
        while !self.stop.load(Ordering::Relaxed) {
            // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
            let mut from: libc::sockaddr_ll = unsafe { zeroed() };
            let mut length = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: the buffer and the address are valid for the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut length,
                )
            };
            if n < 0 {
                match io::Error::last_os_error().kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut => continue,
                    _ => break,
                }
            }
            if from.sll_ifindex != self.lo || from.sll_pkttype == PACKET_OUTGOING {
                continue;
            }
            if let Some(segment) = parse(&buffer[..n as usize], self.stamp()) {
                self.segments.lock().unwrap().push(segment);
            }
        }
    }

    /// The kernel's receive time of the packet just read (so a busy reader thread does not
    /// shift segments past the moment metadata arrived); the current time if unavailable.
    fn stamp(&self) -> SystemTime {
        let now = SystemTime::now();
        // SAFETY: timespec is plain data; all-zero is a valid value.
        let mut ts: libc::timespec = unsafe { zeroed() };
        // SAFETY: SIOCGSTAMPNS writes one timespec.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCGSTAMPNS, &mut ts) } == 0 && ts.tv_sec > 0 {
            let at = UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            let skew = now.duration_since(at).unwrap_or_else(|e| e.duration());
            if skew < Duration::from_secs(1) {
                return at;
            }
        }
        now
    }

    /// Packets kept and dropped (socket buffer full) since the last call.
    pub fn statistics(&self) -> Option<TpacketStats> {
        let mut stats = TpacketStats::default();
        let mut length = size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: `stats` is valid for `length` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                (&mut stats as *mut TpacketStats).cast(),
                &mut length,
            )
        };
        (rc == 0).then_some(stats)
    }

    /// Checks that a loopback connect shows up as a SYN and a SYN-ACK.
    pub fn self_test(&self) -> Res<()> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let _stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
        std::thread::sleep(Duration::from_millis(200));
        let segments = self.segments.lock().unwrap();
        let syn = segments.iter().any(|s| s.dst == port && s.flags & (SYN | ACK) == SYN);
        let syn_ack = segments.iter().any(|s| s.src == port && s.flags & (SYN | ACK) == SYN | ACK);
        if syn && syn_ack {
            Ok(())
        } else {
            Err(format!("capture self-test: SYN seen {syn}, SYN-ACK seen {syn_ack}").into())
        }
    }
}

/// Decodes an IPv4 + TCP header; `None` unless both ends are 127.0.0.1.
fn parse(packet: &[u8], at: SystemTime) -> Option<Segment> {
    if packet.len() < 20 || packet[0] >> 4 != 4 || packet[9] != 6 {
        return None;
    }
    let loopback = [127, 0, 0, 1];
    if packet[12..16] != loopback || packet[16..20] != loopback {
        return None;
    }
    let header = usize::from(packet[0] & 0x0f) * 4;
    let tcp = packet.get(header..header + 14)?;
    Some(Segment {
        at,
        src: u16::from_be_bytes([tcp[0], tcp[1]]),
        dst: u16::from_be_bytes([tcp[2], tcp[3]]),
        flags: tcp[13],
    })
}
