//! A real Kafka cluster with a counting forwarder in front of every broker's PLAINTEXT and
//! SASL_SSL listener: what the one-shot measurement programs (`gentleness`, `seed_order`,
//! `rule_costs`) share, so each says only what it compares.

use std::error::Error;
use std::time::Duration;

use stagger::kafka::sasl::{Sasl, Secret};
use stagger::kafka::ExchangeConfig;
use stagger::RefreshConfig;
use stagger_kafka_fixture::{KafkaCluster, Options, SASL_PASSWORD, SASL_USERNAME};
use stagger_tokio::{refresh_with, RefreshOptions, TlsOptions};

use crate::counting::{CountingForwarder, Snapshot};

/// What the measurement programs return.
pub type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Time a refresh's cancelled connections get to reach the forwarders' counts.
pub const SETTLE: Duration = Duration::from_millis(30);

/// Which listener a refresh goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// Plain TCP.
    Plaintext,
    /// TLS, then SASL SCRAM-SHA-512 with the fixture's user.
    SaslSsl,
}

impl Listener {
    /// Both, in the order the programs report them.
    pub const ALL: [Listener; 2] = [Listener::Plaintext, Listener::SaslSsl];

    /// The name the tables print.
    pub fn name(self) -> &'static str {
        match self {
            Listener::Plaintext => "PLAINTEXT",
            Listener::SaslSsl => "SASL_SSL SCRAM-512",
        }
    }
}

/// A cluster behind counting forwarders.
pub struct Forwarded {
    /// The cluster (`pause` and `kill` its brokers through it).
    pub kafka: KafkaCluster,
    plaintext: Vec<CountingForwarder>,
    sasl_ssl: Vec<CountingForwarder>,
}

impl Forwarded {
    /// Starts a cluster of `brokers` (`scripts/kafka.sh`) and a forwarder per listener; every
    /// `--broker-property KEY=VALUE` on the command line goes to every broker.
    pub async fn start(brokers: u32) -> Res<Forwarded> {
        let broker_properties = args("--broker-property");
        if !broker_properties.is_empty() {
            eprintln!("brokers run with {}", broker_properties.join(", "));
        }
        let options = Options { brokers, broker_properties, ..Options::default() };
        let Some(kafka) = KafkaCluster::start(&options) else {
            return Err("this machine cannot run Kafka (Java 17+ and Maven are needed)".into());
        };
        let mut plaintext = Vec::new();
        let mut sasl_ssl = Vec::new();
        for (p, s) in kafka.plaintext().iter().zip(kafka.sasl_ssl()) {
            plaintext.push(CountingForwarder::start(p).await?);
            sasl_ssl.push(CountingForwarder::start(&s).await?);
        }
        Ok(Forwarded { kafka, plaintext, sasl_ssl })
    }

    /// The forwarders of `listener`, broker 1 first.
    pub fn forwarders(&self, listener: Listener) -> &[CountingForwarder] {
        match listener {
            Listener::Plaintext => &self.plaintext,
            Listener::SaslSsl => &self.sasl_ssl,
        }
    }

    /// The seed list through `listener`'s forwarders, broker 1 first.
    pub fn seeds(&self, listener: Listener) -> Vec<String> {
        self.forwarders(listener).iter().map(|f| f.address().to_owned()).collect()
    }

    /// What every broker of `listener` has paid so far, broker 1 first.
    pub fn per_broker(&self, listener: Listener) -> Vec<Snapshot> {
        self.forwarders(listener).iter().map(CountingForwarder::snapshot).collect()
    }

    /// What the brokers of `listener` have paid so far, together.
    pub fn counts(&self, listener: Listener) -> Snapshot {
        self.per_broker(listener).into_iter().fold(Snapshot::default(), |a, s| a + s)
    }

    /// Options for a one-shot refresh with `config` through `listener` (its TLS and SASL).
    pub fn options(&self, listener: Listener, config: RefreshConfig) -> Res<RefreshOptions> {
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        match listener {
            Listener::Plaintext => Ok(options),
            Listener::SaslSsl => {
                Ok(over_sasl_ssl(options, "SCRAM-SHA-512", SASL_USERNAME, SASL_PASSWORD, self.kafka.ca())?)
            }
        }
    }

    /// `refreshes` one-at-a-time refreshes through each listener, so the brokers' JIT has
    /// compiled their request paths before anything is measured.
    pub async fn warm_up(&self, refreshes: usize) -> Res<()> {
        eprintln!("warming up the brokers ({refreshes} refreshes per listener)");
        for i in 0..refreshes {
            for listener in Listener::ALL {
                let mut config = RefreshConfig::default().with_seed(i as u64);
                config.fanout.max_in_flight = 1;
                refresh_with(&self.options(listener, config)?, &self.seeds(listener), |_| {}).await?;
            }
        }
        Ok(())
    }
}

/// `options` over SASL_SSL: TLS trusting the PEM file `ca_file`, then SASL `mechanism` as
/// `username`. Every lab program that connects to the test cluster's SASL_SSL listener builds
/// its options here.
pub fn over_sasl_ssl(
    mut options: RefreshOptions,
    mechanism: &str,
    username: &str,
    password: &str,
    ca_file: std::path::PathBuf,
) -> Result<RefreshOptions, String> {
    let sasl = Sasl::from_parts(mechanism, username, Secret::new(password))
        .ok_or_else(|| format!("unknown SASL mechanism {mechanism:?}"))?;
    options.exchange = ExchangeConfig { sasl: Some(sasl), ..ExchangeConfig::default() };
    options.tls = Some(TlsOptions { ca_file: Some(ca_file), ..TlsOptions::default() });
    Ok(options)
}

/// Prints a table row and appends it to `out`, the table a program writes with `--out`.
pub fn emit(out: &mut String, row: &str) {
    println!("{row}");
    out.push_str(row);
    out.push('\n');
}

/// Writes the table to the path `--out` names, if it names one.
pub fn write_out(out: &str) -> Res<()> {
    if let Some(path) = arg("--out") {
        std::fs::write(&path, out)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// Every value of `--name` on the command line, in order.
pub fn args(name: &str) -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).filter(|w| w[0] == name).map(|w| w[1].clone()).collect()
}

/// The value of `--name` on the command line, if given.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}
