package stagger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Real Apache Kafka, from the project's scripts/kafka.sh. The run's shared cluster is found
// through STAGGER_KAFKA_DIR (scripts/test.sh starts one and exports it); without it these
// tests skip, saying why, unless STAGGER_REQUIRE_KAFKA=1 (CI), where that is a failure.
// Tests that stop or kill brokers start a 3-broker cluster of their own with the same script
// (stopped by TestMain, or by its watchdog as soon as this test binary exits), so the shared
// one is never disturbed.

// quarterAttemptTimeout is what "never waits out an attempt" is checked against: a quarter
// of the default attempt timeout (10 s), as the Rust adapters' real-Kafka tests do.
const quarterAttemptTimeout = 2500 * time.Millisecond

type kafkaCluster struct {
	dir   string
	env   map[string]string
	owned bool
}

func TestMain(m *testing.M) {
	flag.Parse()
	// A whole run with a cluster starts the destructive tests' own cluster at once, so its
	// start (20-40 s) overlaps the other tests.
	if os.Getenv("STAGGER_KAFKA_DIR") != "" && flag.Lookup("test.run").Value.String() == "" {
		go own.once.Do(startOwn)
	}
	code := m.Run()
	own.once.Do(func() {}) // waits for a start under way
	if own.cluster != nil {
		own.cluster.stop()
	}
	os.Exit(code)
}

func scriptPath() string {
	p, _ := filepath.Abs("../../scripts/kafka.sh")
	return p
}

// skipWithoutKafka skips (or, with STAGGER_REQUIRE_KAFKA=1, fails) a test that needs Kafka.
func skipWithoutKafka(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("STAGGER_REQUIRE_KAFKA") == "1" {
		t.Fatalf("%s, and STAGGER_REQUIRE_KAFKA=1 requires the real-Kafka tests to run", why)
	}
	t.Skipf("real-Kafka test skipped: %s", why)
}

func parseEnv(text string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// sharedKafka is the run's cluster, from STAGGER_KAFKA_DIR.
func sharedKafka(t *testing.T) *kafkaCluster {
	t.Helper()
	dir := os.Getenv("STAGGER_KAFKA_DIR")
	if dir == "" {
		skipWithoutKafka(t, "STAGGER_KAFKA_DIR names no cluster (bash scripts/test.sh starts one; or `bash scripts/kafka.sh start --dir DIR` and export STAGGER_KAFKA_DIR=DIR)")
	}
	env, err := os.ReadFile(filepath.Join(dir, "cluster.env"))
	if _, ready := os.Stat(filepath.Join(dir, "ready")); err != nil || ready != nil {
		t.Fatalf("STAGGER_KAFKA_DIR=%s names no running cluster (start one with `bash scripts/kafka.sh start --dir %s`)", dir, dir)
	}
	return &kafkaCluster{dir: dir, env: parseEnv(string(env))}
}

var own struct {
	once    sync.Once
	cluster *kafkaCluster
	err     error
}

// ownKafka is a 3-broker cluster of this test binary's own, for tests that stop or kill
// brokers; started on first use (it takes the brokers' start, 20-30 s).
func ownKafka(t *testing.T) *kafkaCluster {
	t.Helper()
	sharedKafka(t) // the same rule: real-Kafka tests run when the run has a cluster
	own.once.Do(startOwn)
	if own.err != nil {
		t.Fatal(own.err)
	}
	return own.cluster
}

func startOwn() {
	dir, err := os.MkdirTemp("", "stagger-go-kafka-")
	if err != nil {
		own.err = err
		return
	}
	_ = os.Remove(dir) // kafka.sh creates it
	out, err := exec.Command("bash", scriptPath(), "start", "--dir", dir, "--base-port", "auto",
		"--owner", strconv.Itoa(os.Getpid()), "--lifetime", "1200").Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		own.err = fmt.Errorf("scripts/kafka.sh start: %v\n%s", err, stderr)
		return
	}
	own.cluster = &kafkaCluster{dir: dir, env: parseEnv(string(out)), owned: true}
}

func (k *kafkaCluster) list(key string) []string {
	v, ok := k.env[key]
	if !ok {
		panic("kafka.sh env printed no " + key)
	}
	return strings.Split(v, ",")
}

func (k *kafkaCluster) stop() {
	_ = exec.Command("bash", scriptPath(), "stop", "--dir", k.dir).Run()
}

func (k *kafkaCluster) tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(k.env["KAFKA_CA"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in KAFKA_CA")
	}
	return &tls.Config{RootCAs: pool}
}

// pid is node's broker process now, checked to be this cluster's (never signal a recycled pid).
func (k *kafkaCluster) pid(t *testing.T, node int) int {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(k.dir, fmt.Sprintf("node-%d/pid", node)))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.Contains(string(cmdline), k.dir) {
		t.Fatalf("node %d's pid %d is not a broker of %s", node, pid, k.dir)
	}
	return pid
}

// threadStates are the states (R, S, T, Z, ...) of every thread of pid.
func threadStates(pid int) []string {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var states []string
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) {
			states = append(states, string(stat[i+2]))
		}
	}
	return states
}

// pause stops node with SIGSTOP (the kernel still accepts its connections, nobody answers)
// until every thread is stopped; the returned func continues it (SIGCONT), and runs at the
// test's end in any case.
func (k *kafkaCluster) pause(t *testing.T, node int) func() {
	t.Helper()
	pid := k.pid(t, node)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	deadline := time.Now().Add(30 * time.Second)
	for {
		stopped := true
		for _, s := range threadStates(pid) {
			stopped = stopped && s == "T"
		}
		if stopped {
			return resume
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d (pid %d) did not stop on SIGSTOP", node, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill kills node with SIGKILL and waits until its port refuses connections.
func (k *kafkaCluster) kill(t *testing.T, node int) {
	t.Helper()
	pid := k.pid(t, node)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	address := k.list("KAFKA_PLAINTEXT")[node-1]
	deadline := time.Now().Add(30 * time.Second)
	for {
		states := threadStates(pid)
		gone := len(states) == 0 || (len(states) == 1 && states[0] == "Z")
		if gone {
			if c, err := net.DialTimeout("tcp", address, time.Second); err != nil {
				return
			} else {
				_ = c.Close()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d (pid %d, %s) still there after SIGKILL", node, pid, address)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPlaintextRefreshOfTheRealClusterAsksTheFirstSeedOnly(t *testing.T) {
	k := sharedKafka(t)
	seeds := k.list("KAFKA_PLAINTEXT")
	// A broker's first Metadata answers after it starts wait for its JVM to warm up, long
	// enough to be hedged past; this test may be the first to ask a fresh cluster. One
	// uncounted refresh first, as gentleness.md warms its brokers before counting. Both ask
	// the seeds as listed: the counted refresh asks the broker the first one warmed.
	listed := WithSetting("shuffle_seeds", "false")
	if _, err := Metadata(testContext(t), seeds, listed); err != nil {
		t.Fatal(err)
	}
	dialer := &countingDialer{}
	md, err := Metadata(testContext(t), seeds, WithDialer(dialer), listed)
	if err != nil {
		t.Fatal(err)
	}
	if md.ClusterID != k.env["KAFKA_CLUSTER_ID"] || len(md.Brokers) != 3 || !slices.Contains(seeds, md.AnsweredBy) {
		t.Fatalf("%s answered %+v", md.AnsweredBy, md)
	}
	for i, b := range md.Brokers {
		if b.NodeID != int32(i+1) || b.Address() != seeds[i] {
			t.Fatalf("brokers %+v, seeds %v", md.Brokers, seeds)
		}
	}
	// One connection as a rule (docs/performance/gentleness.md measures how often); a busy
	// machine may delay an answer into one hedge. Every connection is closed.
	if n := dialer.opened.Load(); n < 1 || n > 2 || dialer.open.Load() != 0 {
		t.Fatalf("a healthy refresh opens one connection (two at most), and closes it: opened %d, open %d; attempts %+v",
			n, dialer.open.Load(), md.Attempts)
	}
	t.Logf("answered by %s in %v", md.AnsweredBy, md.Elapsed)
}

func TestSSLRefreshVerifiesTheBrokersCertificates(t *testing.T) {
	k := sharedKafka(t)
	seeds := k.list("KAFKA_SSL")
	dialer := &countingDialer{}
	md, err := Metadata(testContext(t), seeds, WithTLS(k.tlsConfig(t)), WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 || md.Brokers[2].Address() != seeds[2] {
		t.Fatalf("%s: %+v", md.AnsweredBy, md.Brokers)
	}
	// The first TLS handshakes of a cold broker take 100 ms and more, which the policy may
	// hedge past (its silent_tls rule): how many connections that costs is measured in
	// docs/performance/gentleness.md, not asserted here. At most one per seed; every one closed.
	if n := dialer.opened.Load(); n < 1 || int(n) > len(seeds) || dialer.open.Load() != 0 {
		t.Fatalf("opened %d, open %d: %+v", n, dialer.open.Load(), md.Attempts)
	}
	t.Logf("answered by %s in %v: %+v", md.AnsweredBy, md.Elapsed, md.Attempts)
	// Without the cluster's CA the certificate is refused: a TLS error, every broker's, and
	// one pass with the default retries (the next would refuse the same certificates).
	dialer = &countingDialer{}
	_, err = Metadata(testContext(t), seeds, WithTLS(&tls.Config{}), WithDialer(dialer))
	var rerr *RefreshError
	if !errorsAs(err, &rerr) || rerr.Last == nil || rerr.Last.Kind != "tls" || len(rerr.Brokers) != 3 ||
		rerr.Reason != "all_failed" || rerr.Passes != 1 || dialer.opened.Load() != 3 {
		t.Fatalf("opened %d: %v", dialer.opened.Load(), err)
	}
}

func TestSASLSSLWithSCRAMSHA512AuthenticatesAndAWrongPasswordIsFatal(t *testing.T) {
	k := sharedKafka(t)
	seeds := k.list("KAFKA_SASL_SSL")
	user, password := k.env["KAFKA_SASL_USERNAME"], k.env["KAFKA_SASL_PASSWORD"]
	md, err := Metadata(testContext(t), seeds, WithTLS(k.tlsConfig(t)), WithSASL(ScramSHA512, user, password))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(seeds, md.AnsweredBy) || len(md.Brokers) != 3 || md.Brokers[0].Address() != seeds[0] {
		t.Fatalf("%s: %+v", md.AnsweredBy, md.Brokers)
	}
	const wrong = "not-the-password-7f3a"
	started := time.Now()
	_, err = Metadata(testContext(t), seeds, WithTLS(k.tlsConfig(t)), WithSASL(ScramSHA512, user, wrong))
	var rerr *RefreshError
	// Kafka answers SASL_AUTHENTICATION_FAILED (58): fatal, no other broker would differ.
	if !errorsAs(err, &rerr) || !rerr.Fatal() || rerr.Last == nil || rerr.Last.Kind != "broker_error" || rerr.Last.Code != 58 {
		t.Fatalf("%v\nkind %q code %d", err, rerr.Last.Kind, rerr.Last.Code)
	}
	if took := time.Since(started); took > quarterAttemptTimeout {
		t.Fatalf("a refused password ends the refresh at once, not after %v", took)
	}
	if strings.Contains(fmt.Sprintf("%v %+v", err, rerr), wrong) {
		t.Fatalf("the password is in the error: %v", err)
	}
}

// unsecuredJWT is a token Kafka's test validator on SASL_PLAINTEXT accepts (alg none).
func unsecuredJWT(user string) string {
	enc := base64.RawURLEncoding
	now := time.Now().Unix()
	claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, user, now, now+3600)
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(claims)) + "."
}

func TestOAuthBearerTokensComeFromTheTokenFuncForEveryConnection(t *testing.T) {
	k := sharedKafka(t)
	seeds := k.list("KAFKA_SASL_PLAINTEXT")
	var calls atomic.Int32
	token := func(ctx context.Context) (string, error) {
		calls.Add(1)
		return unsecuredJWT(k.env["KAFKA_SASL_USERNAME"]), nil
	}
	md, err := Metadata(testContext(t), seeds, WithOAuthBearer(token))
	if err != nil {
		t.Fatal(err)
	}
	// One token per new connection: one, unless a slow answer drew a hedge.
	if !slices.Contains(seeds, md.AnsweredBy) || calls.Load() < 1 || int(calls.Load()) > len(seeds) {
		t.Fatalf("%s, %d token calls", md.AnsweredBy, calls.Load())
	}
	failing := func(ctx context.Context) (string, error) { return "", fmt.Errorf("identity provider down") }
	_, err = Metadata(testContext(t), seeds, WithOAuthBearer(failing))
	var rerr *RefreshError
	if !errorsAs(err, &rerr) || !rerr.Fatal() || !strings.Contains(err.Error(), "identity provider down") {
		t.Fatalf("%v", err)
	}
}

func TestAClientOnTheRealClusterCachesRefreshesOnItsKeptConnectionAndClosesIt(t *testing.T) {
	k := sharedKafka(t)
	seeds := k.list("KAFKA_PLAINTEXT")
	dialer := &countingDialer{}
	// Sequential: this test is about caching, keeping and closing, and a loaded machine's
	// slow first answer must not draw a hedge (how many the default draws is measured in
	// docs/performance, not pinned here).
	c, err := NewClient(seeds, WithDialer(dialer), WithPreset("sequential"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	first, err := c.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cached, err := c.Metadata(ctx); err != nil || cached != first {
		t.Fatalf("not the cached answer: %v", err)
	}
	fresh, err := c.Refresh(ctx)
	if err != nil || fresh == first || fresh.ClusterID != k.env["KAFKA_CLUSTER_ID"] {
		t.Fatalf("%v", err)
	}
	if dialer.opened.Load() != 1 || dialer.open.Load() != 1 {
		t.Fatalf("one connection, kept and reused: opened %d, open %d", dialer.opened.Load(), dialer.open.Load())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open after Close", dialer.open.Load())
	}
}

func TestABlackholedSeedFirstIsOutrunFarBelowTheConnectTimeout(t *testing.T) {
	k := sharedKafka(t)
	hole := blackhole(t)
	seeds := append([]string{hole}, k.list("KAFKA_PLAINTEXT")...)
	dialer := &countingDialer{}
	// The blackholed seed first, as listed.
	md, err := Metadata(testContext(t), seeds, WithDialer(dialer), WithSetting("shuffle_seeds", "false"))
	if err != nil {
		t.Fatal(err)
	}
	if md.AnsweredBy == seeds[0] || !slices.Contains(seeds, md.AnsweredBy) {
		t.Fatalf("answered by %s: %+v", md.AnsweredBy, md.Attempts)
	}
	first := md.Attempts[0]
	if first.Broker != hole || first.Connected >= 0 || first.Outcome != "cancelled" {
		t.Fatalf("the blackholed seed's attempt: %+v", first)
	}
	if md.Elapsed > quarterAttemptTimeout {
		t.Fatalf("took %v", md.Elapsed)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open", dialer.open.Load())
	}
	t.Logf("past a blackholed seed in %v: %+v", md.Elapsed, md.Attempts)
}

func TestAStoppedBrokerFirstIsOvertakenLongBeforeItsAttemptTimeout(t *testing.T) {
	k := ownKafka(t)
	seeds := k.list("KAFKA_PLAINTEXT")
	resume := k.pause(t, 1)
	dialer := &countingDialer{}
	// The stopped broker first, as listed.
	md, err := Metadata(testContext(t), seeds, WithDialer(dialer), WithSetting("shuffle_seeds", "false"))
	if err != nil {
		t.Fatal(err)
	}
	if md.AnsweredBy == seeds[0] || md.Elapsed > quarterAttemptTimeout {
		t.Fatalf("answered by %s after %v", md.AnsweredBy, md.Elapsed)
	}
	stopped := md.Attempts[0]
	if stopped.Broker != seeds[0] || stopped.Connected < 0 || stopped.Answered >= 0 || stopped.Outcome != "cancelled" {
		t.Fatalf("the stopped broker's attempt (connected by its kernel, never answered): %+v", stopped)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open", dialer.open.Load())
	}
	t.Logf("past a stopped broker in %v: %+v", md.Elapsed, md.Attempts)
	resume()
	alone, err := Metadata(testContext(t), seeds[:1])
	if err != nil || alone.AnsweredBy != seeds[0] {
		t.Fatalf("the continued broker: %v", err)
	}
}

// bootstrapExample builds examples/bootstrap and returns the binary's path.
func bootstrapExample(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "bootstrap")
	if out, err := exec.Command("go", "build", "-o", binary, "./examples/bootstrap").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/bootstrap: %v\n%s", err, out)
	}
	return binary
}

// exampleLine is the text after prefix on the first line of the example's output that has it.
func exampleLine(t *testing.T, lines []string, prefix string) []string {
	t.Helper()
	for _, line := range lines {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.Split(rest, ",")
		}
	}
	t.Fatalf("no %q line in:\n%s", prefix, strings.Join(lines, "\n"))
	return nil
}

// checkBootstrapOutput checks the bootstrap example's output for seeds (live and bad ones)
// and returns the brokers the cluster listed. Which live broker answers first is the race's,
// and on a loaded machine a live broker's slow first answer may be hedged past before it
// comes (then it is left out too, as a silent one); what is checked is that a live seed
// answered and comes first, that the list holds live seeds only, once each, and every live
// seed stagger did not try, and no bad one.
func checkBootstrapOutput(t *testing.T, out []byte, live, bad []string, clusterID string) (listed []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	first := strings.Fields(lines[0])
	listed = exampleLine(t, lines, "listed: ")
	ordered := exampleLine(t, lines, "seeds: ")
	tried := map[string]bool{}
	for _, line := range lines[1:] {
		if strings.HasPrefix(line, "  ") {
			tried[strings.Fields(line)[0]] = true
		}
	}
	fail := func(why string) {
		t.Helper()
		t.Fatalf("%s, got:\n%s", why, out)
	}
	if len(first) < 3 || first[0] != "answered" || !slices.Contains(live, first[2]) ||
		!strings.HasSuffix(lines[0], "(cluster "+clusterID+")") {
		fail("want a live seed to answer")
	}
	if ordered[0] != first[2] {
		fail("want the seed that answered first at the head of the list")
	}
	seen := map[string]bool{}
	for _, a := range ordered {
		if seen[a] || !slices.Contains(live, a) || slices.Contains(bad, a) {
			fail("want live seeds only, once each, and none of " + strings.Join(bad, ","))
		}
		seen[a] = true
	}
	for _, a := range live {
		if !tried[a] && !seen[a] {
			fail("want every live seed stagger did not try, " + a + " among them")
		}
	}
	return listed
}

func TestTheBootstrapExampleLeavesOutAStoppedBrokerThatTheClusterStillLists(t *testing.T) {
	k := ownKafka(t)
	binary := bootstrapExample(t)
	seeds := k.list("KAFKA_PLAINTEXT")
	hung := seeds[0]
	resume := k.pause(t, 1)
	// Asked first, as listed, so stagger sees it silent.
	out, err := exec.Command(binary, "-listed-order", "-seeds", strings.Join(seeds, ",")).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	resume()
	// The stopped broker is still registered: the answer lists it. The seed list leaves it
	// out: a peer picking a seed at random would wait out its timeout there.
	listed := checkBootstrapOutput(t, out, seeds[1:], []string{hung}, k.env["KAFKA_CLUSTER_ID"])
	if !slices.Contains(listed, hung) {
		t.Fatalf("want the stopped %s still listed by the cluster, got:\n%s", hung, out)
	}
	t.Logf("\n%s", out)
	alone, err := Metadata(testContext(t), seeds[:1])
	if err != nil || alone.AnsweredBy != seeds[0] {
		t.Fatalf("the continued broker: %v", err)
	}
}

func TestAKilledBrokerIsRefusedAtOnce(t *testing.T) {
	k := ownKafka(t)
	seeds := k.list("KAFKA_PLAINTEXT")
	// Node 3: the other tests of this cluster lead with node 1.
	k.kill(t, 3)
	order := []string{seeds[2], seeds[0], seeds[1]}
	md, err := Metadata(testContext(t), order, WithSetting("shuffle_seeds", "false"))
	if err != nil {
		t.Fatal(err)
	}
	killed := md.Attempts[0]
	if killed.Broker != order[0] || killed.Outcome != "failed" || killed.ErrorKind != "refused" {
		t.Fatalf("%+v", md.Attempts)
	}
	if md.AnsweredBy == order[0] || md.Elapsed > quarterAttemptTimeout {
		t.Fatalf("answered by %s after %v", md.AnsweredBy, md.Elapsed)
	}
	t.Logf("past a killed broker in %v: %+v", md.Elapsed, md.Attempts)
}

func TestTheBootstrapExampleOrdersTheSeedsPastABlackholedOne(t *testing.T) {
	k := sharedKafka(t)
	binary := bootstrapExample(t)
	hole := blackhole(t)
	plaintext := k.list("KAFKA_PLAINTEXT")
	seeds := append([]string{hole}, plaintext...)
	// Asked first, as listed, so stagger sees it silent.
	out, err := exec.Command(binary, "-listed-order", "-seeds", strings.Join(seeds, ",")).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkBootstrapOutput(t, out, plaintext, []string{hole}, k.env["KAFKA_CLUSTER_ID"])
	t.Logf("\n%s", out)
}
