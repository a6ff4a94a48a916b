#!/usr/bin/env node
// kafkajs driver for the Strata interop suite (tests/interop). The Python tests generate the
// records and check the results; this script only moves bytes through kafkajs.
//
//   node driver.js produce  <bootstrap> <topic> <codec> <in.jsonl> [acks]
//   node driver.js consume  <bootstrap> <topic> <partition> <count> <out.jsonl> [startOffset] [timeoutMs]
//   node driver.js offsets  <bootstrap> <topic> [timestampMs]
//   node driver.js reassign <bootstrap> <topic> <partition> <replicas,comma,separated>
//
// Record lines (both directions): {"o": offset, "p": partition, "k": b64|null, "v": b64|null,
// "h": [[name, b64], ...], "ts": ms|null}. `produce` prints one JSON line with the per-partition
// results kafkajs returned; `consume` writes one line per record; `offsets` prints JSON;
// `reassign` starts a partition reassignment and prints the reassignments kafkajs then lists.
//
// kafkajs (2.2.4) has no consumer without a group (no `assign`), and Strata has no consumer groups
// yet, so `consume` uses kafkajs's own Cluster/Broker objects to send Fetch requests and decode
// record batches with kafkajs's decoder (including decompression). It drops the records of a
// batch that lie below the requested offset, as the kafkajs consumer does.
//
// Codecs: kafkajs ships gzip only. Snappy comes from kafkajs-snappy (pure JS); LZ4 and ZSTD are
// small adapters below over pure-JS/wasm libraries (lz4js; zstd-codec to compress, fzstd to
// decompress), so nothing needs a native build.
'use strict'

const fs = require('fs')
const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const xxh32 = require('lz4js/xxh32')
const fzstd = require('fzstd')
const { ZstdCodec } = require('zstd-codec')

// LZ4 frames with their blocks flagged independent (FLG 0x60; 4 MiB blocks, BD 0x70, as lz4js
// writes), each block compressed with a fresh hash table so that none refers to an earlier one.
// lz4js.compress writes FLG 0x40 (blocks dependent), which Apache Kafka refuses
// ("Dependent block stream is unsupported", UNKNOWN_SERVER_ERROR on Produce).
const LZ4_BLOCK_BYTES = 4 << 20
function lz4Frame(src) {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0])
  header[6] = (xxh32.hash(0, header, 4, 2) >>> 8) & 0xff
  const parts = [header]
  for (let i = 0; i < src.length; i += LZ4_BLOCK_BYTES) {
    const block = src.subarray(i, Math.min(i + LZ4_BLOCK_BYTES, src.length))
    const out = Buffer.alloc(lz4.compressBound(block.length))
    const n = lz4.compressBlock(block, out, 0, block.length, new Uint32Array(1 << 16))
    const size = Buffer.alloc(4)
    if (n === 0 || n >= block.length) {
      size.writeUInt32LE((0x80000000 | block.length) >>> 0) // stored uncompressed
      parts.push(size, Buffer.from(block))
    } else {
      size.writeUInt32LE(n)
      parts.push(size, out.subarray(0, n))
    }
  }
  parts.push(Buffer.alloc(4)) // end mark
  return Buffer.concat(parts)
}

const Lz4Codec = () => ({
  async compress(encoder) {
    return lz4Frame(Buffer.from(encoder.buffer))
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer))
  },
})

let zstdSimple = null
const zstdReady = new Promise(resolve =>
  ZstdCodec.run(z => {
    zstdSimple = new z.Simple()
    resolve()
  })
)
const ZstdCodecAdapter = () => ({
  async compress(encoder) {
    await zstdReady
    return Buffer.from(zstdSimple.compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    return Buffer.from(fzstd.decompress(buffer))
  },
})

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = Lz4Codec
CompressionCodecs[CompressionTypes.ZSTD] = ZstdCodecAdapter

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// Messages per send() call: one send builds one batch per partition, and a batch must stay under
// the broker's max.message.bytes (1 MiB by default).
const CHUNK = 500

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function client(bootstrap) {
  return new Kafka({
    clientId: 'strata-interop-kafkajs',
    brokers: bootstrap.split(","),
    logLevel: logLevel.WARN,
    retry: { retries: 5, initialRetryTime: 100 },
  })
}

async function readJsonl(path) {
  const out = []
  const rl = readline.createInterface({ input: fs.createReadStream(path), crlfDelay: Infinity })
  for await (const line of rl) {
    if (line.trim()) out.push(JSON.parse(line))
  }
  return out
}

async function produce(bootstrap, topic, codecName, inPath, acks) {
  const compression = CODECS[codecName]
  if (compression === undefined) throw new Error(`unknown codec ${codecName}`)
  const recs = await readJsonl(inPath)
  const producer = client(bootstrap).producer({
    allowAutoTopicCreation: true,
    idempotent: false,
    maxInFlightRequests: 1,
  })
  await producer.connect()
  const results = []
  try {
    for (let i = 0; i < recs.length; i += CHUNK) {
      const messages = recs.slice(i, i + CHUNK).map(r => {
        const m = { key: unb64(r.k), value: unb64(r.v) }
        if (r.h && r.h.length) {
          m.headers = {}
          for (const [name, val] of r.h) m.headers[name] = unb64(val)
        }
        if (r.p !== null && r.p !== undefined) m.partition = r.p
        if (r.ts !== null && r.ts !== undefined) m.timestamp = String(r.ts)
        return m
      })
      const res = await producer.send({ topic, messages, acks, compression, timeout: 30000 })
      for (const r of res) {
        results.push({ p: r.partition, err: r.errorCode, base: r.baseOffset, n: messages.length })
      }
    }
  } finally {
    await producer.disconnect()
  }
  process.stdout.write(JSON.stringify({ sent: recs.length, results }) + '\n')
}

function privateCreateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Error('kafkajs internals changed: no createCluster symbol')
  return kafka[sym]({ metadataMaxAge: 300000, allowAutoTopicCreation: false })
}

async function consume(bootstrap, topic, partition, count, outPath, startOffset, timeoutMs) {
  const cluster = privateCreateCluster(client(bootstrap))
  await cluster.connect()
  const out = fs.createWriteStream(outPath)
  let got = 0
  let offset = BigInt(startOffset)
  const deadline = Date.now() + timeoutMs
  try {
    await cluster.addTargetTopic(topic)
    await cluster.refreshMetadata()
    const leaders = cluster.findLeaderForPartitions(topic, [partition])
    const nodeId = Object.keys(leaders)[0]
    if (nodeId === undefined) throw new Error(`no leader for ${topic}-${partition}`)
    const broker = await cluster.findBroker({ nodeId })
    while (got < count) {
      if (Date.now() > deadline) {
        throw new Error(`timed out after ${got} of ${count} records (next offset ${offset})`)
      }
      const resp = await broker.fetch({
        replicaId: -1,
        isolationLevel: 0,
        maxWaitTime: 500,
        minBytes: 1,
        maxBytes: 8 << 20,
        topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes: 4 << 20 }] }],
      })
      for (const t of resp.responses) {
        for (const p of t.partitions) {
          if (p.errorCode !== 0) throw new Error(`fetch error code ${p.errorCode} at offset ${offset}`)
          for (const m of p.messages) {
            const o = BigInt(m.offset)
            if (o < offset) continue // earlier records of a batch that straddles the fetch offset
            if (got >= count) break
            const h = []
            for (const [name, val] of Object.entries(m.headers || {})) {
              for (const v of Array.isArray(val) ? val : [val]) h.push([name, b64(v)])
            }
            out.write(
              JSON.stringify({ o: Number(o), p: partition, k: b64(m.key), v: b64(m.value), h, ts: Number(m.timestamp) }) + '\n'
            )
            got += 1
            offset = o + 1n
          }
        }
      }
    }
  } finally {
    await new Promise(resolve => out.end(resolve))
    await cluster.disconnect()
  }
  process.stdout.write(JSON.stringify({ got }) + '\n')
}

async function offsets(bootstrap, topic, timestamp) {
  const admin = client(bootstrap).admin()
  await admin.connect()
  try {
    const res = { offsets: await admin.fetchTopicOffsets(topic) }
    if (timestamp !== undefined) {
      res.byTimestamp = await admin.fetchTopicOffsetsByTimestamp(topic, Number(timestamp))
    }
    process.stdout.write(JSON.stringify(res) + '\n')
  } finally {
    await admin.disconnect()
  }
}

async function reassign(bootstrap, topic, partition, replicas) {
  const admin = client(bootstrap).admin()
  await admin.connect()
  try {
    await admin.alterPartitionReassignments({
      topics: [{ topic, partitionAssignment: [{ partition, replicas }] }],
      timeout: 30000,
    })
    const listed = await admin.listPartitionReassignments({ topics: [{ topic, partitions: [partition] }] })
    process.stdout.write(JSON.stringify(listed) + '\n')
  } finally {
    await admin.disconnect()
  }
}

async function main() {
  const [cmd, ...a] = process.argv.slice(2)
  switch (cmd) {
    case 'produce':
      return produce(a[0], a[1], a[2], a[3], a[4] === undefined ? -1 : Number(a[4]))
    case 'consume':
      return consume(a[0], a[1], Number(a[2]), Number(a[3]), a[4], a[5] || '0', Number(a[6] || 60000))
    case 'offsets':
      return offsets(a[0], a[1], a[2])
    case 'reassign':
      return reassign(a[0], a[1], Number(a[2]), a[3].split(',').map(Number))
    default:
      throw new Error(`usage: driver.js produce|consume|offsets|reassign ... (got ${cmd})`)
  }
}

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`driver.js failed: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  }
)
