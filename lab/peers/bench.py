"""lab/peers driver: every installed peer against one real Kafka cluster, faults first.

Run by run.sh (which installs the peers); stdlib only. It starts the cluster itself (after its
forwarders, see below) and stops it at the end. For each case and repetition, each (client,
setting) runs once, in turn, as its own process with a kill timeout; nothing runs in parallel.
Prints one Markdown table and writes it, with the method, the versions and the exact command,
to docs/performance/peers.md (with --keep-earlier, the runs already there are kept below it).

Connections are counted by one counting TCP forwarder on 127.0.0.1 per broker, and the brokers
advertise the forwarders (kafka.sh --advertise-plaintext), as a production cluster advertises
the addresses its clients bootstrap from: a seed and the same broker's address in the metadata
are one address, so a peer given stagger's front list meets the same addresses stagger tried.
Each forwarder counts the connections it accepts: every TCP handshake a client completes with
that broker during the run, bootstrap and later ones alike. The cluster holds no topic, so the
brokers replicate nothing and open no connection to each other through them (bench.py counts
an idle spell before the cases to show it). A blackholed seed completes no handshake by
definition and has no forwarder (it is no broker's address); a refusing (killed) broker's
forwarder closes its listener for the case, so its address refuses, as seed and as listed
broker alike (a forwarder left listening would turn "refused" into "accepted, then closed").
"""

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

# ---------------------------------------------------------------- counting forwarders


class Forwarders:
    """One counting TCP forwarder per upstream address, on an asyncio loop in a thread, each
    listening on its given port of 127.0.0.1 (the address its broker advertises)."""

    def __init__(self, upstreams, ports):
        self.upstreams = upstreams
        self.ports = ports
        self.counts = [0] * len(upstreams)
        self.addresses = [f"127.0.0.1:{port}" for port in ports]
        self.loop = asyncio.new_event_loop()
        self.servers = [None] * len(upstreams)
        self.error = None
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)
        if self.error or None in self.servers:
            raise RuntimeError(f"forwarders did not start: {self.error}")

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)

        async def start():
            try:
                for i in range(len(self.upstreams)):
                    await self._listen(i)
            except OSError as e:
                self.error = e
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _listen(self, i):
        self.servers[i] = await asyncio.start_server(
            lambda r, w, i=i: self._serve(i, r, w), "127.0.0.1", self.ports[i], backlog=512
        )

    def _call(self, coroutine_fn):
        return asyncio.run_coroutine_threadsafe(coroutine_fn(), self.loop).result(10)

    def refuse(self, i):
        """Closes forwarder i's listener: its address refuses (connections already passing stay)."""

        async def close():
            self.servers[i].close()  # closes the listening socket now (not waiting for connections)

        self._call(close)

    def accept_again(self, i):
        """Listens again on forwarder i's port, after refuse(i)."""

        async def listen():
            await self._listen(i)

        self._call(listen)

    async def _serve(self, i, reader, writer):
        self.counts[i] += 1
        host, port = self.upstreams[i].rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.transport.abort()
            return

        async def pipe(src, dst):
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                try:
                    dst.close()
                except OSError:
                    pass

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def reset(self):
        self.loop.call_soon_threadsafe(self._reset)
        time.sleep(0.01)

    def _reset(self):
        self.counts = [0] * len(self.upstreams)

    def snapshot(self):
        box, done = [], threading.Event()

        def take():
            box.append(list(self.counts))
            done.set()

        self.loop.call_soon_threadsafe(take)
        done.wait(5)
        return box[0]

    def close(self):
        def stop():
            for s in self.servers:
                if s is not None:
                    s.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(5)


# ---------------------------------------------------------------- a blackholed address


class Blackhole:
    """A loopback listener whose accept queue is full: the kernel drops new SYNs, so a connect
    to it hangs (the technique of testing/faults/src/blackhole.rs)."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.fill = []
        for _ in range(8):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(0.2)
            try:
                s.connect(self.listener.getsockname())
                self.fill.append(s)
            except (socket.timeout, OSError):
                s.close()
                break
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(0.5)
        try:
            probe.connect(self.listener.getsockname())
            raise RuntimeError("blackhole check: connect did not hang")
        except socket.timeout:
            pass
        finally:
            probe.close()

    def close(self):
        for s in self.fill:
            s.close()
        self.listener.close()


# ---------------------------------------------------------------- the cluster


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_blocks(brokers):
    """Base ports whose block of 10 ports per node is free: kafka.sh's node i listens on
    base + 10 (i - 1) + 0..4, its forwarder takes + 5. Below Linux's ephemeral range (32768+),
    as kafka.sh's --base-port auto, so no outgoing connection takes a forwarder's port while it
    refuses."""
    for base in range(18000, 32000 - 10 * brokers, 200):
        if all(port_free(base + offset) for offset in range(10 * brokers)):
            yield base


# The listeners the benchmark can run over: kafka.sh's port offset within a node's block, the
# flag that makes the brokers advertise the forwarders there, and kafka.sh's variable listing them.
LISTENERS = {
    "plaintext": (0, "--advertise-plaintext", "KAFKA_PLAINTEXT", "PLAINTEXT"),
    "sasl_ssl": (3, "--advertise-sasl-ssl", "KAFKA_SASL_SSL", "SASL_SSL"),
}
# The probes that take the SASL_SSL settings (PEERS_* variables, or the CLI's flags): all but
# stagger's JVM binding, whose host speaks no TLS (bindings/java/README.md).
SASL_SSL_PEERS = ("stagger CLI", "stagger library", "stagger Go", "stagger Python", "kafka-clients (Java)", "franz-go",
                  "franz-go + stagger front", "sarama", "sarama + stagger front", "librdkafka (confluent-kafka)",
                  "kafka-python", "aiokafka", "aiokafka + stagger front", "kafkajs")
SASL_MECHANISM = "SCRAM-SHA-512"


class Cluster:
    @staticmethod
    def start(script, kdir, brokers, lifetime, listener="plaintext"):
        """Forwarders on free ports, then the cluster, its brokers advertising them for `listener`.
        The forwarders listen first: kafka.sh's readiness check asks the advertised addresses."""
        offset, advertise, _, _ = LISTENERS[listener]
        for attempt, base in enumerate(free_blocks(brokers)):
            upstreams = [f"127.0.0.1:{base + 10 * i + offset}" for i in range(brokers)]
            fwd = Forwarders(upstreams, [base + 10 * i + 5 for i in range(brokers)])
            r = subprocess.run(["bash", script, "start", "--dir", kdir, "--brokers", str(brokers), "--base-port",
                                str(base), "--lifetime", str(lifetime), "--owner", str(os.getpid()),
                                advertise, ",".join(fwd.addresses)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode == 0:
                cluster = Cluster(script, kdir, listener)
                if cluster.addresses != upstreams:
                    raise RuntimeError(f"the cluster listens on {cluster.addresses}, not {upstreams}")
                return cluster, fwd
            fwd.close()
            subprocess.run(["bash", script, "stop", "--dir", kdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Another process took a port of the block between the check and the start: the next.
            if "in use" not in r.stderr or attempt >= 5:
                sys.exit(f"bench.py: the cluster did not start: {r.stderr.strip()[-600:]}")
        sys.exit("bench.py: no free block of ports on 127.0.0.1 between 18000 and 32000")

    def stop(self):
        subprocess.run(["bash", self.script, "stop", "--dir", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def __init__(self, script, kdir, listener="plaintext"):
        self.script, self.dir = script, kdir
        env = self.env()
        self.addresses = env[LISTENERS[listener][2]].split(",")
        self.version = env.get("KAFKA_VERSION", "?")
        # Over SASL_SSL: what every probe needs to connect (the test CA, user and password).
        self.sasl_ssl = {
            "PEERS_SECURITY_PROTOCOL": "SASL_SSL",
            "PEERS_SASL_MECHANISM": SASL_MECHANISM,
            "PEERS_SASL_USERNAME": env.get("KAFKA_SASL_USERNAME", ""),
            "PEERS_SASL_PASSWORD": env.get("KAFKA_SASL_PASSWORD", ""),
            "PEERS_CA_FILE": env.get("KAFKA_CA", ""),
        } if listener == "sasl_ssl" else {}

    def env(self):
        out = subprocess.run(["bash", self.script, "env", "--dir", self.dir], capture_output=True, text=True, check=True).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def pid(self, node):
        with open(os.path.join(self.dir, f"node-{node}", "pid")) as f:
            return int(f.read().strip())

    def signal(self, nodes, sig):
        for n in nodes:
            try:
                os.kill(self.pid(n), sig)
            except ProcessLookupError:
                pass

    def kill(self, nodes):
        self.signal(nodes, signal.SIGKILL)
        for n in nodes:  # until the port refuses
            host, port = self.addresses[n - 1].rsplit(":", 1)
            for _ in range(200):
                try:
                    socket.create_connection((host, int(port)), timeout=0.2).close()
                    time.sleep(0.05)
                except OSError:
                    break

    def restart(self, node):
        r = subprocess.run(["bash", self.script, "restart", "--node", str(node), "--dir", self.dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=200)
        if r.returncode != 0:  # reported; the later cases still run on the brokers left
            print(f"bench.py: restarting node {node} failed: {r.stderr.strip()[-300:]}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- probes


def run_probe(argv, timeout, before=None, ready=True):
    """Runs one probe; returns (result dict, wall seconds). With `ready`, waits (up to 60 s) for
    the probe's {"ready":true} line (its warm-up done), calls `before()` (the fault, the counter
    reset), then sends the go line; without, calls `before()` and starts it."""
    import select

    if before and not ready:
        before()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.PIPE,
                         start_new_session=True)
    fd, buf = p.stdout.fileno(), b""

    def read_until(pred, deadline):
        nonlocal buf
        while not pred(buf):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return True  # EOF
                buf += chunk
        return True

    def killed(why):
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return {"ok": False, "killed": True, "elapsed_ms": None, "error": why}, time.monotonic() - t0

    try:
        if ready:
            if not read_until(lambda b: b"ready" in b, time.monotonic() + 60) or b"ready" not in buf:
                if before:
                    before()
                return killed("no ready line within 60 s (warm-up)")
            rest = buf.split(b"ready", 1)[1]  # drop the ready line
            buf = rest.split(b"\n", 1)[1] if b"\n" in rest else b""
            if before:
                before()
            t0 = time.monotonic()
            try:
                p.stdin.write(b"go\n")
                p.stdin.flush()
            except OSError:
                pass
        if not read_until(lambda b: False, t0 + timeout):
            return killed(f"killed after {timeout:g} s")
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        raise
    out = buf.decode("utf-8", "replace")
    doc = None
    try:
        doc = json.loads(out)  # the stagger CLI prints one (pretty) JSON object
    except ValueError:
        for line in reversed(out.strip().splitlines()):
            try:
                doc = json.loads(line)
                break
            except ValueError:
                continue
    if not isinstance(doc, dict):
        return {"ok": False, "elapsed_ms": None, "error": f"no JSON (exit {p.returncode}): {out.strip()[-200:]!r}"}, time.monotonic() - t0
    if "refresh" in doc:  # stagger CLI --json
        r = doc["refresh"]
        conns = sum(1 for a in r.get("attempts", []) if a.get("connected_ms") is not None)
        doc = {"ok": r.get("elapsed_ms") is not None, "elapsed_ms": r.get("elapsed_ms"), "error": doc.get("error"), "brokers": len(doc.get("brokers", [])), "connections": conns,
               "attempts": len(r.get("attempts", [])), "winner": r.get("winner")}
    elif "error" in doc and "ok" not in doc:
        doc = {"ok": False, "elapsed_ms": None, "error": str(doc.get("error"))[:200]}
    return doc, time.monotonic() - t0


IDLE_S = 3.0  # the idle spell whose connections bench.py counts before the cases


def connections(run):
    """The connections the forwarders counted in a run (raw results before the brokers advertised
    the forwarders named them bootstrap_connections: the seeds' only)."""
    return run["connections_counted"] if "connections_counted" in run else run["bootstrap_connections"]


TITLE = "# stagger and its peers: time to metadata with faulty brokers first"
INTRO = ("Each run below is generated by lab/peers/bench.py, the newest first; runs kept with `--keep-earlier` "
         "follow as they were written, each with its own method and table. Compare numbers within one run.")


def earlier_runs(text, label):
    """The runs of an earlier peers.md, as lines to follow this run: every `## ` section as it is;
    a file of one run written without a heading gets one (label, or Run of its date)."""
    lines = text.rstrip("\n").split("\n")
    if lines and lines[0] == TITLE:
        lines = lines[1:]
    while lines and (not lines[0].strip() or lines[0] == INTRO):
        lines = lines[1:]
    if not lines:
        return []
    if not lines[0].startswith("## "):
        m = re.search(r"^Measured (\d{4}-\d\d-\d\d \d\d:\d\d UTC)", "\n".join(lines), re.M)
        lines = [f"## {label or 'Run of ' + (m.group(1) if m else 'an unknown date')}", ""] + lines
    return lines + [""]


def latest_run(lines):
    """The lines of a peers.md's newest run: up to its second `## ` heading (a file of one run,
    without headings, is all one run)."""
    out, headings = [], 0
    for line in lines:
        if line.startswith("## "):
            headings += 1
            if headings == 2:
                break
        out.append(line)
    return out


def write_raw(path, results, idle=None):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump({"idle_connections": idle, "idle_s": IDLE_S, "results": [{"case": k[0], "client": k[1], "setting": k[2], "runs": v} for k, v in results.items()]},
                  f, indent=1)
    os.replace(path + ".tmp", path)


def fmt_ms(v):
    if v is None:
        return "—"
    if v >= 10000:
        return f"{v / 1000:.1f} s"
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 10:
        return f"{v:.1f} ms"
    return f"{v:.2f} ms"


def fmt_ratio(r):
    return f"{r:.0f}×" if r >= 10 else f"{r:.2g}×"


def code(text):
    """Markdown inline code, whatever backticks the text holds."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def lower_median(values):
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def span(values):
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka-script", required=True)
    ap.add_argument("--kafka-dir", required=True)
    ap.add_argument("--brokers", type=int, default=5, help="the cluster bench.py starts (at least 5)")
    ap.add_argument("--lifetime", type=int, default=3600, help="kafka.sh's watchdog: seconds before it stops the cluster")
    ap.add_argument("--peers", required=True, help="peers.tsv from install.sh")
    ap.add_argument("--versions", required=True, help="versions.tsv from install.sh")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--listener", choices=sorted(LISTENERS), default="plaintext",
                    help="what every client connects over (sasl_ssl: TLS with the cluster's test CA and SCRAM-SHA-512; "
                         f"only {', '.join(SASL_SSL_PEERS)} take it)")
    ap.add_argument("--slow-reps", type=int, default=3)
    ap.add_argument("--slow-s", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=40.0)
    ap.add_argument("--only", default="", help="comma-separated client names to run (default all)")
    ap.add_argument("--settings", default="", help="comma-separated settings to run (defaults,tuned; default both)")
    ap.add_argument("--cases", default="", help="comma-separated case keys (healthy,hung1,hung3,refused2,blackhole)")
    ap.add_argument("--out", default="")
    ap.add_argument("--raw", default="")
    ap.add_argument("--command", default="bash lab/peers/run.sh")
    ap.add_argument("--machine", default="polyglot: 2 cores, 24 GiB")
    ap.add_argument("--kafka-version", default="4.4.0", help="for --cases none (a report only)")
    ap.add_argument("--merge", default="",
                    help="an earlier run whose (case, client, setting) cells not run now join the table: its raw "
                         "results JSON (recomputed), or its peers.md (rows kept as they are)")
    ap.add_argument("--merge-note", default="", help="a sentence for the report on where the merged cases came from")
    ap.add_argument("--label", default="", help="this run's heading in the report (default: Run of <date>)")
    ap.add_argument("--keep-earlier", action="store_true",
                    help="keep the runs already in --out below this one, as they are (default: this run replaces them)")
    ap.add_argument("--earlier-label", default="",
                    help="with --keep-earlier: the heading of an earlier run written without one (default: Run of <date>)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so every fault is undone on the way out

    peers = []
    with open(args.peers) as f:
        for line in f:
            if line.strip():
                name, cmd = line.rstrip("\n").split("\t", 1)
                peers.append((name, shlex.split(cmd)))
    versions = []
    with open(args.versions) as f:
        for line in f:
            if line.strip():
                versions.append(line.rstrip("\n").split("\t"))
    if args.listener == "sasl_ssl":
        left = [p[0] for p in peers if p[0] not in SASL_SSL_PEERS]
        if left:
            print(f"bench.py: over SASL_SSL, left out (their hosts speak no TLS): {', '.join(left)}",
                  file=sys.stderr, flush=True)
        peers = [p for p in peers if p[0] in SASL_SSL_PEERS]
    all_peers = list(peers)
    if args.only:
        keep = [s.strip() for s in args.only.split(",")]
        peers = [p for p in peers if any(k.lower() in p[0].lower() for k in keep)]

    report_only = args.cases == "none"  # only the report, from --merge (no cluster needed)
    if report_only:
        cluster, n, warm, fwd, hole, kafka_version = None, 5, "", None, None, args.kafka_version
    else:
        if args.brokers < 5:
            sys.exit("bench.py: needs a cluster of at least 5 brokers (3 hung, 2 left to answer)")
        cluster, fwd = Cluster.start(args.kafka_script, args.kafka_dir, args.brokers, args.lifetime, args.listener)
        CLEANUP.append(cluster.stop)
        CLEANUP.append(fwd.close)
        # Every probe process inherits the SASL_SSL settings (none over PLAINTEXT).
        os.environ.update(cluster.sasl_ssl)
        n, kafka_version = len(cluster.addresses), cluster.version
        # never faulted: every probe's uncounted warm-up round bootstraps here (its own address,
        # past no forwarder; the metadata it gets names the forwarders, before any counting)
        warm = cluster.addresses[-1]
        hole = Blackhole()
        CLEANUP.append(hole.close)

    def configs_of(peer_list):  # (client, setting, argv prefix, setting's flag: a peer's tuned 0/1, the CLI's "listed"), stagger's first
        out = []
        for name, cmd in sorted(peer_list, key=lambda p: not p[0].startswith("stagger")):
            # stagger, and a peer behind stagger's bootstrap recipe ("… + stagger front"), at defaults only
            if name.startswith("stagger") or name.endswith("stagger front"):
                out.append((name, "defaults", cmd, None))
                if name == "stagger CLI":  # the one-shot's other seed order: as written
                    out.append((name, "seeds listed", cmd, "listed"))
            else:
                out.append((name, "defaults", cmd, "0"))
                out.append((name, "tuned 2 s", cmd, "1"))
        return out

    configs = configs_of(peers)
    if args.settings:
        want_settings = [w.strip() for w in args.settings.split(",")]
        configs = [c for c in configs if any(c[1].startswith(w) for w in want_settings)]

    def argv(cfg, seeds):
        name, _, cmd, flag = cfg
        if name == "stagger CLI":
            listed = ["--set", "shuffle_seeds=false"] if flag == "listed" else []
            secured = []
            if cluster is not None and cluster.sasl_ssl:
                e = cluster.sasl_ssl
                secured = ["--ca", e["PEERS_CA_FILE"], "-X", "security.protocol=SASL_SSL",
                           "-X", f"sasl.mechanism={e['PEERS_SASL_MECHANISM']}",
                           "-X", f"sasl.username={e['PEERS_SASL_USERNAME']}",
                           "-X", f"sasl.password={e['PEERS_SASL_PASSWORD']}"]
            return cmd + ["metadata", "--brokers", ",".join(seeds), "--json"] + listed + secured
        return cmd + [",".join(seeds), flag or "0", warm]

    all_cases = [
        ("healthy", "healthy", []),
        ("hung1", "1 hung first (SIGSTOP)", [1]),
        ("hung3", "3 hung first (SIGSTOP)", [1, 2, 3]),
        ("refused2", "2 refusing first (SIGKILL)", [1, 2]),
        ("blackhole", "1 blackholed first (no handshake)", []),
    ]
    canonical = list(all_cases)
    if args.cases:
        want = args.cases.split(",")
        all_cases = [c for c in all_cases if c[0] in want]

    # Warm the brokers' request path (JIT) before measuring: stagger's CLI, straight to each broker.
    cli = next((c for c in configs if c[0] == "stagger CLI"), None)
    if cli and not report_only:
        for i in range(40):
            run_probe(argv(cli, [cluster.addresses[i % n]]), 30, ready=False)
    # What the forwarders count with no client running (the brokers' own traffic through the
    # addresses they advertise): expected 0, reported with the method.
    idle = None
    if not report_only:
        fwd.reset()
        time.sleep(IDLE_S)
        idle = sum(fwd.snapshot())
        print(f"bench.py: {idle} connections counted in {IDLE_S:g} s with no client running", file=sys.stderr, flush=True)

    started = time.monotonic()
    results = {}  # (case key, client, setting) -> [run dicts]
    for key, label, nodes in all_cases:
        print(f"bench.py: case {label}", file=sys.stderr, flush=True)
        if key == "refused2":
            # The killed brokers' forwarders refuse too: their addresses (the seeds, and what the
            # metadata lists for them until the controller fences them) refuse as the brokers' own would.
            cluster.kill(nodes)
            for node in nodes:
                fwd.refuse(node - 1)
            seeds = list(fwd.addresses)
        elif key == "blackhole":
            seeds = [hole.address] + fwd.addresses
        else:
            seeds = list(fwd.addresses)
        slow = set()
        try:
            for rep in range(args.reps):
                for cfg in configs:
                    cell = (key, cfg[0], cfg[1])
                    runs = results.setdefault(cell, [])
                    if cell in slow and rep >= args.slow_reps:
                        continue
                    def before():
                        fwd.reset()
                        if key.startswith("hung"):
                            cluster.signal(nodes, signal.SIGSTOP)

                    try:
                        doc, wall = run_probe(argv(cfg, seeds), args.timeout, before, ready=cfg[0] != "stagger CLI")
                    finally:
                        if key.startswith("hung"):
                            cluster.signal(nodes, signal.SIGCONT)
                    time.sleep(0.05)
                    counts = fwd.snapshot()
                    doc["connections_counted"] = sum(counts)
                    doc["per_broker"] = counts
                    doc["wall_s"] = round(wall, 3)
                    runs.append(doc)
                    if args.raw:
                        write_raw(args.raw, results, idle)
                    took = doc.get("elapsed_ms")
                    if rep == 0 and (took is None or took >= args.slow_s * 1000):
                        slow.add(cell)
                    print(f"  {label} | {cfg[0]} | {cfg[1]} | rep {rep}: "
                          f"{'ok' if doc.get('ok') else 'FAIL'} {fmt_ms(took)} conns {sum(counts)} "
                          f"{'' if doc.get('ok') else doc.get('error', '')[:120]}", file=sys.stderr, flush=True)
                    if key.startswith("hung"):
                        time.sleep(0.3)  # the continued brokers drain their accept queues
        finally:
            if key == "refused2":
                for node in nodes:  # listening before the restart, whose check asks the advertised addresses
                    fwd.accept_again(node - 1)
                    cluster.restart(node)
    for undo in reversed(CLEANUP):  # the cluster is not needed for the report
        undo()
    CLEANUP.clear()
    if args.raw:
        write_raw(args.raw, results, idle)
    run_now = set(results)
    merged_rows = {}  # (case key, client, setting) -> its row from an earlier peers.md, as it was
    merged_errors = []  # (cell, its line in that peers.md's list of errors)
    if args.merge.endswith(".md"):
        by_label = {c[1]: c[0] for c in canonical}
        with open(args.merge) as f:
            for line in latest_run(f.read().splitlines(keepends=True)):
                cols = [c.strip() for c in line.strip().strip("|").split("|")]
                if line.startswith("| ") and len(cols) == 8 and cols[0] in by_label:
                    k = (by_label[cols[0]], cols[1], cols[2])
                    if k not in run_now:
                        merged_rows[k] = line.rstrip("\n")
                elif line.startswith("* ") and line.count(" / ") >= 2 and ": " in line:
                    case, client, rest = line[2:].rstrip("\n").split(" / ", 2)
                    setting = rest.split(": ", 1)[0]
                    merged_errors.append(((case, client, setting), line[2:].rstrip("\n")))
    elif args.merge:
        with open(args.merge) as f:
            for cell in json.load(f)["results"]:
                k = (cell["case"], cell["client"], cell["setting"])
                if k not in run_now:
                    results[k] = cell["runs"]
    merged = sorted(set(results) - run_now) + sorted(merged_rows)
    all_cases = [c for c in canonical if any(k[0] == c[0] for k in list(results) + list(merged_rows))]
    # Rows in the order of every installed peer (stagger's first), then any only merged.
    rows = [(c[0], c[1]) for c in configs_of(all_peers)]
    for k in list(results) + list(merged_rows):
        if (k[1], k[2]) not in rows:
            rows.append((k[1], k[2]))

    # ---------------------------------------------------------------- the table
    ref = {}
    for key, _, _ in all_cases:
        for client in ("stagger CLI", "stagger library"):
            runs = results.get((key, client, "defaults"), [])
            times = sorted(r["elapsed_ms"] for r in runs if r.get("ok")) + [float("inf")] * sum(1 for r in runs if not r.get("ok"))
            if times and lower_median(times) != float("inf"):
                ref.setdefault(key, (client, lower_median(times)))
    lines = [
        "| case (faulty seeds first) | client | setting | time to metadata, median | min–max | × stagger CLI | "
        "connections counted, median (min–max) | runs failed |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for key, label, _ in all_cases:
        for cfg in rows:
            runs = results.get((key, cfg[0], cfg[1]), [])
            if not runs:
                if (key, cfg[0], cfg[1]) in merged_rows:
                    lines.append(merged_rows[(key, cfg[0], cfg[1])])
                continue
            ok = [r["elapsed_ms"] for r in runs if r.get("ok")]
            failed = [r for r in runs if not r.get("ok")]
            conns = [connections(r) for r in runs]
            # A run without an answer counts as slower than every answer: the median is a run's.
            times = sorted(ok) + [float("inf")] * len(failed)
            med = lower_median(times)
            if ok:
                rng = f"{fmt_ms(min(ok))}–{fmt_ms(max(ok)) if not failed else 'no answer'}"
            else:
                rng = "—"
            if med == float("inf"):
                med_s, ratio = "no answer", "—"
            else:
                med_s = fmt_ms(med)
                ratio = "1×" if cfg[:2] == ("stagger CLI", "defaults") else (fmt_ratio(med / max(ref[key][1], 0.001)) if key in ref else "—")
            fail = f"{len(failed)}/{len(runs)}"
            if failed:
                kinds = sorted({("killed" if r.get("killed") else "error") for r in failed})
                fail += " (" + ", ".join(kinds) + ")"
            lines.append(
                f"| {label} | {cfg[0]} | {cfg[1]} | {med_s} | {rng} | {ratio} | "
                f"{lower_median(conns)} ({span(conns)}) | {fail} |"
            )
    table = "\n".join(lines)
    print(table)

    errors = []
    for (key, client, setting), runs in results.items():
        for r in runs:
            if not r.get("ok"):
                errors.append(f"{key} / {client} / {setting}: {str(r.get('error'))[:160]}")
    errors += [e for k, e in merged_errors if k in merged_rows]
    if args.out:
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        left_out = [v for v in versions if v[1] == "-"]
        doc = [
            f"## {args.label or 'Run of ' + now}",
            "",
            f"Measured {now} by {code(args.command)} on {args.machine} ({platform.system()} {platform.release()}), "
            "shared with other work. Generated by lab/peers/bench.py: do not edit by hand, rerun.",
            "",
            f"Apache Kafka {kafka_version}, {n} KRaft brokers (each broker + controller) on 127.0.0.1, started by "
            f"`scripts/kafka.sh` with each broker advertising, for {LISTENERS[args.listener][3]}, the address of its "
            "counting forwarder (see *Connections*), as a production cluster advertises the addresses its clients "
            "bootstrap from: a broker's seed and its entry in the metadata are one address. "
            + ("Every client connects over SASL_SSL: TLS trusting the cluster's test CA, then SASL "
               f"{SASL_MECHANISM} as the user kafka.sh creates, so each connection costs a TLS handshake and a "
               "SCRAM exchange (stagger's CLI: `--ca` and `-X` settings; every other probe: the same settings from "
               "the benchmark's `PEERS_*` variables, the peers behind stagger's front for the front too; the probe "
               "of stagger's JVM binding is left out, as its host speaks no TLS). "
               if args.listener == "sasl_ssl" else "")
            + "Every client gets the same seed list, faulty seeds first and the healthy brokers after, "
            "and is asked for the cluster's metadata once, its ordinary way: stagger `metadata --json` (CLI) and "
            "`stagger_tokio::refresh_with` with the default options (library, `lab/src/bin/peers_probe.rs`); "
            "`stagger.Metadata` (Go binding, `bindings/go` over its embedded wasm core, `lab/peers/go/stagger`) and "
            "`stagger.metadata_blocking` (Python wheel built from `bindings/python`) and `Stagger.refresh` (JVM binding, "
            "`bindings/java` on Chicory's compiler, `lab/peers/java-stagger`), all at their defaults; "
            "kafka-clients `Admin.describeCluster()`; librdkafka `AdminClient.list_topics()` (confluent-kafka); franz-go "
            "`kadm.BrokerMetadata`; sarama `NewClient` (fetches metadata before it returns); kafka-python and aiokafka "
            "`describe_cluster()` on their admin clients (aiokafka after `start()`); kafkajs `admin.connect()` + "
            "`describeCluster()`. *… + stagger front* = the same peer behind stagger's bootstrap recipe, as a user "
            "would put it in front of their client: franz-go and sarama after `stagger.Metadata(ctx, seeds, "
            "stagger.WithTopics())` and `md.Seeds()` (Go binding, `bindings/go/examples/bootstrap`), aiokafka after "
            "`await stagger.bootstrap_servers(seeds)` (Python wheel), each at stagger's defaults: the seed that "
            "answered first, then every other broker the answer lists (their advertised addresses) and every "
            "seed, less each address whose attempt in stagger's refresh failed or was cancelled before the broker "
            "answered, is the seed list given to the peer's constructor. Its time covers both, stagger's call and "
            "then the peer's own metadata round. franz-go, sarama and aiokafka each start at a random seed of the "
            "list they are given (the order is advice to them). Kafka keeps listing a hung broker while it stays "
            "registered; the front's list leaves it out because stagger's attempt at the same address (its seed) "
            "stayed silent. The front only chooses where the peer bootstraps: the metadata the peer then gets still "
            "lists every registered broker, hung ones included, and a peer may send a later request to one.",
            "",
            "* **Time to metadata** is measured inside each probe process, from creating the client to holding the "
            "answer (process start-up excluded). Each probe first does one uncounted round with a separate client "
            "against the last broker's own address (never faulted) *before the fault is made*, so imports, class "
            "loading and first-use costs are not billed; then it says it is ready, the fault is made, the counters "
            "are reset, and the measured round starts. stagger's CLI has no warm-up round (the fault is made before "
            "it starts).",
            "* **Faults**, made by the broker processes: *hung* = `SIGSTOP` (the kernel still accepts TCP, nobody "
            "answers), applied just before each probe starts and lifted (`SIGCONT`) right after it exits, so the "
            "brokers drain their accept queues between runs; *refusing* = `SIGKILL` for the whole case, its "
            "forwarder's listener closed with it, so its address refuses (as a seed, and as the metadata's entry for "
            "it until the controller fences the broker), restarted after it with `kafka.sh restart`; *blackholed* = "
            "a loopback "
            "listener whose accept queue is full, so SYNs are dropped and `connect` hangs.",
            "* **Connections** are counted by the counting TCP forwarders (Python asyncio, 127.0.0.1), one per broker, "
            "whose addresses are both the seeds and what the brokers advertise: every TCP handshake a client completed "
            "with any broker during the run, its bootstrap connections and any later ones to brokers it learned from "
            "the metadata alike (runs from before the brokers advertised the forwarders counted the seeds' "
            "handshakes only). A killed broker's forwarder refuses and a blackholed seed has none (it is no broker's "
            "address), so neither completes a handshake and neither counts. The cluster holds no topic, so the "
            "brokers replicate nothing and open no connection to each other through the forwarders"
            + (f": with no client running they counted {idle} in {IDLE_S:g} s before the cases" if idle is not None else "")
            + ". The forwarders add one loopback hop (well under a millisecond) to every connection of every client "
            "alike. stagger's own refresh connects to seeds only. For a peer behind stagger's front the count adds "
            "up both: stagger's handshakes, then every one the peer makes.",
            f"* **Repeats**: {args.reps} runs per (case, client, setting), the clients taking turns within each "
            f"repetition; a cell whose first run took {args.slow_s:g} s or more (or got no answer) runs "
            f"{args.slow_reps} times. Median = the lower median (a run that happened), a run without an answer "
            "counting as slower than every answer (a median of *no answer*: most runs got none; min–max ending in "
            f"*no answer*: some did not); a probe still running after {args.timeout:g} s is killed (counted as failed, "
            "`killed`). × stagger CLI = the median over stagger CLI's median in the same case of the same run.",
            "* **Settings**: *defaults* = the client as shipped; *tuned 2 s* = its per-request, per-connect and "
            "socket timeouts set to 2 s, backoff ceilings capped at 2 s where their default is longer (see each "
            "probe under `lab/peers/` for the exact keys); stagger's defaults shuffle the seeds, each run drawing "
            "its own order, as the peers start at a random seed; *seeds listed* (stagger CLI only) = "
            "`--set shuffle_seeds=false`, the seeds asked in the order written, faulty ones first. stagger "
            "otherwise, and the peers behind its front, run at their defaults only.",
            "",
            "Versions installed (by `lab/peers/install.sh`):",
            "",
            "| client | version |",
            "|---|---|",
        ]
        doc += [f"| {v[0]} | {v[1] if v[1] != '-' else v[2]} |" for v in versions]
        if left_out:
            doc += ["", "Left out: " + "; ".join(f"{v[0]} ({v[2]})" for v in left_out) + "."]
        if merged:
            now_rows = sorted({(k[1], k[2]) for k in run_now}, key=rows.index)
            doc += ["", f"Rows from this run: {', '.join(f'{c} ({s})' for c, s in now_rows)}, in "
                    f"{', '.join(c[1] for c in canonical if any(k[0] == c[0] for k in run_now))}. "
                    f"The {len(merged)} other rows are merged from an earlier run (`--merge {os.path.basename(args.merge)}`)"
                    + (", kept as they were (their × stagger CLI is over that run's stagger CLI)" if merged_rows else "")
                    + f". {args.merge_note}".rstrip()]
        doc += ["", table, ""]
        if errors:
            doc += ["Errors of the failed runs (first 160 characters each):", ""]
            doc += [f"* {e}" for e in sorted(set(errors))[:40]]
            doc += [""]
        earlier = []
        if args.keep_earlier and os.path.exists(args.out):
            with open(args.out) as f:
                earlier = earlier_runs(f.read(), args.earlier_label)
        doc = [TITLE, "", INTRO, ""] + doc + earlier
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write("\n".join(doc))
        print(f"bench.py: wrote {args.out}", file=sys.stderr)


CLEANUP = []  # what main() started, undone last first whatever happens


if __name__ == "__main__":
    try:
        main()
    finally:
        for undo in reversed(CLEANUP):
            try:
                undo()
            except Exception as e:  # noqa: BLE001
                print(f"bench.py: cleanup: {e!r}", file=sys.stderr)
