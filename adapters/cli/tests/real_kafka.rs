//! `stagger metadata --json` against real Apache Kafka (`scripts/kafka.sh`): the cluster's
//! real brokers, topics, partitions, leaders and cluster id, as librdkafka's client sees them.

use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use stagger_kafka_fixture::librdkafka::{create_topic, librdkafka_view, FullView, Partition};
use stagger_kafka_fixture::KafkaCluster;

const TOPIC: &str = "stagger-cli-orders";

fn ids(value: &Value) -> Vec<i32> {
    let mut ids: Vec<i32> = value.as_array().expect("an id list").iter().map(|v| v.as_i64().unwrap() as i32).collect();
    ids.sort();
    ids
}

/// The `--json` output in librdkafka's shape (replicas in the broker's order, isr sorted).
fn view_of(json: &Value) -> FullView {
    let mut brokers: Vec<(i32, String)> = json["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| (b["id"].as_i64().unwrap() as i32, format!("{}:{}", b["host"].as_str().unwrap(), b["port"])))
        .collect();
    brokers.sort();
    let mut topics: Vec<(String, Vec<Partition>)> = json["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .filter(|t| t["name"] == TOPIC)
        .map(|t| {
            let mut partitions: Vec<Partition> = t["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let replicas =
                        p["replicas"].as_array().unwrap().iter().map(|r| r.as_i64().unwrap() as i32).collect();
                    (p["id"].as_i64().unwrap() as i32, p["leader"].as_i64().unwrap() as i32, replicas, ids(&p["isr"]))
                })
                .collect();
            partitions.sort();
            (TOPIC.to_owned(), partitions)
        })
        .collect();
    topics.sort();
    FullView { brokers, topics }
}

#[tokio::test]
async fn metadata_json_lists_the_real_clusters_brokers_topics_leaders_and_id() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let seeds = kafka.plaintext().join(",");
    create_topic(&seeds, TOPIC, 4, 3).await;
    // A leader may move between our read and librdkafka's: five disagreements in a row fail.
    let mut last = None;
    for _ in 0..5 {
        let output = Command::cargo_bin("stagger")
            .unwrap()
            .env("XDG_CONFIG_HOME", std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-stagger-config"))
            .env_remove("STAGGER_CONFIG")
            .args(["metadata", "-b", &seeds, "--json"])
            .timeout(Duration::from_secs(60))
            .output()
            .expect("run stagger");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let json: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert_eq!(json["cluster_id"], kafka.cluster_id());
        let controller = json["controller_id"].as_i64().unwrap();
        assert!((1..=3).contains(&controller), "controller {controller}");
        assert_eq!(json["refresh"]["attempts"].as_array().unwrap().iter().filter(|a| a["outcome"] == "won").count(), 1);
        let ours = view_of(&json);
        let reference = librdkafka_view(&seeds, &[TOPIC]);
        if ours == reference {
            let expected: Vec<(i32, String)> = (1..=3).map(|n| (n as i32, kafka.address(n))).collect();
            assert_eq!(ours.brokers, expected);
            assert_eq!(ours.topics[0].1.len(), 4, "{ours:?}");
            return;
        }
        last = Some((ours, reference));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (ours, reference) = last.unwrap();
    panic!("stagger metadata --json and librdkafka disagree:\n stagger:    {ours:?}\n librdkafka: {reference:?}");
}

/// A Java `client.properties` for SASL_SSL with SCRAM (as a user has it) reaches the real
/// cluster's SASL_SSL listener; the same file with a wrong password fails fatally and the
/// password is printed nowhere.
#[test]
fn a_java_client_properties_file_authenticates_over_sasl_ssl_and_a_wrong_password_is_not_printed() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let dir = std::env::temp_dir().join(format!("stagger-cli-sasl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |password: &str| {
        let path = dir.join(format!("client-{}.properties", password.len()));
        std::fs::write(
            &path,
            format!(
                "bootstrap.servers={}\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
                 username=\"{}\" password=\"{password}\";\nssl.ca.location={}\nacks=all\n",
                kafka.sasl_ssl().join(","),
                stagger_kafka_fixture::SASL_USERNAME,
                kafka.ca().display()
            ),
        )
        .unwrap();
        path
    };
    let run = |path: &std::path::Path| {
        Command::cargo_bin("stagger")
            .unwrap()
            .env("XDG_CONFIG_HOME", &dir)
            .env_remove("STAGGER_CONFIG")
            .args(["metadata", "--json", "-F"])
            .arg(path)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let good = run(&file(stagger_kafka_fixture::SASL_PASSWORD));
    let stderr = String::from_utf8_lossy(&good.stderr);
    assert!(good.status.success(), "{stderr}");
    assert!(stderr.contains("unknown key \"acks\" (ignored)"), "{stderr}");
    let json: Value = serde_json::from_slice(&good.stdout).expect("JSON");
    assert_eq!(json["cluster_id"], kafka.cluster_id());

    let wrong = "not-the-stagger-secret-either";
    let bad = run(&file(wrong));
    assert!(!bad.status.success());
    let all = format!("{}{}", String::from_utf8_lossy(&bad.stdout), String::from_utf8_lossy(&bad.stderr));
    assert!(all.contains("SASL_AUTHENTICATION_FAILED") && all.contains("SCRAM-SHA-512"), "{all}");
    assert!(!all.contains(wrong), "the password was printed: {all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A wrong password against every broker at once: the first broker to refuse it ends the
/// refresh, and the error says so of each broker — the one that failed, and the others,
/// still in flight, "cancelled: another broker's failure was fatal" (not a timeout, which
/// none of them had). Silent brokers are not cancelled for another's answer here, so all
/// three are in flight when the first refusal arrives, however the machine is loaded.
#[test]
fn a_wrong_password_on_every_broker_at_once_says_which_failed_and_which_were_cancelled_for_it() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let wrong = "Wr0ng-pw-for-the-broker-stories";
    let out = Command::cargo_bin("stagger")
        .unwrap()
        .env("XDG_CONFIG_HOME", std::env::temp_dir().join("stagger-cli-no-config"))
        .env_remove("STAGGER_CONFIG")
        .args(["metadata", "-b", &kafka.sasl_ssl().join(","), "--ca"])
        .arg(kafka.ca())
        .args(["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512"])
        .args(["-X", &format!("sasl.username={}", stagger_kafka_fixture::SASL_USERNAME)])
        .args(["-X", &format!("sasl.password={wrong}")])
        .args(["--initial", "3", "--no-cancel-silent", "--set", "fanout.tuning.cancel_outrun=false"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(wrong) && out.stdout.is_empty(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().skip(1).collect();
    assert_eq!(lines.len(), kafka.sasl_ssl().len(), "one line per broker:\n{stderr}");
    let failed = lines.iter().filter(|l| l.contains(": broker error 58 (SASL_AUTHENTICATION_FAILED): ")).count();
    let cancelled = lines.iter().filter(|l| l.ends_with(": cancelled: another broker's failure was fatal (1 attempt)"));
    assert_eq!((failed, cancelled.count()), (1, lines.len() - 1), "{stderr}");
}
