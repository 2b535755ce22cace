//! The brokers' own account of the fleet's requests, for a listener whose frames a forwarder
//! cannot read (SASL_SSL): each broker's request log (`scripts/kafka.sh --request-log`).
//!
//! At DEBUG, Kafka's `kafka.request.logger` writes one line per request it completed, which
//! `testing/kafka/log4j2.properties` prefixes with the epoch milliseconds of the line:
//!
//! ```text
//! 1760000000123 Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":3,
//!     "requestApiVersion":12,"correlationId":2,"clientId":"fleet-real",...},"request":{...},
//!     "response":{...},"connection":"...","totalTimeMs":0.412,"requestQueueTimeMs":0.05,
//!     "localTimeMs":0.2,...,"listener":"SASL_SSL",...}
//! ```
//!
//! (one line). A request is logged when its answer has been sent — or when its connection
//! closes with the answer still in flight — so the line's time is its end, and the request
//! arrived `totalTimeMs` earlier (the broker's time from reading it to sending its answer:
//! its own work and queueing, without the network). Requests the SASL authenticator answers
//! before a connection is authenticated (the first ApiVersions, SaslHandshake,
//! SaslAuthenticate) never reach the request channel and are not logged; neither is a
//! request whose connection closed before the broker had its answer ready, nor anything a
//! stopped broker has not read yet.
//!
//! The line's time is the broker's wall clock and the forwarders' time base is this
//! process's monotonic clock; they are lined up by the wall-clock time taken with the time
//! base (one machine, one clock: good to a millisecond or two over a run, where the peak
//! window is 100 ms).

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::forwarder::Request;

/// The text Kafka's request logger puts before each request's JSON.
const COMPLETED: &str = "Completed request:";

/// One broker's request log, read as it grows.
#[derive(Debug)]
pub struct RequestLog {
    path: PathBuf,
    /// Bytes of whole lines read so far.
    offset: u64,
    /// The wall-clock time of the forwarders' time base, µs since the epoch.
    base_wall_us: i128,
}

/// One logged request.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// When the line was logged, ms since the epoch.
    pub logged_ms: u64,
    pub api: i16,
    pub client_id: String,
    /// The listener it came through (`SASL_SSL`, `PLAINTEXT`, ...).
    pub listener: String,
    /// The broker's time from reading it to sending its answer (ms).
    pub total_ms: f64,
}

impl RequestLog {
    /// The log at `path` (which may not exist yet); `base_wall` is the wall-clock time of the
    /// forwarders' time base.
    pub fn new(path: PathBuf, base_wall: SystemTime) -> RequestLog {
        let base_wall_us = base_wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i128);
        RequestLog { path, offset: 0, base_wall_us }
    }

    /// The requests of `client_id` through `listener` logged since the last call, as the
    /// forwarders log theirs (`at_us` when the request arrived, `took_us` the broker's time).
    /// A line still being written is left for the next call.
    pub fn take(&mut self, client_id: &str, listener: &str) -> std::io::Result<Vec<Request>> {
        let mut out = Vec::new();
        let file = match File::open(&self.path) {
            Ok(file) => file,
            // Nothing logged yet.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        let mut reader = BufReader::with_capacity(1 << 20, file);
        reader.seek(SeekFrom::Start(self.offset))?;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            self.offset += n as u64;
            // Most lines are other clients' (the calibration's, the brokers' own): look for
            // the client id before parsing any JSON.
            let Ok(text) = std::str::from_utf8(&line) else { continue };
            if !text.contains(client_id) {
                continue;
            }
            let Some(entry) = parse(text) else { continue };
            if entry.client_id == client_id && entry.listener == listener {
                out.push(self.request(&entry));
            }
        }
        Ok(out)
    }

    /// `entry` in the forwarders' terms.
    fn request(&self, entry: &Entry) -> Request {
        let took_us = (entry.total_ms * 1e3).round().max(0.0) as u64;
        let arrived_us = entry.logged_ms as i128 * 1000 - took_us as i128 - self.base_wall_us;
        Request { at_us: arrived_us.max(0) as u64, api: entry.api, ours: true, took_us: Some(took_us) }
    }
}

/// One line of the log, if it is a completed request.
pub fn parse(line: &str) -> Option<Entry> {
    let (ms, rest) = line.trim_end().split_once(' ')?;
    let json = rest.strip_prefix(COMPLETED)?;
    let v: Value = serde_json::from_str(json).ok()?;
    let header = &v["requestHeader"];
    Some(Entry {
        logged_ms: ms.parse().ok()?,
        api: i16::try_from(header["requestApiKey"].as_i64()?).ok()?,
        client_id: header["clientId"].as_str()?.to_owned(),
        listener: v["listener"].as_str()?.to_owned(),
        total_ms: v["totalTimeMs"].as_f64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"1760000000123 Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":3,"requestApiVersion":12,"correlationId":2,"clientId":"fleet-real"},"request":{"topics":null},"response":{"throttleTimeMs":0},"connection":"127.0.0.1:20003-127.0.0.1:40000-1-7","totalTimeMs":2.5,"requestQueueTimeMs":0.1,"localTimeMs":0.3,"listener":"SASL_SSL","securityProtocol":"SASL_SSL"}"#;

    #[test]
    fn a_completed_request_is_read() {
        let entry = parse(LINE).expect("parsed");
        assert_eq!(
            entry,
            Entry {
                logged_ms: 1_760_000_000_123,
                api: 3,
                client_id: "fleet-real".into(),
                listener: "SASL_SSL".into(),
                total_ms: 2.5
            }
        );
        assert_eq!(parse("1760000000123 Processor got uncaught exception."), None);
        assert_eq!(parse("not a line"), None);
    }

    #[test]
    fn requests_are_taken_once_and_a_partial_line_waits() {
        let path = std::env::temp_dir().join(format!("fleet-real-request-log-{}", std::process::id()));
        let other = LINE.replace("fleet-real", "fleet-probe");
        let plain = LINE.replace(r#""listener":"SASL_SSL""#, r#""listener":"PLAINTEXT""#);
        std::fs::write(&path, format!("{LINE}\n{other}\n{plain}\n{}", &LINE[..40])).unwrap();
        // The time base 100 ms before the line was logged.
        let base = UNIX_EPOCH + std::time::Duration::from_millis(1_760_000_000_023);
        let mut log = RequestLog::new(path.clone(), base);
        let taken = log.take("fleet-real", "SASL_SSL").unwrap();
        assert_eq!(taken.len(), 1);
        // Logged 100 ms after the base, after 2.5 ms at the broker.
        assert_eq!((taken[0].at_us, taken[0].took_us, taken[0].api), (97_500, Some(2_500), 3));
        assert!(log.take("fleet-real", "SASL_SSL").unwrap().is_empty());
        // The partial line completes.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&LINE[40..]);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        assert_eq!(log.take("fleet-real", "SASL_SSL").unwrap().len(), 1);
        std::fs::remove_file(&path).unwrap();
    }
}
