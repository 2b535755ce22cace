//! What the process holds: descriptors, threads, tokio tasks, resident memory.

use std::fmt;

use stagger_kafka_fixture::netns::HOST_PORT;

/// A snapshot of this process's resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Open file descriptors (`/proc/self/fd`), the test fixture's forwarders included.
    pub fds: usize,
    /// The clients' own connections to the brokers' hosts.
    pub client_sockets: usize,
    /// OS threads, not counting the fixture's forwarder and delay threads.
    pub threads: usize,
    /// Tasks alive on the tokio clients' runtime.
    pub tasks: usize,
    /// Resident set size, in KiB.
    pub rss_kib: u64,
}

impl Resources {
    /// Measures now; `tasks` comes from the runtime the clients run on.
    pub fn now(tasks: usize) -> Resources {
        // The fixture's threads are named `forward-…` and `delay-…` (their children inherit it).
        let fixture = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.flatten()
                    .filter(|t| {
                        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                        comm.starts_with("forward") || comm.starts_with("delay-")
                    })
                    .count()
            })
            .unwrap_or(0);
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Resources {
            fds: std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0),
            client_sockets: stagger_test_faults::sockets::sockets_to(&[HOST_PORT]),
            threads: (field("Threads:") as usize).saturating_sub(fixture),
            tasks,
            rss_kib: field("VmRSS:"),
        }
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = self.rss_kib as f64 / 1024.0;
        write!(
            f,
            "{} client sockets, {} fds, {} threads, {} tasks, {mib:.1} MiB RSS",
            self.client_sockets, self.fds, self.threads, self.tasks
        )
    }
}
