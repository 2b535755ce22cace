//! The properties parser against the files people actually have: librdkafka / kcat files,
//! Java `client.properties` with `sasl.jaas.config`, and `-X` pairs layered over them.

use std::path::PathBuf;
use std::time::Duration;

use stagger::kafka::sasl::{Sasl, ScramHash, Secret};

use stagger_tokio::properties::*;
use stagger_tokio::*;

const PASSWORD: &str = "pa55-w0rd-never-shown";

fn resolve(text: &str) -> Result<ClientSettings, PropertiesError> {
    ClientProperties::parse_file_text(text, "client.properties").resolve()
}

fn error(text: &str) -> String {
    resolve(text).expect_err("these settings are refused").to_string()
}

/// A file in a fresh directory of the temp dir, for the keys that name files.
fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stagger-properties-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

#[test]
fn a_librdkafka_file_gives_seeds_tls_sasl_client_id_and_timeout() {
    let text = format!(
        "# kcat -F file\n\
         metadata.broker.list=SASL_SSL://k1:9093, k2:9093,,\n\
         security.protocol=sasl_ssl\n\
         sasl.mechanisms=SCRAM-SHA-512\n\
         sasl.username=alice\n\
         sasl.password={PASSWORD}\n\
         ssl.ca.location=/etc/kafka/ca.pem\n\
         ssl.certificate.location=/etc/kafka/client.pem\n\
         ssl.key.location=/etc/kafka/client.key\n\
         ssl.endpoint.identification.algorithm=https\n\
         socket.connection.setup.timeout.ms=2500\n\
         client.id=orders-lister\n"
    );
    let settings = resolve(&text).unwrap();
    assert_eq!(settings.seeds, ["k1:9093", "k2:9093"]);
    assert_eq!(settings.protocol, SecurityProtocol::SaslSsl);
    let tls = settings.tls.as_ref().expect("SASL_SSL is TLS");
    assert_eq!(tls.ca_file.as_deref(), Some(std::path::Path::new("/etc/kafka/ca.pem")));
    let cert = tls.client_cert.as_ref().expect("a client certificate");
    assert_eq!(
        (cert.cert_file.to_str(), cert.key_file.to_str()),
        (Some("/etc/kafka/client.pem"), Some("/etc/kafka/client.key"))
    );
    let expected = Sasl::Scram { hash: ScramHash::Sha512, username: "alice".into(), password: Secret::new(PASSWORD) };
    assert_eq!(settings.sasl, Some(expected));
    assert_eq!(settings.client_id.as_deref(), Some("orders-lister"));
    assert_eq!(settings.connect_timeout, Some(Duration::from_millis(2500)));
}

#[test]
fn a_java_client_properties_file_with_a_plain_jaas_config_authenticates_with_plain() {
    let text = format!(
        "! Java client.properties\n\
         bootstrap.servers = k1:9092,k2:9092\n\
         security.protocol: SASL_PLAINTEXT\n\
         sasl.mechanism PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"alice\" password=\"{PASSWORD}\";\n"
    );
    let settings = resolve(&text).unwrap();
    assert_eq!(settings.seeds, ["k1:9092", "k2:9092"]);
    assert_eq!(settings.tls, None, "SASL_PLAINTEXT is not TLS");
    assert_eq!(settings.sasl, Some(Sasl::Plain { username: "alice".into(), password: Secret::new(PASSWORD) }));
}

#[test]
fn a_scram_jaas_config_over_continuation_lines_with_escaped_quotes_is_read() {
    let text = "bootstrap.servers=k1:9093\n\
                security.protocol=SASL_SSL\n\
                sasl.mechanism=SCRAM-SHA-256\n\
                sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    \
                username=bob \\\n    \
                password=\"say \\\"hi\\\"\\\\\";\n\
                ssl.truststore.location=/etc/kafka/truststore.pem\n";
    let settings = resolve(text).unwrap();
    let expected =
        Sasl::Scram { hash: ScramHash::Sha256, username: "bob".into(), password: Secret::new("say \"hi\"\\") };
    assert_eq!(settings.sasl, Some(expected));
    assert_eq!(settings.tls.unwrap().ca_file, Some(PathBuf::from("/etc/kafka/truststore.pem")));
}

#[test]
fn an_oauthbearer_login_module_needs_no_user_and_the_token_comes_from_a_file_trimmed() {
    let file = temp_file("token", "  eyJhbGciOiJub25lIn0.e30.\n\n");
    let text = format!(
        "bootstrap.servers=k1:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n\
         sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n\
         sasl.oauthbearer.token=older-token\nsasl.oauthbearer.token.file={}\n",
        file.display()
    );
    let settings = resolve(&text).unwrap();
    assert_eq!(settings.sasl, Some(Sasl::OAuthBearer { token: Secret::new("eyJhbGciOiJub25lIn0.e30.") }));
    let mut later = ClientProperties::parse_file_text(&text, "f");
    later.set("sasl.oauthbearer.token", "newest-token");
    assert_eq!(later.resolve().unwrap().sasl, Some(Sasl::OAuthBearer { token: Secret::new("newest-token") }));
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
}

#[test]
fn aliases_name_the_same_setting_and_the_later_spelling_wins() {
    let mut p = ClientProperties::parse_file_text("bootstrap.servers=a:1\nsasl.mechanism=PLAIN\n", "f");
    p.set("metadata.broker.list", "b:2");
    p.set("sasl.mechanisms", "SCRAM-SHA-256");
    assert_eq!(p.get("bootstrap.servers"), Some("b:2"));
    assert_eq!(p.get("sasl.mechanism"), Some("SCRAM-SHA-256"));
    assert_eq!(p.resolve().expect_err("SCRAM without SASL protocol").key(), Some("sasl.mechanisms"));
    assert!(p.resolve().unwrap_err().to_string().contains("-X: sasl.mechanisms is SCRAM-SHA-256"));
}

#[test]
fn later_settings_override_earlier_ones_across_files_pairs_and_the_jaas_line() {
    let mut p = ClientProperties::parse_file_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=file-user\nsasl.password=file-pass\n\
         client.id=first\nclient.id=second\n",
        "default.conf",
    );
    assert_eq!(p.get("client.id"), Some("second"), "within a file, the last line wins");
    p.add_file_text(
        "sasl.jaas.config=x.PlainLoginModule required username=\"jaas-user\" password=\"jaas-pass\";\n",
        "client.properties",
    );
    let sasl = p.resolve().unwrap().sasl;
    assert_eq!(sasl, Some(Sasl::Plain { username: "jaas-user".into(), password: Secret::new("jaas-pass") }));
    assert!(p.set_pair("sasl.username = pair-user").is_ok());
    p.set("client.id", "third");
    let settings = p.resolve().unwrap();
    assert_eq!(settings.sasl, Some(Sasl::Plain { username: "pair-user".into(), password: Secret::new("jaas-pass") }));
    assert_eq!(settings.client_id.as_deref(), Some("third"));
    p.set("security.protocol", "SSL");
    p.set("sasl.mechanism", "");
    assert!(p.resolve().is_err(), "an emptied mechanism is still a bad value, not silently dropped");
}

#[test]
fn unknown_keys_are_warnings_naming_each_key_once_per_source_and_never_their_value() {
    let mut p = ClientProperties::parse_file_text(
        "group.id=g\nssl.keystore.password=keystore-secret\ngroup.id=h\nclient.id=c\n",
        "/etc/app/client.properties",
    );
    p.set("fetch.wait.max.ms", "10");
    let warnings: Vec<String> = p.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            r#"/etc/app/client.properties: unknown key "group.id" (ignored)"#,
            r#"/etc/app/client.properties: unknown key "ssl.keystore.password" (ignored)"#,
            r#"-X: unknown key "fetch.wait.max.ms" (ignored)"#,
        ]
    );
    assert!(!format!("{p:?}").contains("keystore-secret"));
    assert_eq!(p.resolve().unwrap().client_id.as_deref(), Some("c"), "unknown keys never fail");
}

#[test]
fn bad_values_are_errors_naming_the_source_the_key_and_the_value() {
    let cases = [
        ("security.protocol=TLS", r#"client.properties: security.protocol = "TLS": expected PLAINTEXT"#),
        ("security.protocol=SASL_SSL\nsasl.mechanism=KERBEROS", r#"sasl.mechanism = "KERBEROS": expected PLAIN, "#),
        ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI", "GSSAPI (Kerberos) is not supported"),
        (
            "socket.connection.setup.timeout.ms=10s",
            r#"socket.connection.setup.timeout.ms = "10s": expected milliseconds"#,
        ),
        ("socket.connection.setup.timeout.ms=0", r#"socket.connection.setup.timeout.ms = "0""#),
        ("bootstrap.servers= , ", r#"bootstrap.servers = ",": expected host:port"#),
        ("ssl.truststore.location=/etc/kafka/truststore.jks", "convert it (keytool -exportcert"),
        (
            "ssl.truststore.location=/etc/kafka/truststore.p12",
            r#"ssl.truststore.location = "/etc/kafka/truststore.p12""#,
        ),
        ("ssl.endpoint.identification.algorithm=none", "always verifies the broker's certificate"),
        ("ssl.endpoint.identification.algorithm=", r#"ssl.endpoint.identification.algorithm = "": this client"#),
        ("ssl.certificate.location=/c.pem", "set ssl.key.location too"),
        ("ssl.key.location=/k.pem", r#"ssl.key.location = "/k.pem": a client certificate needs both"#),
        (
            "sasl.oauthbearer.token.file=/nonexistent/token\nsecurity.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER",
            "/nonexistent/token\": could not read it",
        ),
    ];
    for (text, needle) in cases {
        let message = error(text);
        assert!(message.contains(needle), "{text:?}: {message}");
    }
}

#[test]
fn sasl_without_a_mechanism_asks_for_one_and_says_gssapi_is_not_supported() {
    let message = error("security.protocol=SASL_SSL\nsasl.username=u\nsasl.password=p\n");
    assert!(message.contains("set sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"), "{message}");
    assert!(message.contains("GSSAPI, Kafka's default, is not supported"), "{message}");
}

#[test]
fn a_mechanism_with_a_protocol_without_sasl_says_which_protocol_and_where_it_was_set() {
    let message = error("sasl.mechanism=PLAIN\n");
    assert!(message.contains("security.protocol is PLAINTEXT (the default)"), "{message}");
    let message = error("security.protocol=SSL\nsasl.mechanism=PLAIN\n");
    assert!(message.contains("security.protocol is SSL (set in client.properties)"), "{message}");
    assert!(message.contains("set security.protocol=SASL_SSL"), "{message}");
}

#[test]
fn missing_credentials_say_which_key_would_give_them() {
    let base = "security.protocol=SASL_PLAINTEXT\n";
    let message = error(&format!("{base}sasl.mechanism=SCRAM-SHA-256\nsasl.password=p\n"));
    assert!(message.contains("SCRAM-SHA-256 needs a user: set sasl.username"), "{message}");
    let message = error(&format!("{base}sasl.mechanism=PLAIN\nsasl.username=u\n"));
    assert!(message.contains("PLAIN needs a password: set sasl.password"), "{message}");
    let message = error(&format!("{base}sasl.mechanism=OAUTHBEARER\n"));
    assert!(message.contains("needs a token: set sasl.oauthbearer.token"), "{message}");
}

#[test]
fn secrets_appear_in_no_error_no_warning_and_no_debug() {
    let texts = [
        format!("ssl.key.password={PASSWORD}\nssl.key.location=/k.pem\nssl.certificate.location=/c.pem"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required username=\"u\" password=\"{PASSWORD}\""),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required password=\"{PASSWORD}\";"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required password=\"{PASSWORD};"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={PASSWORD}\n"),
        format!("security.protocol=SASL_SSL\nsasl.jaas.config=x required password=\"{PASSWORD}\"; y required;"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.password={PASSWORD}"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.password={PASSWORD}"),
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.oauthbearer.token={PASSWORD}"),
        format!("sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password={PASSWORD}"),
    ];
    for text in &texts {
        let p = ClientProperties::parse_file_text(text, "f");
        let message = p.resolve().expect_err(text).to_string();
        assert!(!message.contains(PASSWORD), "{message}");
        assert!(!format!("{p:?}").contains(PASSWORD));
    }
    let ssl_key_message = error(&texts[0]);
    assert!(
        ssl_key_message.contains("ssl.key.password: encrypted private keys are not supported"),
        "{ssl_key_message}"
    );
    assert!(error(&texts[3]).contains("sasl.jaas.config: a quoted value is not closed (value not shown)"));
    let ok = format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password={PASSWORD}");
    let settings = resolve(&ok).unwrap();
    assert!(!format!("{settings:?}").contains(PASSWORD), "{settings:?}");
    let mut p = ClientProperties::default();
    assert!(!p.set_pair(&format!("sasl.password:{PASSWORD}")).unwrap_err().to_string().contains(PASSWORD));
    assert_eq!(p.get("sasl.password"), None);
    p.set("sasl.password", PASSWORD);
    assert_eq!(p.get("sasl.password"), None, "get never returns a secret");
}

#[test]
fn comments_blank_lines_and_the_three_separators_follow_java_properties() {
    let text = "\u{feff}# comment\n   ! another\n\n  client.id   =  spaced out  \n\
                bootstrap.servers:k1:9092\nsecurity.protocol SSL\nssl.ca.location=probe\n";
    let p = ClientProperties::parse_file_text(text, "f");
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    let settings = p.resolve().unwrap();
    assert_eq!(settings.client_id.as_deref(), Some("spaced out"));
    assert_eq!(settings.seeds, ["k1:9092"]);
    assert_eq!(settings.tls, Some(TlsOptions::default()), "probe: the built-in roots");
    let none = ClientProperties::parse_file_text("ssl.ca.location=/ca.pem\n", "f").resolve().unwrap();
    assert_eq!((none.protocol, none.tls), (SecurityProtocol::Plaintext, None), "TLS keys alone do not turn TLS on");
}

#[test]
fn protocols_upgrade_the_way_tls_and_sasl_flags_need() {
    use SecurityProtocol::*;
    for (p, tls, sasl) in [
        (Plaintext, Ssl, SaslPlaintext),
        (Ssl, Ssl, SaslSsl),
        (SaslPlaintext, SaslSsl, SaslPlaintext),
        (SaslSsl, SaslSsl, SaslSsl),
    ] {
        assert_eq!((p.with_tls(), p.with_sasl()), (tls, sasl), "{p:?}");
        assert_eq!(SecurityProtocol::from_name(&p.name().to_lowercase()), Some(p));
    }
}

#[test]
fn apply_puts_client_id_sasl_tls_and_the_timeout_into_refresh_options() {
    let ok = format!(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password={PASSWORD}\n\
         client.id=me\nsocket.connection.setup.timeout.ms=1500\n"
    );
    let mut options = RefreshOptions::default();
    resolve(&ok).unwrap().apply(&mut options).unwrap();
    assert_eq!(options.exchange.client_id, "me");
    assert_eq!(options.exchange.sasl.as_ref().map(Sasl::mechanism), Some("PLAIN"));
    assert_eq!(options.tls, Some(TlsOptions::default()));
    assert_eq!(options.config.attempt_timeout, Duration::from_millis(1500));
}
