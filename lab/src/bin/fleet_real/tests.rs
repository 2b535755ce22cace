use stagger_lab::fleet_file::{self, FleetFile};

use super::{fit, fit_rest, Listener};

/// The fit, run again on each committed file's calibration and warm-ups, gives the prices
/// that file holds: the file's structs carry everything the fit reads.
#[test]
fn every_committed_file_holds_the_fit_of_its_own_measurements() {
    for path in fleet_file::committed() {
        let file = FleetFile::read(&path).unwrap();
        let listener = Listener::parse(&file.listener).unwrap();
        let mut fitted = fit(&file.calibration, listener);
        fit_rest(&mut fitted, &file.runs, listener);
        assert!(fitted == file.fit, "{}: fitted {fitted:?}, the file holds {:?}", path.display(), file.fit);
    }
}

/// Every scenario's name reads back as itself, and both storms are storms.
#[test]
fn scenarios_parse_by_name_and_both_storms_kill_a_node() {
    use super::Scenario;
    for s in Scenario::ALL {
        assert_eq!(Scenario::parse(s.name()).unwrap(), s);
    }
    assert!(Scenario::FailoverStorm.is_storm() && Scenario::StormHungSurvivor.is_storm());
    assert!(!Scenario::OneHung.is_storm() && !Scenario::Healthy.is_storm());
    assert!(Scenario::parse("storm").is_err());
}
