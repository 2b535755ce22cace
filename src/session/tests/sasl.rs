//! SASL through the session: nonces and tokens come from host events, never callbacks.

use super::*;

/// A SASL refresh: the nonce or token asked right after the `Dial`, the first request held
/// until it comes.
fn sasl_refresh(sasl: Sasl, fresh_tokens: bool, answer: impl FnOnce(ConnId) -> Event<'static>) -> Broker {
    let exchange = ExchangeConfig { sasl: Some(sasl), ..ExchangeConfig::default() };
    let mut s = session(SessionConfig { exchange, fresh_tokens, ..config() });
    let mut broker = Broker::default();
    sasl_refresh_on(&mut s, &mut broker, ms(0), answer);
    broker
}

/// A refresh of `s` at `at` on a new connection to `broker`; returns the connection.
fn sasl_refresh_on(
    s: &mut Session,
    broker: &mut Broker,
    at: Instant,
    answer: impl FnOnce(ConnId) -> Event<'static>,
) -> ConnId {
    let epoch = s.request_refresh(at);
    let first = actions(s);
    let [(conn, _)] = dials(&first)[..] else { panic!("{first:?}") };
    assert!(matches!(first[1], Action::NeedNonce { conn: c } | Action::NeedToken { conn: c } if c == conn));
    s.handle_event(at, Event::Connected { conn });
    assert_eq!(actions(s), [], "the first request waits for the nonce or token");
    s.handle_event(at, answer(conn));
    let sends = actions(s);
    let all = serve(s, at, conn, broker, sends);
    assert_eq!(refreshed(&all), Some(epoch), "{all:?}");
    conn
}

#[test]
fn scram_derives_the_passwords_keys_once_per_session() {
    let sasl = Sasl::Scram { hash: ScramHash::Sha256, username: "alice".into(), password: Secret::new(PASSWORD) };
    let exchange = ExchangeConfig { sasl: Some(sasl), ..ExchangeConfig::default() };
    let mut s = session(SessionConfig { exchange, ..config() });
    let mut broker = Broker::default();
    let conn = sasl_refresh_on(&mut s, &mut broker, ms(0), |conn| Event::Nonce { conn, bytes: [7; 18] });
    let keys = s.scram_keys.clone().expect("the first authentication's keys are kept");

    // The broker closes the kept connection: the next refresh authenticates a new one, with
    // another nonce, and proves it with the kept keys (the fake broker checks the proof).
    s.handle_event(ms(10), Event::Closed { conn, how: CloseKind::Clean });
    let _ = actions(&mut s);
    sasl_refresh_on(&mut s, &mut broker, ms(20), |conn| Event::Nonce { conn, bytes: [9; 18] });
    let authenticates = broker.seen.iter().filter(|&&key| key == ApiKey::SaslAuthenticate).count();
    assert_eq!(authenticates, 4, "two connections, each client-first and client-final");
    assert!(Arc::ptr_eq(&keys, s.scram_keys.as_ref().unwrap()), "no second derivation");
    assert!(!alloc::format!("{s:?}").contains(PASSWORD), "no credential in Debug");
}

#[test]
fn scram_takes_its_nonce_from_an_event() {
    let sasl = Sasl::Scram { hash: ScramHash::Sha256, username: "alice".into(), password: Secret::new(PASSWORD) };
    let broker = sasl_refresh(sasl, false, |conn| Event::Nonce { conn, bytes: [7; 18] });
    let expected = [ApiKey::ApiVersions, ApiKey::SaslHandshake, ApiKey::SaslAuthenticate, ApiKey::SaslAuthenticate];
    assert_eq!(broker.seen[..4], expected);
    assert_eq!(broker.seen[4], ApiKey::Metadata);
}

#[test]
fn oauthbearer_takes_a_fresh_token_from_an_event() {
    let sasl = Sasl::OAuthBearer { token: Secret::new("stale") };
    let broker = sasl_refresh(sasl, true, |conn| Event::Token { conn, token: Ok(Secret::new("fresh.jwt")) });
    assert_eq!(broker.bearer, [b"n,,\x01auth=Bearer fresh.jwt\x01\x01".to_vec()]);
}

#[test]
fn plain_needs_nothing_from_the_host() {
    let exchange = ExchangeConfig {
        sasl: Some(Sasl::Plain { username: "alice".into(), password: Secret::new(PASSWORD) }),
        ..ExchangeConfig::default()
    };
    let mut s = session(SessionConfig { exchange, ..config() });
    let mut broker = Broker::default();
    healthy_refresh(&mut s, &mut broker);
    assert_eq!(broker.seen.len(), 4, "ApiVersions, SaslHandshake, SaslAuthenticate, Metadata");
    assert!(!alloc::format!("{s:?}").contains(PASSWORD), "no credential in Debug");
}

#[test]
fn a_token_failure_fails_the_attempt_as_authentication() {
    let exchange =
        ExchangeConfig { sasl: Some(Sasl::OAuthBearer { token: Secret::new("x") }), ..ExchangeConfig::default() };
    let mut s = session(SessionConfig { exchange, fresh_tokens: true, ..config() });
    s.request_refresh(ms(0));
    let [(conn, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Token { conn, token: Err("idp down".into()) });
    let after = actions(&mut s);
    // Fatal: the refresh fails at once, its last action after the failed one's `Close`.
    let close = after.iter().position(|a| *a == Action::Close { conn });
    let failed = after.iter().position(|a| matches!(a, Action::RefreshFailed { .. }));
    assert!(close.is_some() && close < failed, "{after:?}");
    let record = s.cluster().current().or(s.last_refresh()).unwrap().attempts().next().unwrap().1;
    assert_eq!(record.state, crate::refresh::AttemptState::Failed);
}
