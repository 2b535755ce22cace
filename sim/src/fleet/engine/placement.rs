//! The warm state a fit takes from a real run, laid over the simulated warm-up: where the
//! clients' kept connections lead, and which of them hold a spare. The model's own warm-up
//! spreads leads by seed rotation and keeps no spares; a real cold start over SASL_SSL herds
//! leads onto the broker whose TLS handshakes finished first and leaves spares beside them,
//! and a storm's peak and new connections follow from exactly that state.

use super::{broker_of, mix, Engine, Mode};
use crate::fleet::{FleetConfig, FleetScenario};
use stagger::{BrokerIndex, Cluster, Rng};

/// Moves each client's lead so that [`FleetConfig::warm_leads`] of them lead on each broker
/// of `order` (the scenario's brokers, those it fails first), drawing each client's broker
/// from those shares ([`lead_to`] moves it).
pub(super) fn place_leads(e: &mut Engine, config: &FleetConfig, order: &[usize]) {
    let total: f64 = config.warm_leads.iter().filter(|s| s.is_finite() && **s > 0.0).sum();
    if total <= 0.0 {
        return;
    }
    let mut pick = Rng::new(mix(config.seed, 0x5F));
    for c in &mut e.clients {
        let Some(cluster) = &mut c.cluster else { continue };
        let mut u = pick.unit() * total;
        let mut target = None;
        for (&share, &broker) in config.warm_leads.iter().zip(order) {
            let share = if share.is_finite() { share.max(0.0) } else { 0.0 };
            if u < share {
                target = Some(broker);
                break;
            }
            u -= share;
        }
        if let Some(broker) = target {
            lead_to(cluster, broker);
        }
    }
}

/// Makes a connection to simulated broker `broker` the client's lead, as a cold start's first
/// choice becomes its home ([`Cluster::keep_first_choice`]); the old lead's connection becomes a
/// spare if the new lead was one (so the client holds as many connections as before), and is
/// dropped otherwise.
fn lead_to(cluster: &mut Cluster, broker: usize) {
    let target = (0..cluster.book().len())
        .map(|k| BrokerIndex(k as u32))
        .find(|&k| broker_of(cluster.book().address(k)) == Some(broker));
    let (Some(lead), Some(target)) = (cluster.kept(), target) else { return };
    if lead == target {
        return;
    }
    let was_spare = cluster.kept_brokers().contains(&target);
    cluster.connection_closed(lead);
    cluster.connection_closed(target);
    if cluster.keep_first_choice(target) {
        if was_spare {
            cluster.keep_spare(lead);
        }
    } else {
        // No room for a home (no spares configured): leave the client as it was.
        cluster.keep_spare(lead);
        if was_spare {
            cluster.keep_spare(target);
        }
    }
}

/// Gives a share ([`FleetConfig::warm_spares`]) of the warmed clients one spare connection
/// each, to the first broker from a random start that the core would take one to.
pub(super) fn give_spares(engine: &mut Engine, config: &FleetConfig) {
    if config.warm_spares <= 0.0 {
        return;
    }
    let mut pick = Rng::new(mix(config.seed, 0x5D));
    for c in &mut engine.clients {
        let Some(cluster) = &mut c.cluster else { continue };
        let n = cluster.book().len();
        let (given, start) = (pick.unit() < config.warm_spares, pick.below(n.max(1)));
        if !given || n == 0 {
            continue;
        }
        keep_spare_from(cluster, start, |_| true);
    }
}

/// Gives clients whose lead is a failing broker more spares, up to
/// [`FleetConfig::warm_spares_failing`] of them: `q` of those without one get one, where
/// `w + (1 − w)·q = p` for the warm-up's share `w` and the asked share `p`.
pub(super) fn top_up_failing_spares(e: &mut Engine, config: &FleetConfig, scenario: FleetScenario) {
    let Some(p) = config.warm_spares_failing else { return };
    let w = config.warm_spares.clamp(0.0, 1.0);
    if p <= w || w >= 1.0 {
        return;
    }
    let q = (p.min(1.0) - w) / (1.0 - w);
    let mut pick = Rng::new(mix(config.seed, 0x5E + scenario as u64));
    let brokers = &e.brokers;
    for c in &mut e.clients {
        let Some(cluster) = &mut c.cluster else { continue };
        let Some(lead) = cluster.kept() else { continue };
        let failing = broker_of(cluster.book().address(lead))
            .and_then(|b| brokers.get(b))
            .is_some_and(|b| b.mode != Mode::Healthy);
        if !failing || cluster.kept_brokers().len() > 1 || pick.unit() >= q {
            continue;
        }
        let start = pick.below(cluster.book().len().max(1));
        keep_spare_from(cluster, start, |address| {
            broker_of(address).and_then(|g| brokers.get(g)).is_some_and(|g| g.mode == Mode::Healthy)
        });
    }
}

/// Keeps a spare connection to the first broker from book position `start` (wrapping) whose
/// address `allowed` accepts and that the core would take a spare to.
fn keep_spare_from(cluster: &mut Cluster, start: usize, allowed: impl Fn(&str) -> bool) {
    let n = cluster.book().len();
    let spare = (0..n)
        .map(|k| BrokerIndex(((start + k) % n) as u32))
        .find(|&b| allowed(cluster.book().address(b)) && cluster.wants_spare(b));
    if let Some(b) = spare {
        cluster.keep_spare(b);
    }
}
