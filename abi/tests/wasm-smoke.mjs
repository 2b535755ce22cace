// The wasm module as a host sees it: instantiated with no imports at all (what wazero does
// for Go), then a session round through its exports and its memory — config written with
// stagger_alloc, a REQUEST_REFRESH batch stepped, the DIAL read back, a refusal fed, and the
// REFRESH_FAILED's JSON read (docs/abi.md's layouts, by hand). Run by scripts/test.sh:
//   node abi/tests/wasm-smoke.mjs PATH/TO/stagger.wasm
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const bytes = readFileSync(process.argv[2]);
const module = await WebAssembly.compile(bytes);
assert.deepEqual(WebAssembly.Module.imports(module), [], "no imports");
const { exports: abi } = await WebAssembly.instantiate(module, {});
assert.equal(abi.stagger_abi_version(), 1);

const mem = () => new DataView(abi.memory.buffer);
const utf8 = new TextEncoder();
const text = new TextDecoder();
const out = abi.stagger_alloc(8); // StaggerBuf in wasm32: ptr u32, len u32
const put = (data) => {
  const ptr = abi.stagger_alloc(data.length);
  new Uint8Array(abi.memory.buffer, ptr, data.length).set(data);
  return ptr;
};
const answer = () => {
  const ptr = mem().getUint32(out, true), len = mem().getUint32(out + 4, true);
  return new Uint8Array(abi.memory.buffer.slice(ptr, ptr + len));
};

const config = utf8.encode('{"seeds": ["b1:9092"], "one_shot": true, "settings": {"retry.retries": "0"}}');
const handle = abi.stagger_session_new(put(config), config.length, 1_000_000_000n, 7n);
assert.notEqual(handle, 0n, "session_new");

// An event batch: version 1, flags 0, count; records kind u8, length u32, body.
const batch = (records) => {
  const size = 8 + records.reduce((n, [, body]) => n + 5 + body.length, 0);
  const b = new Uint8Array(size), v = new DataView(b.buffer);
  v.setUint16(0, 1, true); v.setUint32(4, records.length, true);
  let at = 8;
  for (const [kind, body] of records) {
    b[at] = kind; v.setUint32(at + 1, body.length, true); b.set(body, at + 5); at += 5 + body.length;
  }
  return b;
};
const step = (now, records) => {
  const events = batch(records);
  const status = abi.stagger_step(handle, now, put(events), events.length, out);
  const a = answer();
  assert.equal(status, 0, text.decode(a));
  const v = new DataView(a.buffer);
  const actions = [];
  for (let i = 0, at = 16; i < v.getUint32(4, true); i++) {
    const len = v.getUint32(at + 1, true);
    actions.push([a[at], a.slice(at + 5, at + 5 + len)]);
    at += 5 + len;
  }
  return actions;
};

const first = step(1_000_000_000n, [[11, new Uint8Array([0])]]); // REQUEST_REFRESH, requested
assert.deepEqual(first.map(([k]) => k), [10, 1], "REFRESH_REQUESTED, DIAL");
const dial = new DataView(first[1][1].buffer);
const conn = dial.getBigUint64(0, true), n = dial.getUint16(9, true);
assert.equal(text.decode(first[1][1].slice(11, 11 + n)), "b1:9092");

const refused = new Uint8Array(11); // IO_ERROR: conn, kind 2 (refused), code 0
new DataView(refused.buffer).setBigUint64(0, conn, true); refused[8] = 2;
const last = step(1_001_000_000n, [[5, refused]]);
const failed = last.find(([k]) => k === 8);
assert.ok(failed, "REFRESH_FAILED");
const error = JSON.parse(text.decode(failed[1].slice(4)));
assert.equal(error.last_error.kind, "refused");

const junk = put(new Uint8Array([9, 9, 9]));
assert.equal(abi.stagger_step(handle, 1_002_000_000n, junk, 3, out), 2, "a malformed batch is refused");
assert.match(text.decode(answer()), /malformed_batch/);
assert.equal(abi.stagger_session_free(handle), 0);
console.log(`wasm smoke: ${bytes.length} bytes, no imports, a session round ran`);
