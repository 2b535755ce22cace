//! Strategies compared turn by turn, from `fleet_real` runs whose turns alternate.
//!
//! On a machine whose brokers share their cores with the 300 clients, one storm under one
//! strategy can take twice as long as the next storm under the same strategy. A single pair
//! of turns then says little; `fleet_real --strategies sequential,long-lived,sequential,…`
//! runs several, alternating, on one cluster. This reads those files and prints, as
//! markdown:
//!
//! * every turn in order: time to metadata (p50, p99), the p50 of the clients that asked on
//!   a kept connection (the same single Metadata request under every strategy; per broker
//!   too, in files that name each winner's broker), the new connections (in all and per
//!   broker: where the dead broker's clients reconnected), Metadata per refresh, the peak
//!   (Metadata requests to one broker within 100 ms) and the brokers' CPU, in files that
//!   have it: their request threads' in all (accepts, TLS, SASL, requests; the JIT's work,
//!   which moves from turn to turn on its own, aside) and the most one broker spent within
//!   100 ms (all its threads, read at the kernel's 10 ms tick). A Metadata request on a kept
//!   connection and a new connection's handshakes count alike in the peak; the CPU tells
//!   them apart;
//! * each turn of a strategy against the turns of the baseline right before and after it
//!   (ratios of p50, p99, new connections, peak and broker CPU): the comparison;
//! * the same pairs split by which turn ran first, and balanced over the two orders: if
//!   storms on a shared machine drift from turn to turn, whichever strategy runs second pays
//!   for it, so files with each order run first (`--strategies a,b,…` and
//!   `--strategies b,a,…` on the same seed) are compared by the balanced row, and the two
//!   orders' rows show whether there was a drift;
//! * each turn of the baseline against the baseline's next turn: what the machine alone
//!   moves, the yardstick for the comparison.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin storm_turns -- [--baseline sequential] [--scenario failover_storm] FILE...
//! ```
//!
//! Ratios are strategy ÷ baseline; their summary is the geometric mean and the range.

use std::fmt::Write as _;
use std::path::PathBuf;

use stagger_lab::fleet_file::{FleetFile, Run};
use stagger_lab::stats::{geometric_mean_range, log_mean_and_variance};

struct Args {
    baseline: String,
    scenario: String,
    files: Vec<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { baseline: "sequential".into(), scenario: "failover_storm".into(), files: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--baseline" => args.baseline = value()?,
            "--scenario" => args.scenario = value()?,
            "--help" | "-h" => {
                return Err("usage: storm_turns [--baseline sequential] [--scenario failover_storm] FILE...".into())
            }
            path => args.files.push(PathBuf::from(path)),
        }
    }
    if args.files.is_empty() {
        return Err("needs at least one file written by fleet_real".into());
    }
    Ok(args)
}

/// What one turn measured.
#[derive(Clone, Debug)]
struct Turn {
    strategy: String,
    p50: Option<f64>,
    p99: Option<f64>,
    kept_p50: Option<f64>,
    /// The same per broker (node order), where the file names each winner's broker.
    kept_p50_by_node: Vec<Option<f64>>,
    /// New connections per broker (node order).
    connections_by_node: Vec<usize>,
    connections: usize,
    metadata_per_refresh: f64,
    peak: usize,
    /// The brokers' request threads' CPU over the storm, summed (ms).
    broker_cpu: Option<f64>,
    /// The most CPU one broker spent within any 100 ms of it (ms).
    broker_cpu_peak: Option<f64>,
}

impl Turn {
    fn of(run: &Run) -> Turn {
        let kept: Vec<f64> = match &run.refresh_details {
            Some(details) => run
                .refresh_list
                .iter()
                .zip(details)
                .filter(|(_, d)| d.winner.as_ref().is_some_and(|w| w.reused))
                .filter_map(|(r, _)| r.2.map(|us| us as f64 / 1e3))
                .collect(),
            None => Vec::new(),
        };
        let kept_by_node = |node: u32| -> Vec<f64> {
            let Some(details) = &run.refresh_details else { return Vec::new() };
            run.refresh_list
                .iter()
                .zip(details)
                .filter(|(_, d)| d.winner.as_ref().is_some_and(|w| w.reused && w.node == Some(node)))
                .filter_map(|(r, _)| r.2.map(|us| us as f64 / 1e3))
                .collect()
        };
        Turn {
            strategy: run.strategy.clone(),
            p50: run.time_to_metadata.p50_ms,
            p99: run.time_to_metadata.p99_ms,
            kept_p50: median(kept),
            kept_p50_by_node: (1..=run.connections_per_broker.len() as u32).map(|n| median(kept_by_node(n))).collect(),
            connections_by_node: run.connections_per_broker.clone(),
            connections: run.connections_per_broker.iter().sum(),
            metadata_per_refresh: run.requests_per_refresh,
            peak: run.peak_requests,
            broker_cpu: run.broker_threads_cpu_ms.as_ref().map(|v| v.iter().map(|t| t.request_path).sum()),
            broker_cpu_peak: run.broker_cpu_peak_ms_per_100ms.as_ref().and_then(|v| v.iter().copied().reduce(f64::max)),
        }
    }

    /// The compared quantities, as [`COMPARED`] names them.
    fn values(&self) -> [Option<f64>; COMPARED.len()] {
        [
            self.p50,
            self.p99,
            self.kept_p50,
            Some(self.connections as f64),
            Some(self.peak as f64),
            self.broker_cpu,
            self.broker_cpu_peak,
        ]
    }
}

const COMPARED: [&str; 7] = [
    "p50",
    "p99",
    "kept connection p50",
    "new connections",
    "peak",
    "request threads' CPU",
    "broker CPU peak / 100 ms",
];

/// One compared quantity shown as [`COMPARED`]'s `k`th: times in ms, counts as numbers.
fn show(k: usize, x: Option<f64>) -> String {
    match k {
        0..=2 | 5 | 6 => ms(x),
        _ => x.map_or("—".into(), |x| format!("{x:.1}")),
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// A comparison's key, (listener, strategy), and whether the strategy's turn ran first.
type Ordered = ((String, String), bool);

/// Ratios of one comparison, per compared quantity.
#[derive(Default)]
struct Ratios([Vec<f64>; COMPARED.len()]);

impl Ratios {
    fn add(&mut self, a: &Turn, b: &Turn) {
        for (k, (x, y)) in a.values().into_iter().zip(b.values()).enumerate() {
            if let (Some(x), Some(y)) = (x, y) {
                if x > 0.0 && y > 0.0 {
                    self.0[k].push(x / y);
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.0[0].is_empty()
    }

    /// `×geomean (min–max)` per quantity.
    fn cells(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|v| match geometric_mean_range(v) {
                Some((g, lo, hi)) => format!("×{g:.2} ({lo:.2}–{hi:.2})"),
                None => "—".into(),
            })
            .collect()
    }

    fn pairs(&self) -> usize {
        self.0[0].len()
    }

    /// `×g (lo–hi)` per quantity: the geometric mean of the two orders' geometric means, so
    /// each order weighs alike however many pairs it has, and two standard errors either side
    /// of it (from each order's spread of log ratios; neighbouring pairs share a turn, so the
    /// true interval is somewhat wider). An interval that holds 1 does not tell the two apart.
    fn balanced(first: &Ratios, second: &Ratios) -> Vec<String> {
        first
            .0
            .iter()
            .zip(&second.0)
            .map(|(a, b)| match (log_mean_and_variance(a), log_mean_and_variance(b)) {
                (Some((ma, va)), Some((mb, vb))) => {
                    let mean = (ma + mb) / 2.0;
                    let se = (va / a.len() as f64 + vb / b.len() as f64).sqrt() / 2.0;
                    format!("×{:.2} ({:.2}–{:.2})", mean.exp(), (mean - 2.0 * se).exp(), (mean + 2.0 * se).exp())
                }
                _ => "—".into(),
            })
            .collect()
    }
}

/// The value kept under `key` in `list` (in first-seen order), a default one added if none.
fn entry<K: PartialEq, V: Default>(list: &mut Vec<(K, V)>, key: K) -> &mut V {
    let at = match list.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            list.push((key, V::default()));
            list.len() - 1
        }
    };
    &mut list[at].1
}

fn ms(x: Option<f64>) -> String {
    match x {
        Some(x) if x >= 100.0 => format!("{x:.0} ms"),
        Some(x) => format!("{x:.1} ms"),
        None => "—".into(),
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("storm_turns: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let args = parse_args()?;
    let mut md = String::new();
    let mut files: Vec<(String, FleetFile)> = Vec::new();
    for path in &args.files {
        let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        files.push((name, FleetFile::read(path)?));
    }
    let _ = writeln!(
        md,
        "| file | turn | strategy | p50 | p99 | kept connection p50 | (per broker) | new connections | (per broker) | Metadata / refresh | peak | request threads' CPU | broker CPU peak / 100 ms |"
    );
    let _ = writeln!(md, "|---|---:|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|");
    // Per listener: strategy → ratios against the neighbouring baseline turns.
    let mut against: Vec<((String, String), Ratios)> = Vec::new();
    let mut noise: Vec<(String, Ratios)> = Vec::new();
    // The same pairs split by which turn came first (`true`: the strategy's).
    let mut by_order: Vec<(Ordered, Ratios)> = Vec::new();
    // The turns of each file, and of each listener over its files.
    let mut per_file: Vec<(String, Vec<Turn>)> = Vec::new();
    let mut per_listener: Vec<(String, Vec<Turn>)> = Vec::new();
    for (name, file) in &files {
        let turns: Vec<Turn> = file.runs.iter().filter(|r| r.scenario == args.scenario).map(Turn::of).collect();
        per_file.push((name.clone(), turns.clone()));
        let label = format!("{} files", file.listener);
        entry(&mut per_listener, label).extend(turns.iter().cloned());
        for (i, t) in turns.iter().enumerate() {
            let _ = writeln!(
                md,
                "| {name} | {} | `{}` | {} | {} | {} | {} | {} | {} | {:.3} | {} | {} | {} |",
                i + 1,
                t.strategy,
                ms(t.p50),
                ms(t.p99),
                ms(t.kept_p50),
                t.kept_p50_by_node.iter().map(|&x| ms(x)).collect::<Vec<_>>().join(" / "),
                t.connections,
                t.connections_by_node.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" / "),
                t.metadata_per_refresh,
                t.peak,
                ms(t.broker_cpu),
                ms(t.broker_cpu_peak)
            );
        }
        let baseline: Vec<usize> = (0..turns.len()).filter(|&i| turns[i].strategy == args.baseline).collect();
        for (i, t) in turns.iter().enumerate().filter(|(_, t)| t.strategy != args.baseline) {
            let before = baseline.iter().rev().find(|&&b| b < i);
            let after = baseline.iter().find(|&&b| b > i);
            let key = (file.listener.clone(), t.strategy.clone());
            for &b in before.into_iter().chain(after) {
                entry(&mut against, key.clone()).add(t, &turns[b]);
                entry(&mut by_order, (key.clone(), b > i)).add(t, &turns[b]);
            }
        }
        let ratios = entry(&mut noise, file.listener.clone());
        for pair in baseline.windows(2) {
            ratios.add(&turns[pair[1]], &turns[pair[0]]);
        }
    }
    let _ = writeln!(
        md,
        "\nEach strategy's turns against the `{}` turns right before and after them (strategy ÷ `{}`: geometric mean, range), and `{}` against its own next turn (the machine's noise):\n",
        args.baseline, args.baseline, args.baseline
    );
    let _ = writeln!(md, "| listener | compared | pairs | {} |", COMPARED.join(" | "));
    let _ = writeln!(md, "|---|---|---:|{}", "---|".repeat(COMPARED.len()));
    let rows = against
        .iter()
        .map(|((listener, strategy), r)| (listener, format!("`{strategy}` ÷ `{}`", args.baseline), r))
        .chain(noise.iter().map(|(listener, r)| (listener, format!("`{}` ÷ its previous turn", args.baseline), r)));
    for (listener, compared, ratios) in rows.filter(|(_, _, r)| !r.is_empty()) {
        let _ = writeln!(md, "| {listener} | {compared} | {} | {} |", ratios.pairs(), ratios.cells().join(" | "));
    }
    let _ = writeln!(
        md,
        "\nThe same pairs split by which turn ran first. Storms that drift from turn to turn favour one order; the balanced row, the geometric mean of the two orders' means, cancels a drift that is steady from one turn to the next (in brackets: two standard errors either side; an interval holding 1 does not tell the two apart):\n"
    );
    let _ = writeln!(md, "| listener | compared | pairs | {} |", COMPARED.join(" | "));
    let _ = writeln!(md, "|---|---|---:|{}", "---|".repeat(COMPARED.len()));
    for ((listener, strategy), _) in &against {
        let order =
            |first: bool| by_order.iter().find(|((k, f), _)| k.0 == *listener && k.1 == *strategy && *f == first);
        let (Some((_, first)), Some((_, second))) = (order(true), order(false)) else { continue };
        let name = format!("`{strategy}` ÷ `{}`", args.baseline);
        let _ = writeln!(
            md,
            "| {listener} | {name}, `{strategy}` first | {} | {} |",
            first.pairs(),
            first.cells().join(" | ")
        );
        let _ = writeln!(
            md,
            "| {listener} | {name}, `{strategy}` second | {} | {} |",
            second.pairs(),
            second.cells().join(" | ")
        );
        let _ = writeln!(
            md,
            "| {listener} | {name}, balanced | {} | {} |",
            first.pairs() + second.pairs(),
            Ratios::balanced(first, second).join(" | ")
        );
    }
    let _ = writeln!(
        md,
        "\nEach strategy's turns summed up by their median, over every file of a listener, then per file (strategy's median ÷ `{}`'s):\n",
        args.baseline
    );
    let _ = writeln!(md, "| file | strategy | turns | {} |", COMPARED.join(" | "));
    let _ = writeln!(md, "|---|---|---:|{}", "---|".repeat(COMPARED.len()));
    // One file's rows would repeat its listener's.
    let per_file = if files.len() > 1 { per_file.as_slice() } else { &[] };
    for (name, turns) in per_listener.iter().chain(per_file) {
        let of = |strategy: &str| -> Option<[Option<f64>; COMPARED.len()]> {
            let mine: Vec<&Turn> = turns.iter().filter(|t| t.strategy == strategy).collect();
            (!mine.is_empty())
                .then(|| core::array::from_fn(|k| median(mine.iter().filter_map(|t| t.values()[k]).collect())))
        };
        let base = of(&args.baseline);
        let mut strategies: Vec<&str> = Vec::new();
        for t in turns {
            if !strategies.contains(&t.strategy.as_str()) {
                strategies.push(&t.strategy);
            }
        }
        for strategy in strategies {
            let Some(mine) = of(strategy) else { continue };
            let cell = |k: usize| -> String {
                let value = show(k, mine[k]);
                match (mine[k], base.and_then(|b| b[k])) {
                    (Some(x), Some(b)) if strategy != args.baseline && b > 0.0 => format!("{value} (×{:.2})", x / b),
                    _ => value,
                }
            };
            let n = turns.iter().filter(|t| t.strategy == strategy).count();
            let cells: Vec<String> = (0..COMPARED.len()).map(cell).collect();
            let _ = writeln!(md, "| {name} | `{strategy}` | {n} | {} |", cells.join(" | "));
        }
    }
    print!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(strategy: &str, p50: f64) -> Turn {
        Turn {
            strategy: strategy.into(),
            p50: Some(p50),
            p99: Some(p50 * 2.0),
            kept_p50: None,
            kept_p50_by_node: Vec::new(),
            connections_by_node: Vec::new(),
            connections: 100,
            metadata_per_refresh: 1.0,
            peak: 150,
            broker_cpu: Some(p50 * 10.0),
            broker_cpu_peak: None,
        }
    }

    #[test]
    fn ratios_summarise_as_geometric_mean_and_range() {
        let mut r = Ratios::default();
        r.add(&turn("a", 20.0), &turn("b", 10.0));
        r.add(&turn("a", 10.0), &turn("b", 20.0));
        let cells = r.cells();
        assert_eq!(cells[0], "×1.00 (0.50–2.00)");
        assert_eq!(cells[2], "—", "no kept connection time on either side");
        assert_eq!(cells[5], "×1.00 (0.50–2.00)", "broker CPU compared as time is");
        assert_eq!(cells[6], "—", "a file without CPU peaks compares none");
        assert_eq!(r.pairs(), 2);
    }

    #[test]
    fn the_balanced_ratio_weighs_each_order_alike() {
        // Three pairs where the strategy ran first, drift making it 0.8× its baseline, and one
        // where it ran second, the same drift making it 1.25×: balanced, they are even.
        let mut first = Ratios::default();
        for _ in 0..3 {
            first.add(&turn("a", 8.0), &turn("b", 10.0));
        }
        let mut second = Ratios::default();
        second.add(&turn("a", 12.5), &turn("b", 10.0));
        let cells = Ratios::balanced(&first, &second);
        assert_eq!(cells[0], "×1.00 (1.00–1.00)", "no spread within either order");
        assert_eq!(cells[2], "—", "no kept connection time on either side");
        let mut pooled = Ratios::default();
        for _ in 0..3 {
            pooled.add(&turn("a", 8.0), &turn("b", 10.0));
        }
        pooled.add(&turn("a", 12.5), &turn("b", 10.0));
        assert_eq!(pooled.cells()[0], "×0.89 (0.80–1.25)", "pooled, the order with more pairs wins");
    }

    #[test]
    fn the_balanced_interval_widens_with_the_spread_of_the_pairs() {
        let mut first = Ratios::default();
        first.add(&turn("a", 8.0), &turn("b", 10.0));
        first.add(&turn("a", 12.5), &turn("b", 10.0));
        let mut second = Ratios::default();
        second.add(&turn("a", 10.0), &turn("b", 10.0));
        second.add(&turn("a", 10.0), &turn("b", 10.0));
        // First: logs ±0.223, variance 0.0996, over 2 pairs; second: none. se = √(0.0498) / 2.
        assert_eq!(Ratios::balanced(&first, &second)[0], "×1.00 (0.80–1.25)");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
    }
}
