use std::path::PathBuf;

use serde_json::Value;

use super::*;

/// Every committed file, with its text.
fn committed_files() -> Vec<(PathBuf, String)> {
    let files: Vec<(PathBuf, String)> =
        committed().into_iter().map(|path| (path.clone(), std::fs::read_to_string(path).unwrap())).collect();
    assert!(files.len() >= 8, "expected the committed runs in docs/performance/real/");
    files
}

#[test]
fn every_committed_file_parses_and_keeps_every_key() {
    for (path, text) in committed_files() {
        let file: FleetFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Nothing the file holds is dropped or reshaped: written again, it is the same JSON.
        let raw: Value = serde_json::from_str(&text).unwrap();
        assert!(serde_json::to_value(&file).unwrap() == raw, "{} does not survive the struct", path.display());
        assert!(!file.runs.is_empty(), "{}", path.display());
        // The listener's own parts are there exactly when the listener is SASL_SSL.
        let sasl = file.listener == "sasl_ssl";
        assert_eq!(file.calibration.secured.is_some(), sasl, "{}", path.display());
        assert_eq!(file.fit.secured.is_some(), sasl, "{}", path.display());
        assert_eq!(file.requests_counted_by.is_some(), sasl, "{}", path.display());
        for run in &file.runs {
            assert_eq!(run.secured.is_some(), sasl, "{} {} {}", path.display(), run.scenario, run.strategy);
            assert_eq!(run.api_versions_per_broker.is_none(), sasl);
            assert_eq!(run.refresh_list.len(), run.refreshes);
        }
    }
}

#[test]
fn a_file_round_trips_through_its_text() {
    for (path, text) in committed_files() {
        let file: FleetFile = serde_json::from_str(&text).unwrap();
        let again: FleetFile = serde_json::from_str(&serde_json::to_string_pretty(&file).unwrap()).unwrap();
        assert!(again == file, "{} changed when written and read again", path.display());
    }
}

#[test]
fn a_refresh_entry_is_an_array_and_a_failed_one_has_no_time() {
    let entries = vec![RefreshEntry(7, 1200, Some(950), 1), RefreshEntry(8, 1300, None, 3)];
    let text = serde_json::to_string(&entries).unwrap();
    assert_eq!(text, "[[7,1200,950,1],[8,1300,null,3]]");
    assert_eq!(serde_json::from_str::<Vec<RefreshEntry>>(&text).unwrap(), entries);
}

#[test]
fn a_spread_summarises_by_nearest_rank() {
    let s = Spread::of((1..=100).map(f64::from).collect());
    assert_eq!((s.n, s.p50_us, s.p90_us, s.p99_us), (100, 50.0, 90.0, 99.0));
    assert_eq!(s.mean_us, 50.5);
    assert_eq!(s.trimmed_mean_us, 50.0);
    assert_eq!(Spread::of(Vec::new()), Spread::default());
}
