//! Measures what the simulator's knobs stand for, on the real cluster: the loopback round
//! trip, what the forwarder adds, each broker's time per ApiVersions and Metadata request at
//! low load, and how many Metadata (and ApiVersions) requests a broker answers per second
//! when it is saturated — alone, and with every broker saturated at once (they share the
//! machine's cores).
//!
//! The requests are the fleet's own: one stagger exchange is run on a raw connection and its
//! two request frames (ApiVersions, then Metadata) are kept and replayed, each answer read
//! whole before the next request on that connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::broker_cpu::{all_threads_cpu, cpu_us};
use stagger::kafka::{ExchangeConfig, KafkaAttempt};
use stagger::{AttemptId, Input};
use stagger_lab::fleet_file::{Burst, Idle, Spread, ThreadCpu};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The two request frames of a stagger exchange, ready to replay.
#[derive(Clone, Debug)]
pub struct Frames {
    pub api_versions: Vec<u8>,
    pub metadata: Vec<u8>,
    /// Size of the Metadata response (bytes, with its size prefix).
    pub metadata_response: usize,
}

/// Runs one exchange against `broker` and keeps its request frames.
pub async fn capture(broker: SocketAddr, client_id: &str) -> Res<Frames> {
    let exchange = ExchangeConfig { client_id: client_id.to_owned(), ..ExchangeConfig::default() };
    let mut kafka = KafkaAttempt::new(AttemptId(1), &exchange, None, true);
    kafka.handle_connected();
    let mut tcp = TcpStream::connect(broker).await?;
    tcp.set_nodelay(true)?;
    let mut sent = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut received_since_last_send = 0usize;
    loop {
        while let Some(frame) = kafka.poll_transmit() {
            tcp.write_all(&frame).await?;
            sent.push(frame.to_vec());
            received_since_last_send = 0;
        }
        while let Some(input) = kafka.poll_input() {
            match input {
                Input::Response { .. } => {
                    let metadata_response = received_since_last_send;
                    return match sent.as_slice() {
                        [api, meta, ..] => {
                            Ok(Frames { api_versions: api.clone(), metadata: meta.clone(), metadata_response })
                        }
                        _ => Err(format!("expected 2 request frames, the exchange sent {}", sent.len()).into()),
                    };
                }
                Input::Failed { error, .. } => return Err(format!("capture exchange failed: {error}").into()),
                _ => {}
            }
        }
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            kafka.handle_closed();
        } else {
            received_since_last_send += n;
            kafka.handle_bytes(&buf[..n]);
        }
    }
}

/// The completion times the tasks of `set` report, gathered by target (`targets` of them).
pub async fn by_target(mut set: JoinSet<Res<(usize, Vec<Instant>)>>, targets: usize) -> Res<Vec<Vec<Instant>>> {
    let mut by_target: Vec<Vec<Instant>> = vec![Vec::new(); targets];
    while let Some(joined) = set.join_next().await {
        let (ti, done) = joined??;
        by_target[ti].extend(done);
    }
    Ok(by_target)
}

/// Writes `frame` and reads one whole response frame.
async fn round_trip(tcp: &mut TcpStream, frame: &[u8], buf: &mut Vec<u8>) -> Res<()> {
    tcp.write_all(frame).await?;
    let mut size = [0u8; 4];
    tcp.read_exact(&mut size).await?;
    let len = u32::from_be_bytes(size) as usize;
    if len > 64 << 20 {
        return Err(format!("response of {len} bytes").into());
    }
    buf.resize(len, 0);
    tcp.read_exact(&mut buf[..len]).await?;
    Ok(())
}

/// `count` TCP connects and `count` ApiVersions + Metadata round trips to `target`.
pub async fn idle(target: SocketAddr, frames: &Frames, count: usize, gap: Duration) -> Res<Idle> {
    let mut connect = Vec::with_capacity(count);
    for _ in 0..count.min(200) {
        let t = Instant::now();
        let tcp = TcpStream::connect(target).await?;
        connect.push(t.elapsed().as_secs_f64() * 1e6);
        drop(tcp);
        tokio::time::sleep(gap).await;
    }
    let mut tcp = TcpStream::connect(target).await?;
    tcp.set_nodelay(true)?;
    let mut buf = Vec::new();
    let (mut api, mut meta) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for _ in 0..count {
        let t = Instant::now();
        round_trip(&mut tcp, &frames.api_versions, &mut buf).await?;
        api.push(t.elapsed().as_secs_f64() * 1e6);
        tokio::time::sleep(gap).await;
        let t = Instant::now();
        round_trip(&mut tcp, &frames.metadata, &mut buf).await?;
        meta.push(t.elapsed().as_secs_f64() * 1e6);
        tokio::time::sleep(gap).await;
    }
    Ok(Idle { connect: Spread::of(connect), api_versions: Spread::of(api), metadata: Spread::of(meta) })
}

/// [`burst_once`] `reps` times; the median per target, and the median CPU per request of
/// the broker processes `pids` and of this process.
pub async fn burst(
    targets: &[SocketAddr],
    frame: &[u8],
    api: &'static str,
    connections: usize,
    requests_per_target: usize,
    reps: usize,
    pids: &[i32],
) -> Res<Burst> {
    let mut repetitions = Vec::new();
    let mut one = Burst::default();
    let mut cpu = CpuPerRequest::new(pids);
    for _ in 0..reps.max(1) {
        let before = cpu.now();
        one = burst_once(targets, frame, api, connections, requests_per_target).await?;
        // Each loop's first request, untimed, is answered too.
        cpu.record(before, (one.requests_per_target + connections) * targets.len());
        repetitions.push(one.per_second.clone());
    }
    let per_second = median_per_target(&repetitions, targets.len());
    Ok(cpu.into_burst(Burst {
        service_us: per_second.iter().map(|r| if *r > 0.0 { 1e6 / r } else { 0.0 }).collect(),
        per_second,
        repetitions,
        ..one
    }))
}

/// The median of `v` (the upper one of an even count), `None` if it is empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// CPU per answered request, per repetition: of the broker processes `pids` (`/proc`), the
/// same by the kind of thread that spent it, and of this process.
struct CpuPerRequest<'a> {
    pids: &'a [i32],
    brokers: Vec<f64>,
    threads: Vec<ThreadCpu>,
    own: Vec<f64>,
}

/// The CPU counters [`CpuPerRequest`] reads at each end of a repetition.
type Counters = (Option<u64>, ThreadCpu, Option<u64>);

impl<'a> CpuPerRequest<'a> {
    fn new(pids: &'a [i32]) -> Self {
        CpuPerRequest { pids, brokers: Vec::new(), threads: Vec::new(), own: Vec::new() }
    }

    /// The brokers' (all, and by thread kind) and this process's CPU so far (µs).
    fn now(&self) -> Counters {
        (self.pids.iter().map(|p| cpu_us(&p.to_string())).sum(), all_threads_cpu(self.pids), cpu_us("self"))
    }

    /// One repetition since `before`, which answered `answered` requests.
    fn record(&mut self, before: Counters, answered: usize) {
        let answered = answered.max(1) as f64;
        let after = self.now();
        if let (Some(b), Some(a)) = (before.0, after.0) {
            self.brokers.push(a.saturating_sub(b) as f64 / answered);
        }
        self.threads.push(after.1.since(&before.1, 1.0 / answered));
        if let (Some(b), Some(a)) = (before.2, after.2) {
            self.own.push(a.saturating_sub(b) as f64 / answered);
        }
    }

    /// What the repetitions measured, into `burst`.
    fn into_burst(self, burst: Burst) -> Burst {
        Burst {
            brokers_cpu_per_request_us: median(self.brokers),
            own_cpu_per_request_us: median(self.own),
            brokers_threads_cpu_per_request_us: (!self.threads.is_empty())
                .then(|| ThreadCpu::each(&self.threads, |v| median(v).unwrap_or(0.0))),
            ..burst
        }
    }
}

async fn burst_once(
    targets: &[SocketAddr],
    frame: &[u8],
    api: &'static str,
    connections: usize,
    requests_per_target: usize,
) -> Res<Burst> {
    let mut per_second = Vec::new();
    let mut set = JoinSet::new();
    let per_conn = requests_per_target.div_ceil(connections);
    for (ti, &target) in targets.iter().enumerate() {
        for _ in 0..connections {
            let frame = frame.to_vec();
            set.spawn(async move {
                let mut tcp = TcpStream::connect(target).await?;
                tcp.set_nodelay(true)?;
                let mut buf = Vec::new();
                // The first request opens the connection's path (not timed).
                round_trip(&mut tcp, &frame, &mut buf).await?;
                let mut done = Vec::with_capacity(per_conn);
                for _ in 0..per_conn {
                    round_trip(&mut tcp, &frame, &mut buf).await?;
                    done.push(Instant::now());
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((ti, done))
            });
        }
    }
    for done in &mut by_target(set, targets.len()).await? {
        per_second.push(steady_rate(done));
    }
    Ok(Burst {
        targets: targets.iter().map(ToString::to_string).collect(),
        api: api.into(),
        connections,
        requests_per_target: per_conn * connections,
        service_us: per_second.iter().map(|r| if *r > 0.0 { 1e6 / r } else { 0.0 }).collect(),
        per_second,
        repetitions: Vec::new(),
        ..Burst::default()
    })
}

/// Fresh-connection attempts per second: `connections` closed loops per target, each loop
/// connecting, asking ApiVersions then Metadata, and closing, `attempts_per_target` in all
/// per target; the median over `reps` repetitions (what an attempt costs a saturated broker
/// when it cannot reuse a kept connection), with the median CPU per attempt of the broker
/// processes `pids` and of this process.
pub async fn churn(
    targets: &[SocketAddr],
    frames: &Frames,
    connections: usize,
    attempts_per_target: usize,
    reps: usize,
    pids: &[i32],
) -> Res<Burst> {
    let per_loop = attempts_per_target.div_ceil(connections);
    let mut repetitions = Vec::new();
    let mut cpu = CpuPerRequest::new(pids);
    for _ in 0..reps.max(1) {
        let before = cpu.now();
        let mut set = JoinSet::new();
        for (ti, &target) in targets.iter().enumerate() {
            for _ in 0..connections {
                let frames = frames.clone();
                set.spawn(async move {
                    let mut buf = Vec::new();
                    let mut done = Vec::with_capacity(per_loop);
                    for _ in 0..per_loop {
                        let mut tcp = TcpStream::connect(target).await?;
                        tcp.set_nodelay(true)?;
                        round_trip(&mut tcp, &frames.api_versions, &mut buf).await?;
                        round_trip(&mut tcp, &frames.metadata, &mut buf).await?;
                        drop(tcp);
                        done.push(Instant::now());
                    }
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((ti, done))
                });
            }
        }
        let rates = by_target(set, targets.len()).await?.iter_mut().map(|done| steady_rate(done)).collect();
        repetitions.push(rates);
        cpu.record(before, per_loop * connections * targets.len());
    }
    let per_second = median_per_target(&repetitions, targets.len());
    Ok(cpu.into_burst(Burst {
        targets: targets.iter().map(ToString::to_string).collect(),
        api: "connect+api_versions+metadata".into(),
        connections,
        requests_per_target: per_loop * connections,
        service_us: per_second.iter().map(|r| if *r > 0.0 { 1e6 / r } else { 0.0 }).collect(),
        per_second,
        repetitions,
        ..Burst::default()
    }))
}

/// Completions per second in the steady middle of `done` (sorted here): the first and last
/// 10 % are dropped (ramp-up, stragglers).
pub fn steady_rate(done: &mut [Instant]) -> f64 {
    done.sort();
    let n = done.len();
    if n < 2 {
        return 0.0;
    }
    let (a, b) = (n / 10, n - n / 10 - 1);
    let secs = done[b].duration_since(done[a]).as_secs_f64();
    if secs > 0.0 {
        (b - a) as f64 / secs
    } else {
        0.0
    }
}

/// Per target, the median over `repetitions` (each one value per target).
pub fn median_per_target(repetitions: &[Vec<f64>], targets: usize) -> Vec<f64> {
    (0..targets)
        .map(|t| {
            let mut v: Vec<f64> = repetitions.iter().map(|r| r[t]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect()
}

/// Warms every broker's request path up (the JIT compiles it), `count` Metadata requests each.
pub async fn warm(targets: &[SocketAddr], frames: &Frames, count: usize) -> Res<()> {
    burst_once(targets, &frames.metadata, "metadata", 8, count).await?;
    burst_once(targets, &frames.api_versions, "api_versions", 8, count / 2).await?;
    Ok(())
}
