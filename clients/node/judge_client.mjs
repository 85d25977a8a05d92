// A client of the lab's judge, written from docs/PROTOCOL.md alone: a ZeroMQ DEALER socket, msgpack headers, the
// inline (ext 2) and framed (ext 1) arrays, one request out at a time.
//
//   node judge_client.mjs ADDRESS [--token TOKEN] [--episodes N] [--policy cartpole|first_legal] [--timeout S]
//
// Plays N episodes and prints one JSON line per episode ({"episode", "return", "length"}), then {"done": true}.
// A judge's error is printed as {"error": code, "msg"} and the process exits 1.
import { Dealer } from "zeromq";
import { ExtensionCodec, decode, encode } from "@msgpack/msgpack";
import { randomBytes } from "node:crypto";

const ARRAYS = {
  "|b1": Uint8Array, "|i1": Int8Array, "|u1": Uint8Array, "<i2": Int16Array, "<u2": Uint16Array,
  "<i4": Int32Array, "<u4": Uint32Array, "<i8": BigInt64Array, "<u8": BigUint64Array,
  "<f4": Float32Array, "<f8": Float64Array,
};

function array(dtype, shape, bytes) {
  // A numpy array of the wire as a flat typed array (little-endian dtypes, section 3.3) with its shape.
  const Kind = ARRAYS[dtype];
  if (!Kind) throw new Error(`dtype ${dtype} is not read by this client`);
  const copy = new Uint8Array(bytes); // aligned for the typed view
  const values = Array.from(new Kind(copy.buffer, 0, copy.byteLength / Kind.BYTES_PER_ELEMENT), Number);
  return { dtype, shape, values };
}

function codecFor(frames) {
  // Ext 2: [dtype, shape, bytes] inline; ext 1: [frame index, dtype, shape], the bytes in that frame (3.2).
  const codec = new ExtensionCodec();
  codec.register({ type: 2, encode: () => null, decode: (data) => {
    const [dtype, shape, bytes] = decode(data);
    return array(dtype, shape, bytes);
  } });
  codec.register({ type: 1, encode: () => null, decode: (data) => {
    const [index, dtype, shape] = decode(data);
    return array(dtype, shape, frames[index]);
  } });
  return codec;
}

class JudgeClient {
  constructor(address, timeout, retries = 1) {
    this.address = address;
    this.timeout = timeout;
    this.retries = retries;
    this.connect();
    this.seq = 0;
    this.token = null;
  }

  connect() {
    this.socket = new Dealer({ linger: 0, receiveTimeout: this.timeout * 1000 });
    this.socket.connect(this.address);
  }

  async request(header) {
    // One request, its reply: the reply echoing our s, or an error without one (4.2); errors are thrown. On silence
    // past the timeout the same request goes again, same s, marked retry, on a fresh socket (4.3), `retries` times.
    const s = this.seq++;
    for (let attempt = 0; ; attempt++) {
      await this.socket.send(encode({ ...header, k: this.token, s, ...(attempt ? { retry: true } : {}) }));
      try {
        return await this.reply(s);
      } catch (err) {
        if (err.code !== "EAGAIN" || attempt >= this.retries) throw err;
        this.socket.close();
        this.connect();
      }
    }
  }

  async reply(s) {
    for (;;) {
      const frames = await this.socket.receive();
      const reply = decode(frames[0], { extensionCodec: codecFor(frames) });
      if (reply.s !== s && !(reply.s === null && reply.t === "error")) continue; // a stale reply
      if (reply.t === "error") throw Object.assign(new Error(reply.msg), { code: reply.code });
      return reply;
    }
  }

  async hello(token) {
    this.token = token ?? null;
    const welcome = await this.request({ t: "hello", v: 1, h: randomBytes(8).toString("hex") });
    this.token = welcome.k;
    this.seq = Math.max(this.seq, welcome.last_seq + 1);
    return welcome;
  }

  close() {
    this.socket.close();
  }
}

const POLICIES = {
  // CartPole: push the cart toward where the pole falls (pole angle plus its angular velocity).
  cartpole: (obs) => (obs.values[2] + obs.values[3] > 0 ? 1 : 0),
  // A masked game: the first legal action of the observation's action_mask.
  first_legal: (obs) => obs.action_mask.values.findIndex((legal) => legal !== 0),
};

function options(argv) {
  const out = { episodes: 1, policy: "cartpole", timeout: 10, token: null };
  for (let i = 1; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return { address: argv[0], ...out, episodes: Number(out.episodes), timeout: Number(out.timeout) };
}

async function main() {
  const opts = options(process.argv.slice(2));
  const policy = POLICIES[opts.policy];
  const client = new JudgeClient(opts.address, opts.timeout);
  try {
    await client.hello(opts.token);
    for (let episode = 0; episode < opts.episodes; episode++) {
      let { o: obs } = await client.request({ t: "reset", seed: episode });
      let ret = 0;
      let length = 0;
      for (;;) {
        const reply = await client.request({ t: "step", a: policy(obs) });
        ret += reply.r;
        length += 1;
        obs = reply.o;
        if (reply.te || reply.tr) break;
      }
      console.log(JSON.stringify({ episode, return: ret, length }));
    }
    await client.request({ t: "close" });
    console.log(JSON.stringify({ done: true }));
  } catch (err) {
    console.log(JSON.stringify({ error: err.code ?? "client", msg: String(err.message) }));
    process.exitCode = 1;
  } finally {
    client.close();
  }
}

main();
