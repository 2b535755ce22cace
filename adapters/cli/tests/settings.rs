//! `stagger metadata`'s connection settings: `-X`, `-F FILE` (librdkafka and Java files),
//! `$STAGGER_CONFIG`, the default file, and the flags over all of them — seen from outside,
//! through what a broker receives (a listener that records the first bytes: the client id
//! of the ApiVersions header, or a TLS hello), through librdkafka's mock cluster (which has
//! no SASL, so a SASL refresh fails saying so), and through stderr and exit codes.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::Command;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

const PASSWORD: &str = "n0t-for-your-eyes";

/// A scratch directory per test: HOME and XDG_CONFIG_HOME point into it, so no real
/// config file of the machine running the tests is read.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("stagger-cli-settings-{}-{name}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(dir.join("xdg")).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// `stagger metadata` with one pass, a short deadline and this directory as its world.
    fn metadata(&self) -> Command {
        let mut cmd = Command::cargo_bin("stagger").unwrap();
        cmd.timeout(Duration::from_secs(60))
            .env("HOME", &self.0)
            .env("XDG_CONFIG_HOME", self.0.join("xdg"))
            .env_remove("STAGGER_CONFIG")
            .args(["metadata", "--retries", "0", "--deadline", "10s"]);
        cmd
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// A "broker" that accepts one connection, records the first request (or TLS record) and
/// hangs up.
struct Listener {
    address: String,
    first: mpsc::Receiver<Vec<u8>>,
}

fn listener() -> Listener {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = socket.local_addr().unwrap().to_string();
    let (tx, first) = mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = socket.accept() else { return };
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
            let frame = got.len() >= 4 && got.len() >= 4 + u32::from_be_bytes(got[..4].try_into().unwrap()) as usize;
            if got[0] == 0x16 && got.len() >= 5 || frame {
                break;
            }
        }
        let _ = tx.send(got);
    });
    Listener { address, first }
}

impl Listener {
    fn bytes(&self) -> Vec<u8> {
        self.first.recv_timeout(Duration::from_secs(30)).expect("the refresh connected to the listener")
    }

    /// The client id of the first request's header: length, api key, version, correlation
    /// id, then the id as an INT16-prefixed string.
    fn client_id(&self) -> String {
        let bytes = self.bytes();
        assert_ne!(bytes.first(), Some(&0x16), "expected plaintext, got a TLS hello");
        let len = i16::from_be_bytes([bytes[12], bytes[13]]) as usize;
        String::from_utf8(bytes[14..14 + len].to_vec()).unwrap()
    }

    fn spoke_tls(&self) -> bool {
        self.bytes().first() == Some(&0x16)
    }
}

fn mock() -> (MockCluster<'static, DefaultProducerContext>, String) {
    let cluster = MockCluster::new(1).expect("mock cluster");
    let address = cluster.bootstrap_servers();
    (cluster, address)
}

/// A port with nothing listening on it.
fn closed_port() -> String {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().to_string()
}

fn run(cmd: &mut Command) -> (Option<i32>, String, String) {
    let out = cmd.output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// What the mock answers a SASL client: proof the SASL settings reached the exchange.
const NO_SASL_ON_THE_MOCK: &str = "does not list SaslAuthenticate";

#[test]
fn x_sets_the_client_id_the_broker_sees() {
    let s = Scratch::new("x-client-id");
    let broker = listener();
    s.metadata().args(["-b", &broker.address, "-X", "client.id=from-x"]).output().unwrap();
    assert_eq!(broker.client_id(), "from-x");
}

#[test]
fn x_security_protocol_ssl_makes_the_connection_tls() {
    let s = Scratch::new("x-ssl");
    let broker = listener();
    let (code, _, err) = run(s.metadata().args(["-b", &broker.address, "-X", "security.protocol=ssl"]));
    assert!(broker.spoke_tls(), "{err}");
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn f_reads_a_librdkafka_file_for_the_brokers_and_the_client_id() {
    let s = Scratch::new("f-librdkafka");
    let broker = listener();
    let file = s.file(
        "kcat.conf",
        &format!("# kcat -F\nmetadata.broker.list={}\nclient.id=from-librdkafka-file\n", broker.address),
    );
    s.metadata().arg("-F").arg(&file).output().unwrap();
    assert_eq!(broker.client_id(), "from-librdkafka-file");
}

#[test]
fn f_reads_a_java_client_properties_file_and_its_jaas_config_reaches_sasl() {
    let s = Scratch::new("f-java");
    let (_cluster, address) = mock();
    let file = s.file(
        "client.properties",
        &format!(
            "bootstrap.servers = {address}\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism = SCRAM-SHA-512\n\
             sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  \
             username=\"alice\" password=\"{PASSWORD}\";\n"
        ),
    );
    let (code, out, err) = run(s.metadata().arg("-F").arg(&file));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(NO_SASL_ON_THE_MOCK), "{err}");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD), "{err}");
    // The same file without SASL lists the mock's metadata: the rest of it was read.
    let plain = s.file("plain.properties", &format!("bootstrap.servers={address}\n"));
    let (code, out, err) = run(s.metadata().arg("-F").arg(&plain));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&address), "{out}");
}

#[test]
fn stagger_config_names_a_file_used_instead_of_the_default_one() {
    let s = Scratch::new("env");
    let broker = listener();
    s.file("xdg/stagger/stagger.conf", &format!("bootstrap.servers={}\nclient.id=from-default\n", closed_port()));
    let named = s.file("named.conf", &format!("bootstrap.servers={}\nclient.id=from-env\n", broker.address));
    s.metadata().env("STAGGER_CONFIG", &named).output().unwrap();
    assert_eq!(broker.client_id(), "from-env");
    let (code, _, err) = run(s.metadata().env("STAGGER_CONFIG", s.0.join("missing.conf")).args(["-b", "h:1"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("STAGGER_CONFIG names") && err.contains("missing.conf"), "{err}");
}

#[test]
fn the_default_file_is_read_from_xdg_config_home_and_else_from_home_dot_config() {
    let s = Scratch::new("xdg");
    let broker = listener();
    s.file("xdg/stagger/stagger.conf", &format!("bootstrap.servers={}\nclient.id=from-xdg\n", broker.address));
    s.metadata().output().unwrap();
    assert_eq!(broker.client_id(), "from-xdg");
    let broker = listener();
    s.file(".config/stagger/stagger.conf", &format!("bootstrap.servers={}\nclient.id=from-home\n", broker.address));
    s.metadata().env_remove("XDG_CONFIG_HOME").output().unwrap();
    assert_eq!(broker.client_id(), "from-home");
}

#[test]
fn flags_beat_x_which_beats_f_files_in_order_which_beat_the_default_file() {
    let s = Scratch::new("precedence");
    s.file("xdg/stagger/stagger.conf", &format!("bootstrap.servers={}\nclient.id=default\n", closed_port()));
    let first = s.file("first.conf", "client.id=first\nsecurity.protocol=PLAINTEXT\n");
    let second = s.file("second.conf", "client.id=second\n");

    let broker = listener();
    s.metadata().args(["-b", &broker.address, "-F"]).arg(&first).arg("-F").arg(&second).output().unwrap();
    assert_eq!(broker.client_id(), "second", "the later -F wins, -b beats the files' bootstrap.servers");

    let broker = listener();
    let x = ["-X", "client.id=x1", "-X", "client.id=x2", "-X"];
    s.metadata()
        .arg("-F")
        .arg(&second)
        .args(x)
        .args(["bootstrap.servers=h:1", "-b", &broker.address])
        .output()
        .unwrap();
    assert_eq!(broker.client_id(), "x2", "-X beats -F, the later -X wins, -b beats -X");

    let broker = listener();
    s.metadata()
        .arg("-F")
        .arg(&first)
        .args(["-X", "security.protocol=PLAINTEXT", "--tls", "-b", &broker.address])
        .output()
        .unwrap();
    assert!(broker.spoke_tls(), "--tls beats the files' and -X's PLAINTEXT");
}

#[test]
fn unknown_keys_are_one_warning_line_each_on_stderr() {
    let s = Scratch::new("unknown");
    let file = s.file("client.properties", "group.id=g\nssl.keystore.password=keystore-pass\n");
    let (_, _, err) = run(s.metadata().args(["-b", &closed_port(), "-X", "foo=1", "-F"]).arg(&file));
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("stagger: warning: ")).collect();
    let f = file.display();
    assert_eq!(
        warnings,
        [
            format!("stagger: warning: {f}: unknown key \"group.id\" (ignored)"),
            format!("stagger: warning: {f}: unknown key \"ssl.keystore.password\" (ignored)"),
            "stagger: warning: -X: unknown key \"foo\" (ignored)".to_string(),
        ],
        "{err}"
    );
    assert!(!err.contains("keystore-pass"), "{err}");
}

#[test]
fn a_bad_value_is_a_usage_error_naming_the_key_and_the_value() {
    let s = Scratch::new("bad");
    let file = s.file("client.properties", "socket.connection.setup.timeout.ms=soon\n");
    let missing = s.0.join("missing.properties");
    let cases: [(Vec<String>, String); 5] = [
        (vec!["-X".into(), "security.protocol=TLS".into()], r#"-X: security.protocol = "TLS": expected"#.into()),
        (
            vec!["-F".into(), file.display().to_string()],
            format!(r#"{}: socket.connection.setup.timeout.ms = "soon""#, file.display()),
        ),
        (vec!["-F".into(), missing.display().to_string()], format!("could not read {}", missing.display())),
        (
            vec!["--sasl-mechanism".into(), "GSSAPI".into()],
            r#"sasl.mechanism = "GSSAPI": GSSAPI (Kerberos) is not supported"#.into(),
        ),
        (vec!["-X".into(), "sasl.mechanism=PLAIN".into()], "security.protocol is PLAINTEXT (the default)".into()),
    ];
    for (args, needle) in cases {
        let (code, _, err) = run(s.metadata().args(["-b", "h:1"]).args(&args));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(&needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_password_is_never_printed_whatever_goes_wrong() {
    let s = Scratch::new("secret");
    let (_cluster, address) = mock();
    let password_file = s.file("password", &format!("{PASSWORD}\n"));
    let trace = s.0.join("trace.json");
    let jaas =
        |end: &str| format!("sasl.jaas.config=x.PlainLoginModule required username=\"u\" password=\"{PASSWORD}{end}");
    let runs: Vec<Vec<String>> = vec![
        // Refused, with everything written: JSON and a trace.
        vec!["-b".into(), closed_port(), "-X".into(), format!("sasl.password={PASSWORD}"), "--json".into()],
        // kcat style, against a broker without SASL.
        [
            "-b",
            &address,
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
            "-X",
            "sasl.username=u",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!("-Xsasl.password={PASSWORD}"), "--json".into(), "--trace".into(), trace.display().to_string()])
        .collect(),
        // The flags, a password file.
        vec![
            "-b".into(),
            address.clone(),
            "--sasl-mechanism".into(),
            "SCRAM-SHA-256".into(),
            "--sasl-username".into(),
            "u".into(),
            "--sasl-password-file".into(),
            password_file.display().to_string(),
        ],
        // A JAAS line that does not parse, one that does with no mechanism, and GSSAPI.
        vec!["-b".into(), address.clone(), "--sasl-mechanism".into(), "PLAIN".into(), "-X".into(), jaas("")],
        vec!["-b".into(), address.clone(), "-X".into(), "security.protocol=SASL_SSL".into(), "-X".into(), jaas("\";")],
        vec!["-b".into(), address.clone(), "-X".into(), format!("ssl.key.password={PASSWORD}")],
        vec!["-b".into(), address.clone(), "-X".into(), format!("sasl.password:{PASSWORD}")],
    ];
    for args in runs {
        let (code, out, err) = run(s.metadata().args(&args));
        assert!(matches!(code, Some(1 | 2)), "{args:?}: {err}");
        assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD), "{args:?}:\n{out}\n{err}");
    }
    let trace = std::fs::read_to_string(&trace).expect("the SASL run wrote its trace");
    assert!(!trace.contains(PASSWORD));
    // Proof the flags' password reached the exchange: the mock is asked to authenticate.
    let args = ["--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file"];
    let (_, _, err) = run(s.metadata().args(["-b", &address]).args(args).arg(&password_file));
    assert!(err.contains(NO_SASL_ON_THE_MOCK), "{err}");
}

#[test]
fn the_connect_timeout_key_becomes_the_attempt_timeout_below_the_flag() {
    let s = Scratch::new("timeout");
    let attempt_timeout = |extra: &[&str]| {
        let trace = s.0.join("trace.json");
        let mut cmd = s.metadata();
        cmd.args(["-b", &closed_port(), "-X", "socket.connection.setup.timeout.ms=1234", "--trace"]).arg(&trace);
        run(cmd.args(extra));
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let t = &doc["config"]["attempt_timeout"];
        Duration::new(t["secs"].as_u64().unwrap(), t["nanos"].as_u64().unwrap() as u32)
    };
    assert_eq!(attempt_timeout(&[]), Duration::from_millis(1234));
    assert_eq!(attempt_timeout(&["--attempt-timeout", "2s"]), Duration::from_secs(2));
    assert_eq!(attempt_timeout(&["--set", "attempt_timeout=3s"]), Duration::from_secs(3));
}

#[test]
fn cert_and_key_reach_the_tls_setup_from_flags_and_from_files() {
    let s = Scratch::new("mtls");
    let missing = |name: &str| s.0.join(name).display().to_string();
    let (code, _, err) = run(s.metadata().args(["-b", "h:1", "--cert", &missing("c.pem"), "--key", &missing("k.pem")]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.client_cert.cert_file") && err.contains("c.pem"), "{err}");
    let file =
        s.file("client.properties", &format!("security.protocol=SSL\nssl.certificate.location={}\n", missing("c.pem")));
    let (code, _, err) = run(s.metadata().args(["-b", "h:1", "--key", &missing("k.pem"), "-F"]).arg(&file));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.client_cert.cert_file"), "the file's certificate and the flag's key pair up: {err}");
    let (code, _, err) = run(s.metadata().args(["-b", "h:1", "--cert", &missing("c.pem")]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("set ssl.key.location too"), "{err}");
}
