//! Socket accounting through `/proc`: which of this process's open file descriptors are TCP
//! connections *to* given ports. Counting only those excludes the runtime's own descriptors
//! and the mock brokers' accepted sockets (which live in this process too and close on
//! their own schedule), so "our sockets are closed" is checked exactly, without waiting.

use std::collections::HashSet;
use std::fs;

/// Open TCP sockets of this process whose remote port is one of `ports`.
pub fn sockets_to(ports: &[u16]) -> usize {
    let mut ours = HashSet::new();
    for entry in fs::read_dir("/proc/self/fd").expect("/proc/self/fd").flatten() {
        if let Ok(target) = fs::read_link(entry.path()) {
            let target = target.to_string_lossy();
            if let Some(inode) = target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                if let Ok(inode) = inode.parse::<u64>() {
                    ours.insert(inode);
                }
            }
        }
    }
    let mut count = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 {
                continue;
            }
            let remote_port = fields[2].rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            let inode = fields[9].parse::<u64>().ok();
            if let (Some(port), Some(inode)) = (remote_port, inode) {
                if inode != 0 && ports.contains(&port) && ours.contains(&inode) {
                    count += 1;
                }
            }
        }
    }
    count
}

/// All open file descriptors of this process (for information in failure messages).
pub fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}
