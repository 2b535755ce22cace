//! Writes the web demo's fixture traces into `web-demo/fixtures/`.
//!
//! Each fixture is the trace the simulator recorded for one scenario — the same JSON
//! `stagger metadata --trace FILE` writes — so the Replay tab and its end-to-end test have
//! something to open that is known to replay without divergence.
//!
//! Run with `cargo run -p stagger-demo --example make_fixtures` (from the workspace root).

use core::time::Duration;
use std::path::PathBuf;

use stagger::RefreshConfig;
use stagger_sim::{run_refresh, BrokerBehavior, Scenario};

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let healthy = BrokerBehavior::Healthy { rtt: Duration::from_millis(4) };
    // A hung broker first, a refusing one next: the stagger tick moves past the first to the
    // second; the refusal starts the third at once, whose first answer cancels the
    // still-silent hung one (overtaken); the third wins, and the fourth is never asked.
    let hung_first =
        Scenario::from_behaviors([BrokerBehavior::Hung, BrokerBehavior::Refused, healthy.clone(), healthy])
            .with_seed(7);
    // Nothing answers: two passes of retries with backoff between them, then the give-up
    // error with every broker's last error.
    // Both ask in the order listed, so the scenario's first broker is the first asked.
    let mut short = RefreshConfig { shuffle_seeds: false, ..RefreshConfig::adaptive().with_seed(3) };
    short.attempt_timeout = Duration::from_secs(1);
    short.retry.retries = 2;
    let all_down =
        Scenario::from_behaviors([BrokerBehavior::Refused, BrokerBehavior::Hung, BrokerBehavior::Refused]).with_seed(3);
    let fixtures = [
        (
            "hung-refused-healthy.trace.json",
            RefreshConfig { shuffle_seeds: false, ..RefreshConfig::adaptive().with_seed(7) },
            hung_first,
        ),
        ("all-down-gives-up.trace.json", short, all_down),
    ];
    for (file, config, scenario) in fixtures {
        let report = run_refresh(&config, &scenario);
        let trace = report.trace.as_ref().expect("the simulator records a trace");
        let json = serde_json::to_string_pretty(&trace).expect("traces serialise");
        let path = dir.join(file);
        std::fs::write(&path, json + "\n").unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("{}: {}", path.display(), report.summary());
    }
}
