// kafkajs consume-transform-produce application for tests/interop/test_transactions.py, as its
// own process so the test can SIGKILL it; same contract as apps/txn_ctp.py:
//
//   node txn_ctp.mjs '<json>'   {bootstrap, in_topic, out_topic, group, tid, session_timeout_ms, max_records}
//
// It first runs an empty transaction (InitProducerId fences the previous instance and waits for
// its transaction to complete or abort), then consumes with read_committed; for every batch: a
// transaction that copies each value to the same partition of out_topic, sends the next input
// offset (sendOffsets) and commits. kafkajs has no static membership, so a restart waits for the
// old member's session to expire. Any error ends the process with a non-zero code.
// Output: JSON lines {"ev":"start"|"assign"|"begin"|"produced"|"offsets"|"committed"|"closed", ...}.
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const conf = JSON.parse(process.argv[2])
let n = 0

function out(ev, fields = {}) {
  const t = Number(process.hrtime.bigint()) / 1e9
  process.stdout.write(JSON.stringify({ ...fields, ev, t }) + '\n')
}

const kafka = new Kafka({
  clientId: 'strata-interop-ctp',
  brokers: conf.bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
})
const producer = kafka.producer({ transactionalId: conf.tid, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 10000 })
const consumer = kafka.consumer({
  groupId: conf.group,
  sessionTimeout: conf.session_timeout_ms,
  heartbeatInterval: 500,
  readUncommitted: false,
  maxWaitTimeInMs: 100,
})
consumer.on(consumer.events.GROUP_JOIN, e => {
  out('assign', { parts: (e.payload.memberAssignment[conf.in_topic] || []).slice().sort((a, b) => a - b) })
})
consumer.on(consumer.events.CRASH, e => {
  out('crash', { err: String(e.payload.error) })
  process.exit(3)
})

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  await consumer.disconnect()
  await producer.disconnect()
  out('closed')
  process.exit(0)
})

await producer.connect()
const init = await producer.transaction()
await init.abort()
out('start')
await consumer.connect()
await consumer.subscribe({ topic: conf.in_topic, fromBeginning: true })
await consumer.run({
  autoCommit: false,
  eachBatchAutoResolve: false,
  eachBatch: async ({ batch, resolveOffset, isRunning, isStale, heartbeat }) => {
    const msgs = batch.messages.slice(0, conf.max_records)
    if (!msgs.length || !isRunning() || isStale()) return
    const next = (BigInt(msgs[msgs.length - 1].offset) + 1n).toString()
    const txn = await producer.transaction()
    out('begin', { n })
    try {
      await txn.send({
        topic: conf.out_topic,
        messages: msgs.map(m => ({ partition: batch.partition, value: m.value })),
        acks: -1,
      })
      out('produced', { n, count: msgs.length })
      await txn.sendOffsets({
        consumerGroupId: conf.group,
        topics: [{ topic: conf.in_topic, partitions: [{ partition: batch.partition, offset: next }] }],
      })
      out('offsets', { n })
      await txn.commit()
      out('committed', { n, offsets: { [batch.partition]: Number(next) } })
    } catch (e) {
      out('error', { n, err: `${e.name}: ${e.message}` })
      process.exit(3)
    }
    n += 1
    for (const m of msgs) resolveOffset(m.offset)
    await heartbeat()
  },
})
