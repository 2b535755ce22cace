//! Command-line flags for every policy knob, turned into a validated `RefreshConfig`.

use std::time::Duration;

use clap::Args;
use stagger::{Growth, RefreshConfig, Stagger};

/// Policy flags shared by `metadata` and `demo`.
#[derive(Args, Clone, Debug, Default)]
pub struct PolicyArgs {
    /// Start from a preset: adaptive (default), sequential, all-at-once, staggered.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Fixed stagger delay between attempts (e.g. 250ms); default: adaptive.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stagger: Option<Duration>,
    /// Attempts started at once when the refresh begins.
    #[arg(long, value_name = "N")]
    pub initial: Option<u32>,
    /// Throttle: at most N attempts in flight.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,
    /// Attempts per stagger tick: `linear:N` or `exponential:F` (e.g. linear:1, exponential:2).
    #[arg(long, value_name = "SPEC", value_parser = parse_growth)]
    pub growth: Option<Growth>,
    /// Fraction of each stagger delay that is randomised, 0..1.
    #[arg(long, value_name = "FRACTION")]
    pub jitter: Option<f64>,
    /// Timeout of one attempt (connect + ApiVersions + Metadata), e.g. 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub attempt_timeout: Option<Duration>,
    /// Deadline of the whole refresh, e.g. 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub deadline: Option<Duration>,
    /// Extra passes over the brokers after every broker failed.
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// Seed of the core's PRNG (jitter, broker order): same seed, same decisions.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Adaptive: suspect a connected, silent broker after N × its handshake time.
    #[arg(long, value_name = "N")]
    pub multiple: Option<u32>,
    /// Adaptive: lower bound on every wait (e.g. 2ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub floor: Option<Duration>,
    /// Adaptive: upper bound on every wait (e.g. 2s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub ceiling: Option<Duration>,
    /// Adaptive: wait before a handshake when nothing is known (e.g. 250ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub cold: Option<Duration>,
    /// Adaptive: an answering broker is hedged after N × what an answer normally takes.
    #[arg(long, value_name = "N")]
    pub patience: Option<u32>,
    /// Adaptive: quantile of recent answer times used as "normal" (0..1).
    #[arg(long, value_name = "Q")]
    pub quantile: Option<f64>,
    /// Do not start the next broker at once after a fast failure; wait for the stagger tick.
    #[arg(long)]
    pub no_next_on_failure: bool,
    /// With the throttle full, wait instead of replacing the newest silent suspect.
    #[arg(long)]
    pub no_replace_when_full: bool,
    /// Keep silent attempts running when another broker starts answering.
    #[arg(long)]
    pub no_cancel_silent: bool,
    /// Start all of a stagger tick's attempts at once instead of one by one, delay / N apart.
    #[arg(long)]
    pub no_spread: bool,
}

impl PolicyArgs {
    /// The config these flags describe, validated (the error names the bad flag's field).
    pub fn to_config(&self) -> Result<RefreshConfig, String> {
        let mut c = match &self.preset {
            None => RefreshConfig::default(),
            Some(name) => RefreshConfig::preset(name).ok_or_else(|| {
                format!("unknown preset {name:?}; choose one of: {}", RefreshConfig::PRESETS.join(", "))
            })?,
        };
        if let Some(d) = self.stagger {
            c.fanout.stagger = Stagger::Fixed(d);
        }
        if let Some(n) = self.initial {
            c.fanout.initial = n;
        }
        if let Some(n) = self.max_in_flight {
            c.fanout.max_in_flight = n;
            if self.initial.is_none() {
                c.fanout.initial = c.fanout.initial.min(n.max(1));
            }
        }
        if let Some(g) = self.growth {
            c.fanout.growth = g;
        }
        if let Some(j) = self.jitter {
            c.fanout.jitter = j;
        }
        if let Some(d) = self.attempt_timeout {
            c.attempt_timeout = d;
        }
        if let Some(d) = self.deadline {
            c.deadline = d;
        }
        if let Some(n) = self.retries {
            c.retry.retries = n;
        }
        self.apply_adaptive(&mut c)?;
        c.fanout.next_on_failure &= !self.no_next_on_failure;
        c.fanout.replace_when_full &= !self.no_replace_when_full;
        c.fanout.cancel_silent_on_answer &= !self.no_cancel_silent;
        c.fanout.spread_ticks &= !self.no_spread;
        c.seed = self.seed.unwrap_or_else(seed_from_clock);
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

impl PolicyArgs {
    /// The adaptive-stagger flags; an error if any is given with a fixed stagger, where they
    /// would silently do nothing.
    fn apply_adaptive(&self, c: &mut RefreshConfig) -> Result<(), String> {
        let given = [
            ("--multiple", self.multiple.is_some()),
            ("--floor", self.floor.is_some()),
            ("--ceiling", self.ceiling.is_some()),
            ("--cold", self.cold.is_some()),
            ("--patience", self.patience.is_some()),
            ("--quantile", self.quantile.is_some()),
        ];
        let Stagger::Adaptive(a) = &mut c.fanout.stagger else {
            return match given.iter().find(|(_, set)| *set) {
                Some((flag, _)) => {
                    Err(format!("{flag} tunes the adaptive stagger, but this policy's stagger is fixed"))
                }
                None => Ok(()),
            };
        };
        if let Some(n) = self.multiple {
            a.multiple = n;
        }
        if let Some(d) = self.floor {
            a.floor = d;
        }
        if let Some(d) = self.ceiling {
            a.ceiling = d;
        }
        if let Some(d) = self.cold {
            a.cold = d;
        }
        if let Some(n) = self.patience {
            a.patience = n;
        }
        if let Some(q) = self.quantile {
            a.quantile = q;
        }
        Ok(())
    }
}

/// A different seed per run unless `--seed` is given: the point of jitter is that clients differ.
fn seed_from_clock() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Parses `250ms`, `10s`, `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (expected e.g. 250ms, 10s, 1m)"))
}

/// Parses `linear:N` or `exponential:F`.
pub fn parse_growth(s: &str) -> Result<Growth, String> {
    let (kind, value) = s.split_once(':').unwrap_or((s, ""));
    match kind {
        "linear" => value
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(Growth::Linear)
            .ok_or_else(|| format!("linear needs a positive integer, e.g. linear:1 (got {s:?})")),
        "exponential" | "exp" => value
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 1.0)
            .map(Growth::Exponential)
            .ok_or_else(|| format!("exponential needs a factor ≥ 1, e.g. exponential:2 (got {s:?})")),
        _ => Err(format!("expected linear:N or exponential:F (got {s:?})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_preset_and_are_validated() {
        let args = PolicyArgs {
            preset: Some("staggered".into()),
            stagger: Some(Duration::from_millis(100)),
            jitter: Some(0.0),
            seed: Some(3),
            ..PolicyArgs::default()
        };
        let c = args.to_config().unwrap();
        assert_eq!(c.fanout.stagger, Stagger::Fixed(Duration::from_millis(100)));
        assert_eq!(c.seed, 3);
        let bad = PolicyArgs { jitter: Some(2.0), ..PolicyArgs::default() };
        assert!(bad.to_config().unwrap_err().contains("fanout.jitter"));
        let bad = PolicyArgs { preset: Some("fast".into()), ..PolicyArgs::default() };
        assert!(bad.to_config().unwrap_err().contains("unknown preset"));
    }

    #[test]
    fn adaptive_flags_and_switches_reach_the_config() {
        let args = PolicyArgs {
            multiple: Some(3),
            floor: Some(Duration::from_millis(5)),
            patience: Some(8),
            no_cancel_silent: true,
            no_replace_when_full: true,
            ..PolicyArgs::default()
        };
        let c = args.to_config().unwrap();
        let Stagger::Adaptive(a) = c.fanout.stagger else { panic!("adaptive by default") };
        assert_eq!((a.multiple, a.floor, a.patience), (3, Duration::from_millis(5), 8));
        assert!(!c.fanout.cancel_silent_on_answer && !c.fanout.replace_when_full && c.fanout.next_on_failure);
        assert!(c.fanout.spread_ticks, "ticks spread by default");
        let all_at_once = PolicyArgs { no_spread: true, ..PolicyArgs::default() }.to_config().unwrap();
        assert!(!all_at_once.fanout.spread_ticks && all_at_once.fanout.cancel_silent_on_answer);
        // The switches' spelling on the command line.
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            policy: PolicyArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(["stagger", "--no-spread", "--no-next-on-failure"]).unwrap();
        let c = cli.policy.to_config().unwrap();
        assert!(!c.fanout.spread_ticks && !c.fanout.next_on_failure && c.fanout.cancel_silent_on_answer);
        let fixed = PolicyArgs { preset: Some("staggered".into()), patience: Some(8), ..PolicyArgs::default() };
        assert!(fixed.to_config().unwrap_err().contains("--patience tunes the adaptive stagger"));
        let bad = PolicyArgs { multiple: Some(0), ..PolicyArgs::default() };
        assert!(bad.to_config().unwrap_err().contains("fanout.stagger.multiple"));
    }

    #[test]
    fn growth_and_durations_parse() {
        assert_eq!(parse_growth("linear:2"), Ok(Growth::Linear(2)));
        assert_eq!(parse_growth("exponential:1.5"), Ok(Growth::Exponential(1.5)));
        assert!(parse_growth("linear:0").is_err());
        assert!(parse_growth("quadratic:2").is_err());
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
    }
}
