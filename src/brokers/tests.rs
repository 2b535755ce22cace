//! The broker book's own tests: entries, health scores and attempt order.
use super::*;
use crate::metadata::BrokerMetadata;

fn meta(hosts: &[(i32, &str)]) -> Metadata {
    Metadata {
        brokers: hosts
            .iter()
            .map(|(id, h)| BrokerMetadata { node_id: *id, host: (*h).into(), port: 9092, rack: None })
            .collect(),
        ..Metadata::default()
    }
}

#[test]
fn rejects_bad_seed_lists_at_construction() {
    assert_eq!(BrokerBook::new(Vec::<&str>::new()).unwrap_err().field, "seeds");
    assert!(BrokerBook::new(["nohost"]).is_err());
    assert!(BrokerBook::new(["h:0"]).is_err());
    assert!(BrokerBook::new(["h:99999"]).is_err());
    assert!(BrokerBook::new([":9092"]).is_err());
    assert!(BrokerBook::new(["::1:9092"]).is_err());
    assert!(BrokerBook::new(["[::1]:9092"]).is_ok());
    assert_eq!(BrokerBook::new(["a:1", "a:1", " a:1 "]).unwrap().len(), 1);
}

#[test]
fn metadata_updates_match_addresses_exactly_once() {
    let mut book = BrokerBook::new(["b:9092", "[::1]:9092"]).unwrap();
    let mut m = meta(&[(1, "a"), (2, "b"), (3, "::1"), (4, "a")]);
    m.brokers[3].node_id = 5; // the same address listed twice (malformed, but seen)
    book.update_from_metadata(&m);
    let addresses: Vec<&str> = book.iter().map(|(_, e)| &*e.address).collect();
    assert_eq!(addresses, ["b:9092", "[::1]:9092", "a:9092"], "seeds matched, one new entry");
    let ids: Vec<Option<i32>> = book.iter().map(|(_, e)| e.node_id).collect();
    assert_eq!(ids, [Some(2), Some(3), Some(5)], "the last listing of a duplicate wins");
    book.update_from_metadata(&meta(&[(7, "a")]));
    let ids: Vec<Option<i32>> = book.iter().map(|(_, e)| e.node_id).collect();
    assert_eq!(ids, [None, None, Some(7)], "brokers no longer listed stop being discovered");
    assert_eq!(book.len(), 3, "indices are stable: nothing is removed");
}

#[test]
fn discovered_before_seeds_and_failed_last() {
    let mut book = BrokerBook::new(["seed:9092"]).unwrap();
    book.update_from_metadata(&meta(&[(1, "a"), (2, "b"), (3, "c")]));
    let order = book.candidates(Instant::ZERO, 1);
    assert_eq!(order.len(), 4);
    assert_eq!(book.address(order[3]), "seed:9092");
    let a = book.find("a:9092").unwrap();
    book.record_failure(a, Instant::ZERO);
    let order = book.candidates(Instant::ZERO, 1);
    assert_eq!(order.last(), Some(&a), "recently failed goes last, after seeds");
    // After enough half-lives the failure is forgotten.
    let later = Instant::ZERO.saturating_add(Duration::from_secs(120));
    assert!(!book.recently_failed(a, later));
    assert_ne!(book.candidates(later, 1).last(), Some(&a));
}

#[test]
fn connected_first_and_shuffle_depends_on_seed() {
    let mut book = BrokerBook::new(["seed:9092"]).unwrap();
    let hosts: Vec<(i32, String)> = (0..20).map(|i| (i, alloc::format!("h{i}"))).collect();
    let hosts_ref: Vec<(i32, &str)> = hosts.iter().map(|(i, h)| (*i, h.as_str())).collect();
    book.update_from_metadata(&meta(&hosts_ref));
    let h7 = book.find("h7:9092").unwrap();
    book.set_connected(h7, true);
    for seed in 0..5 {
        assert_eq!(book.candidates(Instant::ZERO, seed)[0], h7);
    }
    assert_ne!(book.candidates(Instant::ZERO, 1), book.candidates(Instant::ZERO, 2));
    assert_eq!(book.candidates(Instant::ZERO, 3), book.candidates(Instant::ZERO, 3));
}

#[test]
fn rebootstrap_falls_back_to_seeds() {
    let mut book = BrokerBook::new(["s1:9092", "s2:9092"]).unwrap();
    book.update_from_metadata(&meta(&[(1, "a"), (2, "s1")]));
    assert_eq!(book.candidates(Instant::ZERO, 0).len(), 3);
    book.rebootstrap();
    let order = book.candidates(Instant::ZERO, 0);
    let names: Vec<&str> = order.iter().map(|&i| book.address(i)).collect();
    assert_eq!(names, ["s1:9092", "s2:9092"]);
}
