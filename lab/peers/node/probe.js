// lab/peers probe for kafkajs: one admin client, connect() + describeCluster().
//
//   node probe.js BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// Prints {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,"elapsed_ms":…,"error":"…"}.
// Over SASL_SSL (bench.py --listener sasl_ssl) the benchmark sets PEERS_SECURITY_PROTOCOL=SASL_SSL,
// PEERS_SASL_MECHANISM, PEERS_SASL_USERNAME, PEERS_SASL_PASSWORD and PEERS_CA_FILE.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

async function once(bootstrap, tuned) {
  const conf = { clientId: 'peers-probe', brokers: bootstrap.split(','), logLevel: logLevel.NOTHING };
  const env = process.env;
  if (env.PEERS_SECURITY_PROTOCOL === 'SASL_SSL') {
    conf.ssl = { ca: [fs.readFileSync(env.PEERS_CA_FILE, 'utf8')] };
    conf.sasl = {
      mechanism: env.PEERS_SASL_MECHANISM.toLowerCase(),
      username: env.PEERS_SASL_USERNAME,
      password: env.PEERS_SASL_PASSWORD,
    };
  }
  if (tuned) {
    // Connect and per-request timeouts 2 s (defaults 1 s and 30 s); the retry backoff's
    // ceiling 2 s (default maxRetryTime 30 s; initialRetryTime 300 ms kept).
    Object.assign(conf, { connectionTimeout: 2000, requestTimeout: 2000, retry: { maxRetryTime: 2000 } });
  }
  const admin = new Kafka(conf).admin();
  try {
    await admin.connect();
    const d = await admin.describeCluster();
    return [d.brokers.length, process.hrtime.bigint()];
  } finally {
    admin.disconnect().catch(() => {});
  }
}

async function main() {
  const [bootstrap, tunedArg, warmup] = process.argv.slice(2);
  const tuned = tunedArg === '1';
  if (warmup) {
    try { await once(warmup, tuned); } catch (e) { console.error('warm-up failed: ' + e); }
    // Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
    process.stdout.write('{"ready":true}\n');
    await new Promise((resolve) => process.stdin.once('data', resolve));
    process.stdin.pause();
  }
  const t0 = process.hrtime.bigint();
  let out;
  try {
    const [n, at] = await once(bootstrap, tuned);
    out = { ok: true, elapsed_ms: Number(at - t0) / 1e6, brokers: n };
  } catch (e) {
    out = { ok: false, elapsed_ms: Number(process.hrtime.bigint() - t0) / 1e6, error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}

main();
