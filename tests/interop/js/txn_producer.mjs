// kafkajs transactional producer for tests/interop/test_transactions.py.
//
//   node txn_producer.mjs plan  '<json>'  {bootstrap, topic, tid, plan: [{records: [[partition, value], ..],
//                                          commit: bool}, ..]}: runs the transactions in order; each
//                                          transaction's send is acknowledged before it commits or
//                                          aborts, so aborted records really reach the broker.
//   node txn_producer.mjs fence '<json>'  {bootstrap, topic, tid}: producer A opens a transaction and
//                                          writes; producer B with the same transactional id starts
//                                          (fencing A), writes and commits; A then tries to write and
//                                          commit.
//
// Output: JSON lines with `t` = CLOCK_MONOTONIC seconds:
//   {"ev":"ack","who":..,"txn":i,"p":..,"o":..,"v":".."}  one per acknowledged record
//   {"ev":"committing","txn":i} {"ev":"committed","txn":i} {"ev":"aborted","txn":i}
//   {"ev":"fenced","who":"A","op":"send|commit","err":".."} {"ev":"not_fenced","who":"A"} {"ev":"done"}
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const [mode, confJson] = process.argv.slice(2)
const conf = JSON.parse(confJson)

function out(ev, fields = {}) {
  const t = Number(process.hrtime.bigint()) / 1e9
  process.stdout.write(JSON.stringify({ ...fields, ev, t }) + '\n')
}

const kafka = new Kafka({
  clientId: 'strata-interop-txn',
  brokers: conf.bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
})

function producer() {
  return kafka.producer({ transactionalId: conf.tid, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 30000 })
}

// Sends records (in order) in one call and reports each one's offset: a send returns one base
// offset per partition, and a partition's records are stored in the order given.
async function sendAcked(txn, who, txnIndex, records) {
  const messages = records.map(([p, v]) => ({ partition: p, value: v }))
  const res = await txn.send({ topic: conf.topic, messages, acks: -1 })
  const base = {}
  for (const r of res) {
    if (r.errorCode !== 0) throw new Error(`produce error ${r.errorCode} on partition ${r.partition}`)
    base[r.partition] = BigInt(r.baseOffset)
  }
  const next = {}
  for (const [p, v] of records) {
    const i = next[p] || 0n
    next[p] = i + 1n
    out('ack', { who, txn: txnIndex, p, o: Number(base[p] + i), v })
  }
}

async function runPlan() {
  const p = producer()
  await p.connect()
  try {
    for (const [i, step] of conf.plan.entries()) {
      const txn = await p.transaction()
      await sendAcked(txn, 'P', i, step.records)
      if (step.commit) {
        out('committing', { txn: i })
        await txn.commit()
        out('committed', { txn: i })
      } else {
        await txn.abort()
        out('aborted', { txn: i })
      }
    }
  } finally {
    await p.disconnect()
  }
}

async function runFence() {
  const a = producer()
  const b = producer()
  await a.connect()
  await b.connect()
  try {
    const ta = await a.transaction()
    await sendAcked(ta, 'A', 0, [[0, 'A-0'], [1, 'A-1'], [0, 'A-2']])
    const tb = await b.transaction() // InitProducerId: bumps the epoch, aborts A's transaction
    await sendAcked(tb, 'B', 0, [[0, 'B-0'], [1, 'B-1']])
    out('committing', { who: 'B', txn: 0 })
    await tb.commit()
    out('committed', { who: 'B', txn: 0 })
    let op = 'send'
    try {
      await sendAcked(ta, 'A', 0, [[1, 'A-3']])
      op = 'commit'
      out('committing', { who: 'A', txn: 0 })
      await ta.commit()
      out('not_fenced', { who: 'A' })
    } catch (e) {
      out('fenced', { who: 'A', op, err: `${e.name}: ${e.type || ''} ${e.message}` })
    }
  } finally {
    await a.disconnect()
    await b.disconnect()
  }
}

await (mode === 'plan' ? runPlan() : runFence())
out('done')
