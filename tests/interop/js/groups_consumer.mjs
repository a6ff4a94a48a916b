// A kafkajs consumer-group member for tests/interop/test_groups.py, run as its own process so the
// test can SIGKILL it. Same contract as apps/group_consumer.py:
//
//   node groups_consumer.mjs '<json config>'   (bootstrap, topic, group, session_timeout_ms,
//                                               heartbeat_interval_ms, max_records, commit_every_ms)
//
// For every batch: one line per record, then (after every batch, or once commit_every_ms passed
// since the last commit) a synchronous commit of the next offsets processed, with a line before
// ("committing") and after ("commit", or "commit_err"). Lines are JSON with `t` = CLOCK_MONOTONIC
// seconds:
//   {"ev":"start"} {"ev":"assign","parts":[..],"s":n} {"ev":"rec","p":..,"o":..,"v":"..","s":n}
//   {"ev":"committing","offsets":{"p":next}} {"ev":"commit","offsets":{"p":next}}
//   {"ev":"commit_err","err":".."} {"ev":"closed"}
// kafkajs has no revoke callback; a new session starts at every GROUP_JOIN, which also drops the
// offsets processed but not committed yet (they may be redelivered).
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const conf = JSON.parse(process.argv[2])
let session = 0
let pending = {} // partition -> next offset processed, not committed
let lastCommit = 0

function out(ev, fields = {}) {
  const t = Number(process.hrtime.bigint()) / 1e9
  process.stdout.write(JSON.stringify({ ...fields, ev, t }) + '\n')
}

const kafka = new Kafka({
  clientId: 'strata-interop-groups',
  brokers: conf.bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
})
const consumer = kafka.consumer({
  groupId: conf.group,
  sessionTimeout: conf.session_timeout_ms,
  heartbeatInterval: conf.heartbeat_interval_ms,
  maxWaitTimeInMs: 100,
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
})
consumer.on(consumer.events.GROUP_JOIN, e => {
  session += 1
  pending = {}
  const parts = (e.payload.memberAssignment[conf.topic] || []).slice().sort((a, b) => a - b)
  out('assign', { parts, s: session, leader: e.payload.isLeader })
})
consumer.on(consumer.events.CRASH, e => out('error', { err: String(e.payload.error) }))

let stopping = false
async function stop() {
  if (stopping) return
  stopping = true
  await consumer.disconnect()
  out('closed')
  process.exit(0)
}
process.on('SIGTERM', () => { stop() })

await consumer.connect()
await consumer.subscribe({ topic: conf.topic, fromBeginning: true })
out('start')
await consumer.run({
  autoCommit: false,
  eachBatchAutoResolve: false,
  eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
    const msgs = batch.messages.slice(0, conf.max_records)
    if (!msgs.length || !isRunning() || isStale()) return
    for (const m of msgs) {
      out('rec', { p: batch.partition, o: Number(m.offset), v: m.value.toString(), s: session })
      resolveOffset(m.offset)
    }
    pending[batch.partition] = Number(BigInt(msgs[msgs.length - 1].offset) + 1n)
    const now = Date.now()
    if (now - lastCommit >= (conf.commit_every_ms || 0)) {
      lastCommit = now
      const offsets = pending
      pending = {}
      out('committing', { offsets })
      try {
        await consumer.commitOffsets(
          Object.entries(offsets).map(([p, o]) => ({ topic: batch.topic, partition: Number(p), offset: String(o) }))
        )
        out('commit', { offsets })
      } catch (e) {
        out('commit_err', { err: String(e) })
      }
    }
    await heartbeat()
  },
})
