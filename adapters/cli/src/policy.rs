//! The policy flags: `--preset`, `--policy FILE.json`, `--set PATH=VALUE` for any knob of the
//! core's schema (`stagger::knobs`), and today's shorthand flags, each of which is a
//! `--set` of one knob. Nothing here lists knobs: the core's schema does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde_json::Value;
use stagger::{knobs, Knob, KnobKind, KnobScope};
use stagger::{ClusterConfig, RefreshConfig};

/// Policy flags shared by `metadata` and `demo`.
#[derive(Args, Clone, Debug, Default)]
pub struct PolicyArgs {
    /// Start from a preset: adaptive (default), sequential, all-at-once, staggered.
    #[arg(long, value_name = "NAME", conflicts_with = "policy")]
    pub preset: Option<String>,
    /// Start from a whole policy: RefreshConfig JSON, or ClusterConfig JSON (with `refresh`);
    /// fields left out keep their defaults.
    #[arg(long, value_name = "FILE.json")]
    pub policy: Option<PathBuf>,
    /// Set any knob (repeatable, applied in order after the other flags), e.g.
    /// `--set fanout.max_in_flight=2 --set fanout.stagger=fixed:100ms`; `stagger knobs` lists them.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// Stagger delay between attempts: a duration for a fixed one, or `adaptive`.
    #[arg(long, value_name = "DURATION")]
    pub stagger: Option<String>,
    /// Attempts started at once when the refresh begins.
    #[arg(long, value_name = "N")]
    pub initial: Option<String>,
    /// Throttle: at most N attempts in flight (lowers fanout.initial to fit unless that is
    /// set too).
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<String>,
    /// Attempts per stagger tick: `linear:N` or `exponential:F`.
    #[arg(long, value_name = "SPEC")]
    pub growth: Option<String>,
    /// Fraction of each stagger delay that is randomised, 0..1.
    #[arg(long, value_name = "FRACTION")]
    pub jitter: Option<String>,
    /// Timeout of one attempt (connect + ApiVersions + Metadata).
    #[arg(long, value_name = "DURATION")]
    pub attempt_timeout: Option<String>,
    /// Deadline of the whole refresh.
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// Extra passes over the brokers after every broker failed.
    #[arg(long, value_name = "N")]
    pub retries: Option<String>,
    /// Seed of the core's PRNG (jitter, the seeds' shuffled order): same seed, same
    /// decisions. Default: a new one drawn from the OS for every run, unless the policy
    /// file or `--set seed=` gives one; 0 draws one too.
    #[arg(long, value_name = "N")]
    pub seed: Option<String>,
    /// Adaptive: suspect a connected, silent broker after N × the broker pace (or × its
    /// handshake time, if longer).
    #[arg(long, value_name = "N")]
    pub multiple: Option<String>,
    /// Adaptive: the broker pace (handshake to first answer) assumed until one is seen.
    #[arg(long, value_name = "DURATION")]
    pub silent: Option<String>,
    /// Adaptive: lower bound on every wait.
    #[arg(long, value_name = "DURATION")]
    pub floor: Option<String>,
    /// Adaptive: upper bound on every wait.
    #[arg(long, value_name = "DURATION")]
    pub ceiling: Option<String>,
    /// Adaptive: wait before a handshake when nothing is known.
    #[arg(long, value_name = "DURATION")]
    pub cold: Option<String>,
    /// Adaptive: an answering broker is hedged after N × what an answer normally takes.
    #[arg(long, value_name = "N")]
    pub patience: Option<String>,
    /// Quantile of the recent response-time window (a long-lived client's: a one-shot
    /// refresh has no window).
    #[arg(long, value_name = "Q")]
    pub quantile: Option<String>,
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
    /// The refresh policy these flags describe, validated (the error names the flag and the
    /// knob's path).
    pub fn to_config(&self) -> Result<RefreshConfig, String> {
        self.to_cluster_config().map(|c| c.refresh)
    }

    /// Every knob these flags set, cluster knobs included, validated.
    pub fn to_cluster_config(&self) -> Result<ClusterConfig, String> {
        let mut c = match (&self.preset, &self.policy) {
            (_, Some(file)) => read_policy(file)?,
            // `RefreshConfig`'s default: the seeds shuffled, unless `--set shuffle_seeds=false`.
            (None, None) => ClusterConfig { refresh: RefreshConfig::default(), ..ClusterConfig::default() },
            (Some(name), None) => {
                let refresh = RefreshConfig::preset(name).ok_or_else(|| {
                    format!("unknown preset {name:?}; choose one of: {}", RefreshConfig::PRESETS.join(", "))
                })?;
                ClusterConfig { refresh, ..ClusterConfig::default() }
            }
        };
        let mut assigned: Vec<&'static str> = Vec::new();
        for (flag, path, value) in self.shorthands() {
            set(&mut c, path, &value).map_err(|e| format!("{flag}: {e}"))?;
            assigned.push(path);
        }
        for assignment in &self.set {
            let (path, value) = assignment
                .split_once('=')
                .ok_or_else(|| format!("--set {assignment:?}: expected PATH=VALUE, e.g. fanout.max_in_flight=2"))?;
            let knob = find_knob(path.trim())?;
            set(&mut c, knob.path, value).map_err(|e| format!("--set {assignment}: {e}"))?;
            assigned.push(knob.path);
        }
        // A throttle below the preset's initial fan-out means "at most this many", not an
        // error about a knob the user did not touch.
        if assigned.contains(&"fanout.max_in_flight") && !assigned.contains(&"fanout.initial") {
            let f = &mut c.refresh.fanout;
            f.initial = f.initial.min(f.max_in_flight.max(1));
        }
        // A seed left at 0 is drawn per refresh by the adapter that runs it
        // (`SessionConfig::seed_unless_set`), so runs differ unless one is given.
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// The shorthand flags that were given, as `(flag, knob path, value)`, in a fixed order
    /// (the stagger before its adaptive parameters).
    fn shorthands(&self) -> Vec<(&'static str, &'static str, String)> {
        self.flags().into_iter().filter_map(|(flag, path, value)| value.map(|v| (flag, path, v))).collect()
    }

    /// Every shorthand flag with its knob path and its value, if given: the one table both
    /// for applying them and for their help's defaults ([`document_defaults`]).
    fn flags(&self) -> [(&'static str, &'static str, Option<String>); 20] {
        // A bare duration is a fixed stagger; `adaptive` and `fixed:…` are the knob's own text.
        let stagger = self.stagger.as_ref().map(|s| match s.as_str() {
            "adaptive" => s.clone(),
            _ if s.starts_with("fixed:") => s.clone(),
            _ => format!("fixed:{s}"),
        });
        let off = |given: bool| given.then(|| "false".to_string());
        [
            ("--stagger", "fanout.stagger", stagger),
            ("--initial", "fanout.initial", self.initial.clone()),
            ("--max-in-flight", "fanout.max_in_flight", self.max_in_flight.clone()),
            ("--growth", "fanout.growth", self.growth.clone()),
            ("--jitter", "fanout.jitter", self.jitter.clone()),
            ("--attempt-timeout", "attempt_timeout", self.attempt_timeout.clone()),
            ("--deadline", "deadline", self.deadline.clone()),
            ("--retries", "retry.retries", self.retries.clone()),
            ("--seed", "seed", self.seed.clone()),
            ("--multiple", "fanout.stagger.adaptive.multiple", self.multiple.clone()),
            ("--silent", "fanout.stagger.adaptive.silent", self.silent.clone()),
            ("--floor", "fanout.stagger.adaptive.floor", self.floor.clone()),
            ("--ceiling", "fanout.stagger.adaptive.ceiling", self.ceiling.clone()),
            ("--cold", "fanout.stagger.adaptive.cold", self.cold.clone()),
            ("--patience", "fanout.stagger.adaptive.patience", self.patience.clone()),
            ("--quantile", "window_quantile", self.quantile.clone()),
            ("--no-next-on-failure", "fanout.tuning.next_on_failure", off(self.no_next_on_failure)),
            ("--no-replace-when-full", "fanout.tuning.replace_when_full", off(self.no_replace_when_full)),
            ("--no-cancel-silent", "fanout.tuning.cancel_silent_on_answer", off(self.no_cancel_silent)),
            ("--no-spread", "fanout.tuning.spread_ticks", off(self.no_spread)),
        ]
    }
}

/// Ends the help of every shorthand flag of `cmd` (and of its subcommands) with the knob it
/// sets and that knob's default, read from the core's schema: a help text that wrote the
/// default out (`--cold … (e.g. 250ms)` while the default was 40ms) went stale when the
/// default changed. `--seed` keeps its own words: unless one is given, every run draws its own.
pub fn document_defaults(mut cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_owned()).collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, document_defaults);
    }
    for (flag, path, _) in PolicyArgs::default().flags() {
        let id = flag.trim_start_matches("--").replace('-', "_");
        let Ok(knob) = find_knob(path) else { continue };
        if flag == "--seed" || !cmd.get_arguments().any(|a| a.get_id() == id.as_str()) {
            continue;
        }
        let default = knob.default_value().map_or_else(|| "none".to_owned(), |v| v.to_string());
        let note = match flag.strip_prefix("--no-") {
            Some(_) => format!("(sets {path}=false; default {default})"),
            None => format!("({path}; default {default})"),
        };
        cmd = cmd.mut_arg(id, |arg| {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            arg.help(format!("{help} {note}"))
        });
    }
    cmd
}

fn set(c: &mut ClusterConfig, path: &str, value: &str) -> Result<(), String> {
    c.set(path, value).map_err(|e| e.to_string())
}

/// The knob called `path` (a refresh knob may be written with or without `refresh.`), or an
/// error listing the close matches — or every path, when nothing is close.
fn find_knob(path: &str) -> Result<&'static Knob, String> {
    let bare = path.strip_prefix("refresh.").unwrap_or(path);
    knobs().iter().find(|k| k.path == bare).ok_or_else(|| unknown(path))
}

fn unknown(path: &str) -> String {
    let last = path.rsplit('.').next().unwrap_or(path);
    let mut close: Vec<&str> = knobs()
        .iter()
        .map(|k| k.path)
        .filter(|p| p.rsplit('.').next() == Some(last) || strsim::levenshtein(p, path) <= 3)
        .collect();
    let hint = if close.is_empty() {
        close = knobs().iter().map(|k| k.path).collect();
        "the knobs are"
    } else {
        "did you mean"
    };
    format!("`{path}` is not a knob; {hint}: {} (`stagger knobs` lists them)", close.join(", "))
}

/// Reads a policy file: ClusterConfig JSON if it names a cluster field (or `refresh`),
/// RefreshConfig JSON otherwise. Errors name the file and the field: unknown fields are
/// refused (serde would silently drop them, and a misplaced knob would then quietly keep its
/// default).
fn read_policy(file: &Path) -> Result<ClusterConfig, String> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("--policy {name}: {e}"))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("--policy {name}: not JSON: {e}"))?;
    let Value::Object(fields) = &json else {
        return Err(format!("--policy {name}: expected a JSON object (a RefreshConfig or a ClusterConfig)"));
    };
    let is_cluster = fields
        .keys()
        .any(|key| key == "refresh" || knobs().iter().any(|k| k.scope() == KnobScope::Cluster && top(k.path) == key));
    let paths: Vec<(String, &'static Knob)> = knobs()
        .iter()
        .filter(|k| is_cluster || k.scope() == KnobScope::Refresh)
        .map(|k| match (is_cluster, k.scope()) {
            (true, KnobScope::Refresh) => (format!("refresh.{}", k.path), k),
            _ => (k.path.to_string(), k),
        })
        .collect();
    if let Some(path) = first_unknown(&json, "", &paths) {
        return Err(format!("--policy {name}: {}", unknown(&path)));
    }
    let bad = |e: serde_json::Error, defaults: Value, ok: fn(Value) -> bool| {
        let field = first_bad(&json, &defaults, &mut Vec::new(), ok).unwrap_or_else(|| "(top level)".into());
        format!("--policy {name}: field `{field}`: {e}")
    };
    if is_cluster {
        let config = serde_json::from_value::<ClusterConfig>(json.clone()).map_err(|e| {
            bad(e, serde_json::to_value(ClusterConfig::default()).unwrap_or_default(), |v| {
                serde_json::from_value::<ClusterConfig>(v).is_ok()
            })
        })?;
        Ok(config)
    } else {
        let refresh = serde_json::from_value::<RefreshConfig>(json.clone()).map_err(|e| {
            bad(e, serde_json::to_value(RefreshConfig::default()).unwrap_or_default(), |v| {
                serde_json::from_value::<RefreshConfig>(v).is_ok()
            })
        })?;
        Ok(ClusterConfig { refresh, ..ClusterConfig::default() })
    }
}

fn top(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// The first path of `json` (at `at`) that is no knob, nor on the way to one. `paths` are
/// the knobs' paths in this file's JSON. A choice knob (`fanout.stagger`) takes any of its
/// variants; a variant without a parameter (`adaptive`) holds knobs of its own.
fn first_unknown(json: &Value, at: &str, paths: &[(String, &'static Knob)]) -> Option<String> {
    let knob = paths.iter().find(|(p, _)| p == at).map(|(_, k)| k);
    let Value::Object(fields) = json else {
        let on_the_way = at.is_empty() || paths.iter().any(|(p, _)| p.starts_with(&format!("{at}.")));
        return (knob.is_none() && !on_the_way).then(|| at.to_string());
    };
    if let Some(k) = knob {
        let KnobKind::Choice { choices } = k.kind else { return None };
        return fields.iter().find_map(|(name, value)| match choices.iter().find(|c| c.name == name) {
            None => Some(format!("{at}.{name}")),
            Some(c) if c.param.is_none() => first_unknown(value, &format!("{at}.{name}"), paths),
            Some(_) => None,
        });
    }
    let prefix = if at.is_empty() { String::new() } else { format!("{at}.") };
    if !at.is_empty() && !paths.iter().any(|(p, _)| p.starts_with(&prefix)) {
        return Some(at.to_string());
    }
    fields.iter().find_map(|(key, value)| first_unknown(value, &format!("{prefix}{key}"), paths))
}

/// The most specific field of `json` that, put alone over the `defaults`' JSON, makes it
/// fail to deserialise (`ok` says whether a whole config's JSON does): serde's own message
/// says what is wrong but not where.
fn first_bad(json: &Value, defaults: &Value, at: &mut Vec<String>, ok: fn(Value) -> bool) -> Option<String> {
    let Value::Object(fields) = json else { return None };
    for (key, value) in fields {
        at.push(key.clone());
        let mut probe = defaults.clone();
        put(&mut probe, at, value.clone());
        if !ok(probe) {
            return Some(first_bad(value, defaults, at, ok).unwrap_or_else(|| at.join(".")));
        }
        at.pop();
    }
    None
}

/// Sets `root` at `path` to `value`, making objects on the way.
fn put(root: &mut Value, path: &[String], value: Value) {
    let mut here = root;
    for key in path {
        if !here.is_object() {
            *here = Value::Object(serde_json::Map::new());
        }
        here = here.as_object_mut().expect("made an object above").entry(key.clone()).or_insert(Value::Null);
    }
    *here = value;
}

/// Parses `250ms`, `1.5s`, `10s`, `1m30s` (the core's duration syntax, as in `--set`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    stagger::parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration (expected e.g. 250ms, 1.5s, 10s)"))
}

/// `stagger knobs`: the schema, one knob a line, with its syntax and default.
pub fn knobs_table() -> String {
    let mut out = String::from("Every knob of the policy (set with --set PATH=VALUE, or in a --policy FILE.json):\n\n");
    let width = knobs().iter().map(|k| k.path.len()).max().unwrap_or(0);
    for k in knobs() {
        let default = k.default_value().map(|v| v.to_string()).unwrap_or_default();
        let cluster = if k.scope() == KnobScope::Cluster { " (long-lived clients only)" } else { "" };
        out.push_str(&format!("  {:<width$}  {}  [default {default}]\n", k.path, k.kind.syntax()));
        out.push_str(&format!("  {:<width$}  {}{cluster}\n", "", k.doc));
    }
    out.push_str("\nDurations: 250ms, 1.5s, 10s, 1m30s. Whole numbers: `max` is 4294967295.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stagger::{Growth, Stagger};

    #[test]
    fn each_shorthand_flags_help_ends_with_its_knob_and_the_schemas_default() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            policy: PolicyArgs,
        }
        let cmd = document_defaults(<Cli as clap::CommandFactory>::command());
        for (flag, path, _) in PolicyArgs::default().flags() {
            let id = flag.trim_start_matches("--").replace('-', "_");
            let arg = cmd.get_arguments().find(|a| a.get_id() == id.as_str()).expect(flag);
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!help.contains("e.g."), "{flag} quotes a value of its own: {help}");
            if flag == "--seed" {
                assert!(help.contains("drawn from the OS for every run") && !help.contains("default 0"), "{help}");
                continue;
            }
            let default = find_knob(path).unwrap().default_value().unwrap().to_string();
            let knob = if flag.starts_with("--no-") { format!("sets {path}=false") } else { path.to_owned() };
            assert!(help.ends_with(&format!("({knob}; default {default})")), "{flag}: {help}");
        }
    }

    fn args(list: &[&str]) -> PolicyArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            policy: PolicyArgs,
        }
        let argv = std::iter::once("stagger").chain(list.iter().copied());
        <Cli as clap::Parser>::try_parse_from(argv).unwrap().policy
    }

    #[test]
    fn flags_override_the_preset_and_are_validated() {
        let c =
            args(&["--preset", "staggered", "--stagger", "100ms", "--jitter", "0", "--seed", "3"]).to_config().unwrap();
        assert_eq!(c.fanout.stagger, Stagger::Fixed(Duration::from_millis(100)));
        assert_eq!((c.seed, c.fanout.jitter), (3, 0.0));
        assert!(args(&["--jitter", "2"]).to_config().unwrap_err().contains("fanout.jitter"));
        assert!(args(&["--preset", "fast"]).to_config().unwrap_err().contains("unknown preset"));
        let e = args(&["--stagger", "soon"]).to_config().unwrap_err();
        assert!(e.contains("--stagger") && e.contains("250ms"), "{e}");
    }

    #[test]
    fn adaptive_flags_and_switches_reach_the_config() {
        let c = args(&[
            "--multiple",
            "3",
            "--floor",
            "5ms",
            "--patience",
            "8",
            "--no-cancel-silent",
            "--no-replace-when-full",
        ])
        .to_config()
        .unwrap();
        let Stagger::Adaptive(a) = c.fanout.stagger else { panic!("adaptive by default") };
        assert_eq!((a.multiple, a.floor, a.patience), (3, Duration::from_millis(5), 8));
        let t = c.fanout.tuning;
        assert!(!t.cancel_silent_on_answer && !t.replace_when_full && t.next_on_failure && t.spread_ticks);
        let c = args(&["--no-spread", "--no-next-on-failure"]).to_config().unwrap();
        assert!(!c.fanout.tuning.spread_ticks && !c.fanout.tuning.next_on_failure);
        let e = args(&["--preset", "staggered", "--patience", "8"]).to_config().unwrap_err();
        assert!(e.contains("--patience") && e.contains("only while fanout.stagger is adaptive"), "{e}");
        assert!(args(&["--multiple", "0"]).to_config().unwrap_err().contains("fanout.stagger.adaptive.multiple"));
        let c = args(&["--quantile", "0.5"]).to_cluster_config().unwrap();
        assert_eq!(c.window_quantile, 0.5);
    }

    #[test]
    fn set_takes_any_knob_in_order_after_the_shorthands() {
        let c = args(&[
            "--max-in-flight",
            "5",
            "--set",
            "fanout.max_in_flight=2",
            "--set",
            "fanout.growth=exponential:2",
            "--set",
            "refresh.fanout.tuning.spread_ticks=false",
            "--set",
            "hedge_budget.burst=4",
        ])
        .to_cluster_config()
        .unwrap();
        assert_eq!(c.refresh.fanout.max_in_flight, 2);
        assert_eq!(c.refresh.fanout.growth, Growth::Exponential(2.0));
        assert!(!c.refresh.fanout.tuning.spread_ticks);
        assert_eq!(c.hedge_budget.burst, 4);
        // A throttle below all-at-once's initial fan-out lowers it.
        let c = args(&["--preset", "all-at-once", "--set", "fanout.max_in_flight=2"]).to_config().unwrap();
        assert_eq!(c.fanout.initial, 2);
        let e = args(&["--set", "fanout.spread_ticks=false"]).to_config().unwrap_err();
        assert!(e.contains("did you mean: fanout.tuning.spread_ticks"), "{e}");
        let e = args(&["--set", "zzz=1"]).to_config().unwrap_err();
        assert!(e.contains("the knobs are:") && e.contains("window_quantile"), "{e}");
        assert!(args(&["--set", "fanout.jitter"]).to_config().unwrap_err().contains("PATH=VALUE"));
        let e = args(&["--set", "fanout.initial=lots"]).to_config().unwrap_err();
        assert!(e.contains("--set fanout.initial=lots") && e.contains("`fanout.initial`"), "{e}");
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stagger-cli-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_policy_file_is_a_whole_config_and_its_errors_name_file_and_field() {
        let refresh =
            file("refresh.json", r#"{"fanout": {"max_in_flight": 2, "tuning": {"spread_ticks": false}}, "seed": 9}"#);
        let c = args(&["--policy", refresh.to_str().unwrap()]).to_config().unwrap();
        assert_eq!((c.fanout.max_in_flight, c.fanout.tuning.spread_ticks, c.seed), (2, false, 9));
        // The whole default ClusterConfig reads back as itself; flags apply on top.
        let json = serde_json::to_string(&ClusterConfig::default().refresh.with_seed(1)).unwrap();
        let whole = file("whole.json", &format!(r#"{{"refresh": {json}, "window_quantile": 0.9}}"#));
        let c = args(&["--policy", whole.to_str().unwrap(), "--jitter", "0"]).to_cluster_config().unwrap();
        assert_eq!((c.window_quantile, c.refresh.fanout.jitter, c.refresh.seed), (0.9, 0.0, 1));
        let cases = [
            ("moved.json", r#"{"fanout": {"spread_ticks": false}}"#, "`fanout.spread_ticks` is not a knob"),
            ("variant.json", r#"{"fanout": {"stagger": {"sometimes": 1}}}"#, "fanout.stagger.sometimes"),
            ("typed.json", r#"{"refresh": {"fanout": {"jitter": "high"}}}"#, "field `refresh.fanout.jitter`"),
            ("duration.json", r#"{"deadline": {"secs": "x", "nanos": 0}}"#, "field `deadline.secs`"),
            ("broken.json", r#"{"fanout": "#, "not JSON"),
            ("invalid.json", r#"{"fanout": {"jitter": 3}}"#, "`fanout.jitter` (3) must be within"),
        ];
        for (name, text, needle) in cases {
            let path = file(name, text);
            let e = args(&["--policy", path.to_str().unwrap()]).to_config().unwrap_err();
            assert!(e.contains(needle), "{name}: {e}");
            assert!(e.contains(name) || needle.contains("must be"), "{name}: the file is named: {e}");
        }
        let e = args(&["--policy", "/nonexistent/p.json"]).to_config().unwrap_err();
        assert!(e.contains("/nonexistent/p.json"), "{e}");
    }

    #[test]
    fn the_knobs_table_lists_every_knob_of_the_schema() {
        let table = knobs_table();
        for k in knobs() {
            assert!(table.contains(k.path), "{} missing", k.path);
        }
        assert!(table.contains("adaptive|fixed:DURATION  [default adaptive]"), "{table}");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
    }
}
