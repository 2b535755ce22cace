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

    /// [`Scratch::file`] with these permission bits, whatever the umask.
    #[cfg(unix)]
    fn file_with_mode(&self, name: &str, content: impl AsRef<[u8]>, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
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
#[cfg(unix)]
fn unknown_keys_are_one_warning_line_each_on_stderr_naming_the_line() {
    let s = Scratch::new("unknown");
    let text = "group.id=g\n# a comment\n\nssl.keystore.password=keystore-pass\ngroup.id=again\n";
    let file = s.file_with_mode("client.properties", text, 0o600);
    let (_, _, err) = run(s.metadata().args(["-b", &closed_port(), "-X", "foo=1", "-F"]).arg(&file));
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("stagger: warning: ")).collect();
    let f = file.display();
    assert_eq!(
        warnings,
        [
            format!("stagger: warning: {f}:1: unknown key \"group.id\" (ignored)"),
            format!("stagger: warning: {f}:4: unknown key \"ssl.keystore.password\" (ignored)"),
            format!("stagger: warning: {f}:5: unknown key \"group.id\" (ignored)"),
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
            format!(r#"{}:1: socket.connection.setup.timeout.ms = "soon""#, file.display()),
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

// ---- line numbers, hostile files, secrets at rest ------------------------------------------------

/// The first error line of a run's stderr.
fn error_line(err: &str) -> &str {
    err.lines().find(|l| l.starts_with("error: ")).unwrap_or("")
}

#[test]
fn a_bad_value_in_a_file_names_the_file_the_line_and_the_key() {
    let s = Scratch::new("lines");
    let cases: [(&str, &[u8], &str); 6] = [
        (
            "comments and blank lines count",
            b"bootstrap.servers=h:1\n\n! bang comment\nsocket.connection.setup.timeout.ms : soon\n",
            r#":4: socket.connection.setup.timeout.ms = "soon": expected milliseconds"#,
        ),
        (
            "a continued line is named by its first line",
            b"# kcat\nsasl.mechanism = \\\n   GSSAPI\nsecurity.protocol=SASL_SSL\r\n",
            r#":2: sasl.mechanism = "GSSAPI": GSSAPI (Kerberos) is not supported"#,
        ),
        (
            "a byte-order mark and CRLF",
            "\u{feff}security.protocol=TLS\r\n".as_bytes(),
            r#":1: security.protocol = "TLS""#,
        ),
        (
            "the later of two settings",
            b"security.protocol=SSL\nsecurity.protocol=bogus\n",
            r#":2: security.protocol = "bogus""#,
        ),
        (
            "a secret's line, not its value",
            b"security.protocol=SSL\nssl.key.password=pw-0f-the-key\n",
            ":2: ssl.key.password: encrypted private keys are not supported",
        ),
        ("text that is not UTF-8", b"client.id=a\nclient.id=\xff\xfe\n", ":2: not UTF-8 (byte 22 of the file)"),
    ];
    for (what, content, needle) in cases {
        let file = s.0.join("client.properties");
        std::fs::write(&file, content).unwrap();
        let (code, _, err) = run(s.metadata().args(["-b", "h:1", "-F"]).arg(&file));
        assert_eq!(code, Some(2), "{what}: {err}");
        let expected = format!("{}{needle}", file.display());
        assert!(error_line(&err).contains(&expected), "{what}: expected {expected:?} in\n{err}");
        assert!(!err.contains("pw-0f-the-key") && !err.contains("panicked"), "{what}: {err}");
    }
}

/// A small xorshift generator: the cases below are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Put where a secret goes, and only there: an error or a `Debug` showing it leaks one.
const MARKER: &str = "Zq9-marker-Secret";

/// Every key the parser knows, some it does not, and near misses.
const KEYS: [&str; 26] = [
    "bootstrap.servers",
    "metadata.broker.list",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "sasl.oauthbearer.token",
    "sasl.oauthbearer.token.file",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "socket.connection.setup.timeout.ms",
    "client.id",
    "ssl.keystore.password",
    "group.id",
    "acks",
    "SASL.PASSWORD",
    "sasl.password ",
    "bootstrap.servers\\",
    "é",
    "",
];

const SECRET: [&str; 4] = ["sasl.password", "sasl.jaas.config", "ssl.key.password", "sasl.oauthbearer.token"];

const VALUES: [&str; 30] = [
    "",
    "SASL_SSL",
    "sasl_plaintext",
    "PLAINTEXT",
    "SSL",
    "TLS",
    "PLAIN",
    "scram-sha-512",
    "SCRAM-SHA-256",
    "OAUTHBEARER",
    "GSSAPI",
    "10000",
    "0",
    "-1",
    "99999999999",
    "soon",
    "h:1,h:2",
    ",",
    "SASL_SSL://h:1",
    "[::1]:9092",
    "probe",
    "/x/ca.jks",
    "/x/ca.pem",
    "https",
    "none",
    "u",
    "é\u{0}\u{7f}",
    "\\",
    "a\\tb",
    "=:",
];

/// Values for the secret keys, all holding the marker, JAAS lines good and broken among them.
fn secret_value(rng: &mut Rng) -> String {
    let jaas = ["x.PlainLoginModule required", "x.ScramLoginModule", "", "x required username=\"u\""];
    match rng.below(6) {
        0 => MARKER.to_string(),
        1 => format!("{} username=\"u\" password=\"{MARKER}\";", rng.pick(&jaas)),
        2 => format!("{} password=\"{MARKER}", rng.pick(&jaas)),
        3 => format!("{} password={MARKER} ; extra", rng.pick(&jaas)),
        4 => format!("x required password=\"{MARKER}\\\"\";"),
        _ => format!("  {MARKER}  "),
    }
}

/// A client properties file of the kind people write, and of the kind nobody should.
fn random_file(rng: &mut Rng) -> String {
    let mut text = String::new();
    if rng.below(10) == 0 {
        text.push('\u{feff}');
    }
    for _ in 0..rng.below(14) {
        match rng.below(10) {
            0 => text.push_str(rng.pick(&["# comment", "! bang", "  # indented", "#"])),
            1 => text.push_str(rng.pick(&["", "   ", "\t"])),
            2 => {
                let junk = ["\\", "=", ":", " ", "\t", "\"", ";", "é", "\u{0}", "\u{feff}", "\r", "k", "v", "1"];
                for _ in 0..rng.below(12) {
                    text.push_str(rng.pick(&junk));
                }
            }
            _ => {
                let key = rng.pick(&KEYS);
                text.push_str(rng.pick(&["", " ", "\t"]));
                text.push_str(key);
                text.push_str(rng.pick(&["=", " = ", ":", " : ", " ", "\t=", "=="]));
                match SECRET.contains(&key) {
                    true => text.push_str(&secret_value(rng)),
                    false => text.push_str(rng.pick(&VALUES)),
                }
            }
        }
        text.push_str(rng.pick(&["\n", "\n", "\n", "\r\n", "\\\n", "\\\\\n", "\\\r\n"]));
    }
    text
}

/// Whether `text` can put the marker where a secret is not: a continuation or a lost
/// separator can make it part of another key's value, or of a key.
fn marker_may_leak_legitimately(properties: &stagger_tokio::properties::ClientProperties) -> bool {
    KEYS.iter().any(|k| properties.get(k).is_some_and(|v| v.contains(MARKER)))
        || properties.warnings().iter().any(|w| w.key.contains(MARKER))
}

/// The parser behind `-F`, `-X` and the default file, on thousands of generated files (and
/// `-X` pairs): it never panics, every error is a sentence naming the key at fault (or the
/// key to set), and no error and no `Debug` of the properties, the settings or the error
/// shows a secret.
#[test]
fn the_properties_parser_takes_any_text_and_its_errors_name_a_key_and_no_secret() {
    use stagger_tokio::properties::ClientProperties;
    let mut rng = Rng(0x5eed_cafe_f00d);
    let (mut errors, mut resolved, mut secrets_checked) = (0, 0, 0);
    for case in 0..3000 {
        let text = random_file(&mut rng);
        let mut pairs: Vec<String> = Vec::new();
        for _ in 0..rng.below(3) {
            pairs.push(format!("{}={}", rng.pick(&KEYS), rng.pick(&VALUES)));
        }
        if rng.below(8) == 0 {
            pairs.push(rng.pick(&VALUES).to_string()); // no `=`
        }
        let outcome = std::panic::catch_unwind(|| {
            let mut properties = ClientProperties::parse_file_text(&text, "f.properties");
            let pair_error = pairs.iter().find_map(|p| properties.set_pair(p).err());
            // The token file is read by `resolve`: never let a generated path name a real file.
            if properties.get("sasl.oauthbearer.token.file").is_some() {
                properties.set("sasl.oauthbearer.token.file", "/nonexistent/stagger-test/token");
            }
            let resolved = properties.resolve();
            (properties, pair_error, resolved)
        });
        let (properties, pair_error, result) = outcome.unwrap_or_else(|_| panic!("case {case}: a panic on {text:?}"));
        let check_marker = !marker_may_leak_legitimately(&properties);
        let mut shown = format!("{properties:?}");
        for error in pair_error.iter().chain(result.as_ref().err()) {
            errors += 1;
            let message = error.to_string();
            assert!(!message.trim().is_empty(), "case {case}: an empty error for {text:?}");
            if let Some(key) = error.key() {
                assert!(message.contains(key), "case {case}: {message:?} does not name {key:?}; {text:?}");
            }
            let names_a_key = KEYS[..18].iter().any(|k| message.contains(k)) || message.contains("-X");
            assert!(names_a_key, "case {case}: {message:?} names no key; {text:?}");
            shown += &format!("{message} {error:?}");
        }
        if let Ok(settings) = &result {
            resolved += 1;
            shown += &format!("{settings:?}");
        }
        if check_marker {
            assert!(!shown.contains(MARKER), "case {case}: a secret is shown: {shown}\nfor {text:?}");
            secrets_checked += usize::from(text.contains(MARKER));
        }
    }
    // Every end is reached: not all errors, not all valid files, secrets in many of them.
    assert!(errors > 300 && resolved > 300, "{errors} errors, {resolved} resolved");
    assert!(secrets_checked > 1000, "only {secrets_checked} files with a secret were checked");
}

/// The key a warning or error names at `line` (1-based) of `text`, read as a properties
/// parser reads the logical line that starts there.
fn logical_key_at(text: &str, line: usize) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().skip(line - 1);
    let first = lines.next().unwrap_or_default();
    let mut logical = first.strip_prefix('\u{feff}').unwrap_or(first).trim_start().to_string();
    while (logical.len() - logical.trim_end_matches('\\').len()) % 2 == 1 {
        logical.pop();
        match lines.next() {
            Some(next) => logical.push_str(next.trim_start()),
            None => break,
        }
    }
    let end = logical.find(|c: char| c == '=' || c == ':' || c.is_whitespace()).unwrap_or(logical.len());
    logical[..end].to_string()
}

/// `stagger metadata -F FILE` on generated files, some of them not UTF-8: it never panics
/// (exit 0, 1 or 2), and every warning and every error that names a line of the file names
/// the line where the key it names is set.
#[test]
fn the_cli_reads_any_file_and_names_the_right_line() {
    let s = Scratch::new("random-files");
    let mut rng = Rng(0xf11e_5eed);
    let mut named = 0;
    for case in 0..24 {
        let mut bytes = random_file(&mut rng).into_bytes();
        if case % 6 == 5 {
            let at = rng.below(bytes.len() + 1);
            bytes.insert(at, 0xff);
        }
        let file = s.0.join(format!("random-{case}.properties"));
        std::fs::write(&file, &bytes).unwrap();
        let (code, _, err) = run(s.metadata().args(["-b", &closed_port(), "-F"]).arg(&file));
        assert!(matches!(code, Some(0..=2)), "case {case}: exit {code:?}: {err}\n{bytes:?}");
        assert!(!err.contains("panicked"), "case {case}: {err}");
        let prefix = format!("{}:", file.display());
        for line in err.lines() {
            let Some(at) = line.find(&prefix) else { continue };
            let rest = &line[at + prefix.len()..];
            let (number, said) = rest.split_once(": ").expect("FILE:LINE: what");
            let number: usize = number.parse().unwrap_or_else(|_| panic!("case {case}: no line number in {line:?}"));
            named += 1;
            let text = String::from_utf8_lossy(&bytes);
            if let Some(byte) = said.strip_prefix("not UTF-8 (byte ").and_then(|r| r.split(' ').next()) {
                let byte: usize = byte.parse().unwrap();
                assert_eq!(bytes[byte], 0xff, "case {case}: {line}");
                assert_eq!(number, 1 + bytes[..byte].iter().filter(|&&b| b == b'\n').count(), "case {case}: {line}");
                continue;
            }
            let key = logical_key_at(&text, number);
            let quoted = format!("unknown key {key:?} (ignored)");
            let named_key =
                said == quoted || said.starts_with(&format!("{key} = ")) || said.starts_with(&format!("{key}: "));
            assert!(named_key, "case {case}: line {number} sets {key:?}, but the CLI says {line:?}\n{text:?}");
        }
    }
    assert!(named > 20, "only {named} lines were named: the generator misses the point");
}

/// ssh's rule for private keys, for client files: one that holds a password, a token or a
/// secret and that its group or others can read gets a warning naming the file, the key, its
/// line and the mode, and how to fix it; 0600 and 0400, or no secret, get none.
#[test]
#[cfg(unix)]
fn a_file_holding_a_secret_warns_when_others_can_read_it() {
    let s = Scratch::new("modes");
    let port = closed_port();
    let warnings = |args: Vec<std::ffi::OsString>, env: Option<(&str, &PathBuf)>| {
        let mut cmd = s.metadata();
        cmd.args(["-b", &port]).args(args);
        if let Some((key, value)) = env {
            cmd.env(key, value);
        }
        let (code, out, err) = run(&mut cmd);
        assert!(matches!(code, Some(1 | 2)), "{err}");
        assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD), "{err}");
        err.lines().filter(|l| l.contains("holds a")).map(String::from).collect::<Vec<_>>()
    };
    let f = |path: &PathBuf| path.as_os_str().to_owned();
    let password = format!("client.id=c\nsasl.password={PASSWORD}\n");
    for (mode, by) in
        [(0o644, Some("others")), (0o604, Some("others")), (0o640, Some("its group")), (0o600, None), (0o400, None)]
    {
        let file = s.file_with_mode(&format!("password-{mode:o}.properties"), &password, mode);
        let expected: Vec<String> = by
            .map(|by| {
                let p = file.display();
                format!("stagger: warning: {p} holds a password (sasl.password on line 2) and is readable by {by} (mode {mode:04o}); chmod 600 {p}")
            })
            .into_iter()
            .collect();
        assert_eq!(warnings(vec!["-F".into(), f(&file)], None), expected, "mode {mode:o}");
    }
    let readable = |name: &str, text: &str| s.file_with_mode(name, text, 0o644);
    let cases: Vec<(PathBuf, Option<&str>)> = vec![
        (readable("no-secret.properties", "client.id=c\nsasl.username=u\ngroup.id=g\n"), None),
        (readable("empty-password.properties", "sasl.password=\nssl.key.password =\n"), None),
        (readable("jaas-no-password.properties", "sasl.jaas.config=x.OAuthBearerLoginModule required;\n"), None),
        (
            readable("jaas.properties", &format!("# Java\nsasl.jaas.config=x.ScramLoginModule required \\\n  username=\"u\" password=\"{PASSWORD}\";\n")),
            Some("a password (sasl.jaas.config on line 2)"),
        ),
        (readable("keystore.properties", "ssl.keystore.password=changeit\n"), Some("a password (ssl.keystore.password on line 1)")),
        (readable("key.properties", &format!("ssl.key.password={PASSWORD}\n")), Some("a password (ssl.key.password on line 1)")),
        (readable("token.properties", &format!("\n\nsasl.oauthbearer.token={PASSWORD}\n")), Some("a token (sasl.oauthbearer.token on line 3)")),
        (
            readable("client-secret.properties", "sasl.oauthbearer.client.credentials.client.secret=s3\n"),
            Some("a secret (sasl.oauthbearer.client.credentials.client.secret on line 1)"),
        ),
    ];
    for (file, what) in cases {
        let expected: Vec<String> = what
            .map(|what| {
                let p = file.display();
                format!("stagger: warning: {p} holds {what} and is readable by others (mode 0644); chmod 600 {p}")
            })
            .into_iter()
            .collect();
        assert_eq!(warnings(vec!["-F".into(), f(&file)], None), expected, "{}", file.display());
    }
    // The other files that hold secrets: the default file, $STAGGER_CONFIG, a password file.
    let default = s.file_with_mode("xdg/stagger/stagger.conf", &password, 0o640);
    let warned = warnings(vec![], None);
    assert!(warned.len() == 1 && warned[0].contains(&format!("{} holds a password", default.display())), "{warned:?}");
    std::fs::remove_file(&default).unwrap();
    let named = s.file_with_mode("named.conf", &password, 0o644);
    let warned = warnings(vec![], Some(("STAGGER_CONFIG", &named)));
    assert!(warned.len() == 1 && warned[0].contains(&format!("{} holds a password", named.display())), "{warned:?}");
    let password_file = s.file_with_mode("password", format!("{PASSWORD}\n"), 0o644);
    let args = |file: &PathBuf| -> Vec<std::ffi::OsString> {
        ["--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file"]
            .map(Into::into)
            .into_iter()
            .chain([f(file)])
            .collect()
    };
    let warned = warnings(args(&password_file), None);
    let p = password_file.display();
    assert_eq!(warned, [format!("stagger: warning: {p} holds a password (--sasl-password-file) and is readable by others (mode 0644); chmod 600 {p}")]);
    let private = s.file_with_mode("private-password", format!("{PASSWORD}\n"), 0o600);
    assert_eq!(warnings(args(&private), None), Vec::<String>::new());
    // An OAUTHBEARER token file, once it is the token used.
    let token = s.file_with_mode("token.jwt", "a.b.c\n", 0o644);
    let oauth = s.file_with_mode(
        "oauth.properties",
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token.file={}\n",
            token.display()
        ),
        0o600,
    );
    let warned = warnings(vec!["-F".into(), f(&oauth)], None);
    let t = token.display();
    assert_eq!(warned, [format!("stagger: warning: {t} holds a token (sasl.oauthbearer.token.file) and is readable by others (mode 0644); chmod 600 {t}")]);
}

/// A file no client file could be — endless, huge, a directory — is refused at once,
/// naming it, instead of being read without end.
#[test]
fn endless_huge_and_unreadable_files_are_refused_naming_them() {
    let s = Scratch::new("huge");
    let huge = s.file("huge.properties", &"group.id=g\n".repeat(200_000));
    let dir = s.0.join("xdg");
    let endless = PathBuf::from("/dev/zero");
    for (path, says) in
        [(&huge, "is larger than 1024 KiB"), (&endless, "is larger than 1024 KiB"), (&dir, "could not read")]
    {
        if !path.exists() {
            continue;
        }
        let started = std::time::Instant::now();
        let (code, _, err) = run(s.metadata().args(["-b", "h:1", "-F"]).arg(path));
        assert_eq!(code, Some(2), "{err}");
        assert!(error_line(&err).contains(&format!("{}", path.display())) && err.contains(says), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
        let args = ["--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file"];
        let (code, _, err) = run(s.metadata().args(["-b", "h:1"]).args(args).arg(path));
        assert_eq!(code, Some(2), "{err}");
        assert!(error_line(&err).contains("--sasl-password-file") && err.contains(says), "{err}");
    }
}
