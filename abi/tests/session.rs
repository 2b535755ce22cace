//! Sessions driven purely through the exported functions, against fake brokers: events
//! encoded and actions decoded as a Go or Python host does, one `stagger_step` per wake-up.

mod common;

use common::*;
use serde_json::Value;
use stagger_abi::host::HostEvent;
use stagger_abi::*;

/// A one-shot session over two seeds, asked in the order listed, with a fixed 500 ms stagger
/// and no retries: exact times.
fn one_shot(extra: &str) -> Abi {
    let config = format!(
        r#"{{"seeds": ["b1:9092", "b2:9093"], "one_shot": true,
            "settings": {{"fanout.stagger": "fixed:500ms", "fanout.jitter": "0", "retry.retries": 0,
                          "shuffle_seeds": false}}{extra}}}"#
    );
    Abi::new(&config, 0, 7).expect("a valid config")
}

fn request() -> HostEvent {
    HostEvent::RequestRefresh(STAGGER_CAUSE_REQUESTED, String::new())
}

#[test]
fn a_one_shot_refresh_is_one_dial_two_requests_and_refreshed_then_nothing_is_due() {
    let abi = one_shot("");
    assert_eq!(stagger_abi_version(), ABI_VERSION);
    assert_eq!(abi.metadata(), Value::Null, "no metadata before the first refresh");
    let first = abi.step(0, &[request()]);
    assert!(first.actions().next_wakeup_ns.is_some(), "a running refresh has a timer");
    let first = owned(&first.actions());
    assert_eq!(kinds(&first), ["refresh_requested", "dial"], "the epoch first, then what it caused");
    assert_eq!(first[0], Act::RefreshRequested(1));
    let [(conn, ref address)] = dials(&first)[..] else { panic!("{first:?}") };
    assert_eq!(address, "b1:9092");

    let sends = owned(&abi.step(MS, &[HostEvent::Connected(conn)]).actions());
    assert_eq!(kinds(&sends), ["send"], "ApiVersions once connected");
    let mut broker = Broker::default();
    let all = serve(&abi, 2 * MS, conn, &mut broker, sends);
    assert_eq!(broker.seen.len(), 2, "ApiVersions and Metadata: {:?}", broker.seen);
    assert_eq!(&kinds(&all)[1..], ["send", "close", "refreshed"], "one shot: the winner's conn closes first");
    assert!(all.contains(&Act::Refreshed(1, "b1:9092".into())));

    let idle = abi.step(3 * MS, &[]);
    assert_eq!((idle.actions().next_wakeup_ns, idle.actions().actions.len()), (None, 0));
    let metadata = abi.metadata();
    assert_eq!(metadata["cluster_id"], "kafka-cluster-1");
    assert_eq!(metadata["brokers"].as_array().unwrap().len(), 2);
    assert_eq!(metadata["topics"][0]["partitions"][0]["replicas"], serde_json::json!([1, 2, 3]));

    let report = abi.report();
    let last = &report["last_refresh"];
    assert_eq!((last["epoch"].as_u64(), last["outcome"].as_str()), (Some(1), Some("refreshed")), "{report}");
    assert_eq!(last["winner"]["address"], "b1:9092");
    let attempt = &last["attempts"][0];
    // The core's one report vocabulary (the CLI's `--json` rows): ms since the refresh began.
    assert_eq!((attempt["outcome"].as_str(), attempt["broker"].as_str()), (Some("won"), Some("b1:9092")));
    assert_eq!((attempt["started_ms"].as_f64(), attempt["connected_ms"].as_f64()), (Some(0.0), Some(1.0)));
    assert_eq!(report["stats"]["connections_opened"], 1);
    assert_eq!(report["open_connections"], serde_json::json!([]));
}

#[test]
fn a_refused_broker_moves_on_to_the_next_at_once_and_the_report_says_why() {
    let abi = one_shot("");
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(refused, _)] = dials(&first)[..] else { panic!() };
    let refusal = HostEvent::IoError(refused, STAGGER_ERROR_REFUSED, 0, "connection refused (os error 111)".into());
    let next = owned(&abi.step(MS, &[refusal]).actions());
    let [(second, ref address)] = dials(&next)[..] else { panic!("the next broker at once: {next:?}") };
    assert_eq!(address, "b2:9093");
    assert!(!next.contains(&Act::Close(refused)), "the host dropped the refused one itself");

    let sends = owned(&abi.step(2 * MS, &[HostEvent::Connected(second)]).actions());
    let all = serve(&abi, 3 * MS, second, &mut Broker::default(), sends);
    assert!(all.contains(&Act::Refreshed(1, "b2:9093".into())), "{all:?}");
    let attempts = &abi.report()["last_refresh"]["attempts"];
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["error_kind"]["kind"], "refused");
    assert!(attempts[0]["error"].as_str().unwrap().contains("connection refused (os error 111)"), "{attempts}");
    assert_eq!(attempts[1]["outcome"], "won");
}

#[test]
fn a_give_up_carries_the_last_error_and_every_brokers() {
    let abi = one_shot("");
    let mut acts = owned(&abi.step(0, &[request()]).actions());
    let mut t = 0;
    let failed = loop {
        if let Some(Act::RefreshFailed(epoch, error)) = acts.iter().find(|a| matches!(a, Act::RefreshFailed(..))) {
            break (*epoch, error.clone());
        }
        t += MS;
        let events: Vec<_> = dials(&acts)
            .into_iter()
            .map(|(c, _)| HostEvent::IoError(c, STAGGER_ERROR_CONNECT_TIMEOUT, 0, String::new()))
            .collect();
        acts = owned(&abi.step(t, &events).actions());
        assert!(t < 100 * MS, "gives up");
    };
    let (epoch, error) = failed;
    assert_eq!(epoch, 1);
    assert_eq!(error["reason"], "all_failed");
    assert_eq!(error["last_error"]["kind"], "connect_timeout");
    assert_eq!(error["last_error"]["address"], "b2:9093");
    let brokers: Vec<&str> =
        error["brokers"].as_array().unwrap().iter().map(|b| b["address"].as_str().unwrap()).collect();
    assert_eq!(brokers, ["b1:9092", "b2:9093"]);
    assert!(error["message"].as_str().unwrap().starts_with("metadata refresh failed"), "{error}");
    let report = abi.report();
    assert_eq!(report["last_refresh"]["outcome"], "failed");
    assert_eq!(report["last_refresh"]["error"], error, "the report carries the same error");
}

#[test]
fn a_hung_broker_is_overtaken_at_the_wake_up_the_step_named() {
    let abi = one_shot("");
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(hung, _)] = dials(&first)[..] else { panic!() };
    let step = abi.step(MS, &[HostEvent::Connected(hung)]);
    assert_eq!(step.actions().next_wakeup_ns, Some(500 * MS), "the stagger delay");
    let running = &abi.report()["running"];
    assert_eq!(
        (running["outcome"].as_str(), running["attempts"][0]["outcome"].as_str()),
        (Some("running"), Some("in_flight"))
    );
    assert_eq!(running["attempts"][0]["connected_ms"], 1.0);
    let early = abi.step(499 * MS, &[]);
    assert!(dials(&owned(&early.actions())).is_empty(), "not before the stagger");
    let tick = owned(&abi.step(500 * MS, &[]).actions());
    let [(second, _)] = dials(&tick)[..] else { panic!("{tick:?}") };
    let sends = owned(&abi.step(501 * MS, &[HostEvent::Connected(second)]).actions());
    let all = serve(&abi, 502 * MS, second, &mut Broker::default(), sends);
    assert!(all.contains(&Act::Close(hung)), "the hung one is closed: {all:?}");
}

#[test]
fn time_going_backwards_is_clamped_not_an_error() {
    let abi = one_shot("");
    let first = owned(&abi.step(10 * SECOND, &[request()]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!() };
    let step = abi.step(10 * SECOND + MS, &[HostEvent::Connected(conn)]);
    let wakeup = step.actions().next_wakeup_ns.unwrap();
    assert_eq!(wakeup, 10 * SECOND + 500 * MS);
    let back = abi.step(5 * SECOND, &[]);
    assert_eq!(back.actions().next_wakeup_ns, Some(wakeup), "the clock stays where it was");
    assert!(back.actions().actions.is_empty(), "nothing fires in the past");
    assert_eq!(dials(&owned(&abi.step(wakeup, &[]).actions())).len(), 1, "and the timer still fires on time");
}

#[test]
fn scram_takes_its_nonce_from_an_event_and_no_output_carries_the_password() {
    let sasl = format!(r#", "sasl": {{"mechanism": "SCRAM-SHA-256", "username": "alice", "password": "{PASSWORD}"}}"#);
    let abi = one_shot(&sasl);
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!() };
    assert_eq!(first[2], Act::NeedNonce(conn), "the nonce is asked for right after the dial");
    let held = owned(&abi.step(MS, &[HostEvent::Connected(conn)]).actions());
    assert!(held.is_empty(), "the first request waits for the nonce: {held:?}");
    let sends = owned(&abi.step(MS, &[HostEvent::Nonce(conn, [7; 18])]).actions());
    let mut broker = Broker::default();
    let all = serve(&abi, 2 * MS, conn, &mut broker, sends);
    assert!(all.iter().any(|a| matches!(a, Act::Refreshed(1, _))), "{all:?}");
    use kafka_protocol::messages::ApiKey::*;
    assert_eq!(broker.seen, [ApiVersions, SaslHandshake, SaslAuthenticate, SaslAuthenticate, Metadata]);
    for json in [abi.report().to_string(), abi.metadata().to_string()] {
        assert!(!json.contains(PASSWORD), "{json}");
    }
    assert!(!format!("{all:?}").contains("Secret"), "sanity");
}

#[test]
fn oauthbearer_takes_a_fresh_token_from_an_event_and_a_failed_one_fails_the_attempt() {
    let abi = one_shot(r#", "sasl": {"mechanism": "OAUTHBEARER"}, "fresh_tokens": true"#);
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!() };
    assert_eq!(first[2], Act::NeedToken(conn));
    let events = [HostEvent::Connected(conn), HostEvent::Token(conn, "fresh.jwt".into())];
    let sends = owned(&abi.step(MS, &events).actions());
    let mut broker = Broker::default();
    let all = serve(&abi, 2 * MS, conn, &mut broker, sends);
    assert!(all.iter().any(|a| matches!(a, Act::Refreshed(..))), "{all:?}");
    assert_eq!(broker.bearer, [b"n,,\x01auth=Bearer fresh.jwt\x01\x01".to_vec()]);
    assert!(!abi.report().to_string().contains("fresh.jwt"));

    let abi = one_shot(r#", "sasl": {"mechanism": "OAUTHBEARER"}, "fresh_tokens": true"#);
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!() };
    let after = owned(&abi.step(MS, &[HostEvent::TokenFailed(conn, "idp down".into())]).actions());
    assert!(after.contains(&Act::Close(conn)), "{after:?}");
    let failed = after.iter().find_map(|a| if let Act::RefreshFailed(_, e) = a { Some(e.clone()) } else { None });
    let error = failed.expect("an authentication failure is fatal for the refresh");
    assert_eq!(error["reason"], "fatal");
    assert!(error["last_error"]["detail"].as_str().unwrap().contains("idp down"), "{error}");
}

#[test]
fn a_long_lived_session_keeps_its_connection_and_the_next_request_reuses_it() {
    let config = r#"{"seeds": ["b1:9092"], "settings": {"refresh_interval": "60s"}}"#;
    let abi = Abi::new(config, 0, 1).unwrap();
    let first = owned(&abi.step(0, &[request()]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!() };
    let sends = owned(&abi.step(MS, &[HostEvent::Connected(conn)]).actions());
    let mut broker = Broker::default();
    let all = serve(&abi, 2 * MS, conn, &mut broker, sends);
    assert!(!all.contains(&Act::Close(conn)), "kept: {all:?}");
    let idle = abi.step(3 * MS, &[]);
    assert_eq!(idle.actions().next_wakeup_ns, Some(2 * MS + 60 * SECOND), "the periodic refresh is due");
    assert_eq!(abi.report()["kept_connection"], conn);

    let again =
        owned(&abi.step(10 * MS, &[HostEvent::RequestRefresh(STAGGER_CAUSE_STALE_METADATA, String::new())]).actions());
    assert_eq!(again[0], Act::RefreshRequested(2));
    assert!(dials(&again).is_empty() && matches!(again[1], Act::Send(c, _) if c == conn), "reused: {again:?}");
    let all = serve(&abi, 11 * MS, conn, &mut broker, again);
    assert!(all.contains(&Act::Refreshed(2, "b1:9092".into())), "{all:?}");
    let stats = &abi.report()["stats"];
    assert_eq!((stats["connections_opened"].as_u64(), stats["connections_reused"].as_u64()), (Some(1), Some(1)));
    assert_eq!(abi.report()["last_refresh"]["cause"], "stale_metadata");

    // The broker resets the kept connection: the next refresh dials anew.
    let reset = owned(&abi.step(20 * MS, &[HostEvent::Closed(conn, true)]).actions());
    assert!(reset.is_empty(), "the host closed it: no CLOSE ({reset:?})");
    let named = HostEvent::RequestRefresh(STAGGER_CAUSE_CONNECTION_LOST, "b1:9092".into());
    let third = owned(&abi.step(21 * MS, &[named]).actions());
    assert_eq!(dials(&third).len(), 1, "{third:?}");
}

#[test]
fn seeds_given_by_name_are_resolved_through_actions_and_events() {
    let config = r#"{"seeds": ["kafka.example:9092"], "resolve_names": true, "one_shot": true}"#;
    let abi = Abi::new(config, 0, 1).unwrap();
    let first = owned(&abi.step(0, &[request()]).actions());
    let Act::Resolve(lookup, ref name) = first[1] else { panic!("{first:?}") };
    assert_eq!(name, "kafka.example:9092");
    let resolved = HostEvent::Resolved(lookup, vec!["10.0.0.1:9092".parse().unwrap()]);
    let next = owned(&abi.step(MS, &[resolved]).actions());
    assert_eq!(dials(&next), [(next_conn(&next), "10.0.0.1:9092".to_string())]);
}

fn next_conn(acts: &[Act]) -> u64 {
    dials(acts)[0].0
}

#[test]
fn events_about_unknown_connections_are_ignored_and_counted() {
    let abi = one_shot("");
    let step = abi.step(0, &[HostEvent::Connected(12345), HostEvent::Received(999, b"junk".to_vec())]);
    assert!(step.actions().actions.is_empty());
    assert_eq!(abi.report()["ignored_events"], 2);
}
