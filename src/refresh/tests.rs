//! Unit tests of the refresh's own bookkeeping limits; the policy is tested through the
//! public contract in `tests/`.

use super::*;
use crate::brokers::numbered_seeds;

fn book(n: usize) -> BrokerBook {
    BrokerBook::new(numbered_seeds(n)).unwrap()
}

#[test]
fn a_refresh_that_could_outgrow_its_attempt_table_is_refused_naming_the_field() {
    let mut config = RefreshConfig::default();
    config.retry.retries = 10;
    // 3,000 brokers × 11 passes × 2 = 66,000 > 65,536.
    let error = Refresh::new(&config, &book(3000), Instant::ZERO).unwrap_err();
    assert_eq!(error.field, "retry.retries");
    assert!(error.problem.contains("at most 9 for 3000 brokers"), "{error}");
    config.retry.retries = 9;
    let refresh = Refresh::new(&config, &book(3000), Instant::ZERO).unwrap();
    assert_eq!(refresh.attempts.capacity, 3000 * 10 * 2);

    config.retry.retries = 0;
    let error = Refresh::new(&config, &book(MAX_ATTEMPTS / 2 + 1), Instant::ZERO).unwrap_err();
    assert_eq!(error.field, "seeds");
    assert!(Refresh::new(&config, &book(MAX_ATTEMPTS / 2), Instant::ZERO).is_ok());
}
