//! Prints how each preset gets metadata from a troubled five-broker cluster.
//!
//! Broker 0 is hung (accepts, never answers), broker 1 refuses connections, broker 2 answers
//! in 20–40 ms, brokers 3 and 4 are healthy (2 ms). Everything runs in virtual time in the
//! simulator, so the ten seconds Sarama-style `sequential` spends on the hung broker take no
//! real time at all.
//!
//! Run with `cargo run -p stagger-sim --example timeline`.

use core::time::Duration;
use stagger::RefreshConfig;
use stagger_sim::{run_refresh, BrokerBehavior, Scenario};

fn main() {
    let scenario = Scenario::from_behaviors([
        BrokerBehavior::Hung,
        BrokerBehavior::Refused,
        BrokerBehavior::Slow { min: Duration::from_millis(20), max: Duration::from_millis(40) },
        BrokerBehavior::Healthy { rtt: Duration::from_millis(2) },
        BrokerBehavior::Healthy { rtt: Duration::from_millis(2) },
    ])
    .with_seed(1);
    let presets = [
        ("adaptive (default)", RefreshConfig::adaptive()),
        ("staggered (fixed 500 ms)", RefreshConfig::staggered()),
        ("sequential (Sarama today)", RefreshConfig::sequential()),
        ("all at once", RefreshConfig::all_at_once()),
    ];
    for (name, config) in presets {
        let report = run_refresh(&config, &scenario);
        println!("== {name}");
        println!("{}", report.render_timeline());
    }
}
