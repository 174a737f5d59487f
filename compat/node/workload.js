#!/usr/bin/env node
// inorder compatibility workload for kafkajs.
//
//   node workload.js BOOTSTRAP TOPIC_PREFIX [EXPECT]
//
// EXPECT: comma-separated host:port or host:lo-hi that every broker address
// the client learns must fall in ("-" or absent: no check). COMPAT_RF sets
// the replication factor of created topics (default 1). Steps and checks are
// those of compat/go (see compat/README.md).
'use strict'
const fs = require('fs')
const net = require('net')
const tls = require('tls')
const { Kafka, logLevel } = require('kafkajs')

const MAIN_PARTITIONS = 6
const TXN_PARTITIONS = 3
const N_MAIN = 2000
const N_RESUME = 200
const N_TXN = 100
// kafkajs assigns idempotent sequence numbers per send() call and advances
// them only when a send returns, so concurrent sends to one partition are
// not safe; run them one at a time (COMPAT_KAFKAJS_CONCURRENCY to override).
const SEND_CONCURRENCY = parseInt(process.env.COMPAT_KAFKAJS_CONCURRENCY || '1', 10)

const gen = (lo, hi, parts) => {
  const out = []
  for (let s = lo; s < hi; s++) out.push({ seq: s, partition: (s % 50) % parts })
  return out
}
const msg = r => ({ key: 'k' + (r.seq % 50), value: String(r.seq), partition: r.partition })
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function parseGot (value, partition, offset) {
  const v = value === null ? '' : value.toString()
  if (!/^\d+$/.test(v)) throw new Error(`unexpected value ${JSON.stringify(v)} at partition ${partition} offset ${offset}`)
  return { seq: parseInt(v, 10), partition, offset: Number(offset) }
}

function verify (sent, members) {
  const want = new Map(sent.map(r => [r.seq, r]))
  const perPartWant = new Map()
  for (const r of sent) {
    if (!perPartWant.has(r.partition)) perPartWant.set(r.partition, [])
    perPartWant.get(r.partition).push(r.seq)
  }
  const seen = new Set(); const owner = new Map(); const perPartGot = new Map(); const lastOff = new Map()
  const problems = []
  const add = m => { if (problems.length < 8) problems.push(m) }
  members.forEach((gots, m) => {
    for (const g of gots) {
      const r = want.get(g.seq)
      if (!r) { add(`unexpected record seq ${g.seq} (partition ${g.partition} offset ${g.offset})`); continue }
      if (seen.has(g.seq)) { add(`duplicate record seq ${g.seq} (partition ${g.partition} offset ${g.offset})`); continue }
      if (r.partition !== g.partition) add(`record seq ${g.seq} sent to partition ${r.partition}, read from ${g.partition}`)
      seen.add(g.seq)
      if (owner.has(g.partition) && owner.get(g.partition) !== m) add(`partition ${g.partition} read by members ${owner.get(g.partition)} and ${m}`)
      owner.set(g.partition, m)
      if (lastOff.has(g.partition) && g.offset <= lastOff.get(g.partition)) add(`partition ${g.partition} offsets not increasing: ${g.offset} after ${lastOff.get(g.partition)}`)
      lastOff.set(g.partition, g.offset)
      if (!perPartGot.has(g.partition)) perPartGot.set(g.partition, [])
      perPartGot.get(g.partition).push(g.seq)
    }
  })
  const missing = sent.filter(r => !seen.has(r.seq)).length
  if (missing) add(`${missing} of ${sent.length} records lost`)
  for (const [p, w] of perPartWant) {
    const g = perPartGot.get(p) || []
    for (let i = 0; i < Math.min(g.length, w.length); i++) {
      if (g[i] !== w[i]) { add(`partition ${p}: record #${i} is seq ${g[i]}, sent order says ${w[i]}`); break }
    }
  }
  if (problems.length) throw new Error(problems.join('; '))
}

function parseExpect (s) {
  if (!s || s === '-') return null
  return s.split(',').map(it => {
    const i = it.lastIndexOf(':'); const host = it.slice(0, i); const [lo, hi] = it.slice(i + 1).split('-')
    return { host, lo: parseInt(lo, 10), hi: parseInt(hi || lo, 10) }
  })
}

function checkAddrs (expect, addrs) {
  if (!addrs.length) throw new Error('client reported no broker addresses')
  const bad = addrs.filter(a => {
    const i = a.lastIndexOf(':'); const host = a.slice(0, i); const port = parseInt(a.slice(i + 1), 10)
    return !expect.some(e => e.host === host && port >= e.lo && port <= e.hi)
  })
  if (bad.length) throw new Error(`client learned addresses outside the proxy: ${bad} (all: ${addrs.sort()})`)
}

const withTimeout = (p, ms, what) => Promise.race([p, sleep(ms).then(() => { throw new Error(`${what}: step timeout ${ms / 1000}s`) })])

// The run's security settings, from the environment every workload of the
// matrix reads: COMPAT_TLS_CA (PEM CA file: TLS), COMPAT_TLS_CERT and
// COMPAT_TLS_KEY (PEM client certificate and key: mutual TLS),
// COMPAT_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER),
// COMPAT_SASL_USERNAME, COMPAT_SASL_PASSWORD, COMPAT_OAUTH_TOKEN_FILE (the
// bearer token). Nothing set: plaintext without authentication.
function security () {
  const c = {}
  if (process.env.COMPAT_TLS_CA) c.ssl = { ca: [fs.readFileSync(process.env.COMPAT_TLS_CA, 'utf8')] }
  if (process.env.COMPAT_TLS_CERT) {
    c.ssl.cert = fs.readFileSync(process.env.COMPAT_TLS_CERT, 'utf8')
    c.ssl.key = fs.readFileSync(process.env.COMPAT_TLS_KEY, 'utf8')
  }
  if (process.env.COMPAT_SASL_MECHANISM === 'OAUTHBEARER') {
    const token = fs.readFileSync(process.env.COMPAT_OAUTH_TOKEN_FILE, 'utf8').trim()
    c.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: token }) }
  } else if (process.env.COMPAT_SASL_MECHANISM) {
    c.sasl = {
      mechanism: process.env.COMPAT_SASL_MECHANISM.toLowerCase(),
      username: process.env.COMPAT_SASL_USERNAME || '',
      password: process.env.COMPAT_SASL_PASSWORD || ''
    }
  }
  return c
}

function describeSecurity () {
  const tlsOn = !!process.env.COMPAT_TLS_CA; const mech = process.env.COMPAT_SASL_MECHANISM
  const who = mech === 'OAUTHBEARER' ? `token from ${process.env.COMPAT_OAUTH_TOKEN_FILE}` : (process.env.COMPAT_SASL_USERNAME || '')
  return (mech ? 'SASL_' : '') + (tlsOn ? 'SSL' : 'PLAINTEXT') +
    (process.env.COMPAT_TLS_CERT ? `,client certificate ${process.env.COMPAT_TLS_CERT}` : '') + (mech ? `+${mech}(${who})` : '')
}

async function main () {
  const [bootstrap, prefix, expectArg = ''] = process.argv.slice(2)
  if (!prefix) { console.error('usage: node workload.js BOOTSTRAP TOPIC_PREFIX [EXPECT]'); process.exit(2) }
  const expect = parseExpect(expectArg)
  const rf = parseInt(process.env.COMPAT_RF || '1', 10)
  const dialed = new Set()
  const kafka = new Kafka({
    clientId: 'inorder-compat-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 8, initialRetryTime: 200 },
    // Record every address kafkajs connects to.
    socketFactory: ({ host, port, ssl, onConnect }) => {
      dialed.add(`${host}:${port}`)
      const s = ssl
        ? tls.connect(Object.assign({ host, port, servername: net.isIP(host) ? undefined : host }, ssl), onConnect)
        : net.connect({ host, port }, onConnect)
      s.setKeepAlive(true, 60000)
      return s
    },
    ...security()
  })
  const failed = []; const limits = []; const started = Date.now()
  const step = async (name, ms, fn) => {
    const t = Date.now()
    try {
      await withTimeout(fn(), ms, name)
      console.log(`STEP ${name} ok (${(Date.now() - t) / 1000}s)`)
      return true
    } catch (e) {
      console.log(`FAIL ${name}: ${e.message || e} (${(Date.now() - t) / 1000}s)`)
      failed.push(`${name}: ${e.message || e}`)
      return false
    }
  }
  const note = (name, why) => { console.log(`LIMIT ${name}: ${why}`); limits.push(`${name}: ${why}`) }
  const toClose = []
  console.log(`START kafkajs bootstrap=${bootstrap} prefix=${prefix} rf=${rf} expect=${JSON.stringify(expectArg)} security=${describeSecurity()}`)
  const topic = prefix + '-main'; const txnTopic = prefix + '-txn'; const group = prefix + '-group'

  const admin = kafka.admin(); toClose.push(admin)
  const created = await step('create-topics', 60000, async () => {
    await admin.connect()
    const ok = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: MAIN_PARTITIONS, replicationFactor: rf },
        { topic: txnTopic, numPartitions: TXN_PARTITIONS, replicationFactor: rf }]
    })
    if (!ok) throw new Error('topics already existed')
  })

  let producer = null
  const produce = async recs => {
    if (!producer) {
      producer = kafka.producer({ idempotent: true, maxInFlightRequests: 5 }); toClose.push(producer)
      await producer.connect()
      if (SEND_CONCURRENCY < 5) note('produce-idempotent', `kafkajs sends run ${SEND_CONCURRENCY} at a time (its idempotent sequence numbers are only safe for one send() in flight)`)
    }
    const chunks = []
    for (let i = 0; i < recs.length; i += 100) chunks.push(recs.slice(i, i + 100))
    for (let i = 0; i < chunks.length; i += SEND_CONCURRENCY) {
      await Promise.all(chunks.slice(i, i + SEND_CONCURRENCY).map(c => producer.send({ topic, acks: -1, messages: c.map(msg) })))
    }
  }

  const consumerCfg = groupId => ({ groupId, sessionTimeout: 10000, rebalanceTimeout: 15000, heartbeatInterval: 1000, maxWaitTimeInMs: 300 })

  const sent = gen(0, N_MAIN, MAIN_PARTITIONS)
  let produced = false
  let producedMore = false
  const grouped = created && await step('group-consume', 150000, async () => {
    const out = [[], []]; const assigned = [new Set(), new Set()]; const last = [new Map(), new Map()]
    let total = 0
    const members = []
    for (let i = 0; i < 2; i++) {
      const c = kafka.consumer(consumerCfg(group)); toClose.push(c); members.push(c)
      c.on(c.events.GROUP_JOIN, e => { assigned[i] = new Set((e.payload.memberAssignment[topic] || [])) })
      await c.connect()
      await c.subscribe({ topics: [topic], fromBeginning: true })
      await c.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          out[i].push(parseGot(message.value, partition, message.offset))
          last[i].set(partition, message.offset)
          total++
        }
      })
    }
    for (;;) {
      const all = [...assigned[0], ...assigned[1]]
      if (assigned[0].size && assigned[1].size && all.length === MAIN_PARTITIONS && new Set(all).size === MAIN_PARTITIONS) break
      await sleep(100)
    }
    console.log(`INFO group stable: member0=${assigned[0].size} partitions member1=${assigned[1].size} partitions`)
    const t = Date.now()
    await produce(sent)
    produced = true
    console.log(`STEP produce-idempotent ok (${(Date.now() - t) / 1000}s)`)
    while (total < sent.length) await sleep(50)
    for (let i = 0; i < 2; i++) {
      await members[i].commitOffsets([...last[i]].map(([partition, off]) => ({ topic, partition, offset: String(Number(off) + 1) })))
    }
    for (const c of members) await c.disconnect()
    out.forEach((m, i) => { if (!m.length) throw new Error(`group member ${i} received no records`) })
    verify(sent, out)
  })

  if (grouped && produced) {
    await step('resume-from-commit', 90000, async () => {
      const more = gen(N_MAIN, N_MAIN + N_RESUME, MAIN_PARTITIONS)
      await produce(more)
      producedMore = true
      const c = kafka.consumer(consumerCfg(group)); toClose.push(c)
      const got = []
      await c.connect()
      await c.subscribe({ topics: [topic], fromBeginning: true })
      await c.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { got.push(parseGot(message.value, partition, message.offset)) } })
      while (got.length < more.length) await sleep(50)
      await c.disconnect()
      verify(more, [got.slice(0, more.length)].concat(got.length > more.length ? [got.slice(more.length)] : []))
    })
  }

  if (process.env.COMPAT_LEADER_MOVE && producedMore) {
    // The long-lived producer still has the old leaders: its next writes get
    // NOT_LEADER_OR_FOLLOWER and must follow the move through the proxy. The
    // move is made by compat-go (franz-go's admin client) through the same address.
    await step('leader-move', 150000, async () => {
      const go = process.env.COMPAT_GO || require('path').join(__dirname, '..', 'go', 'bin', 'compat-go')
      const out = require('child_process').spawnSync(go, ['move-leaders', bootstrap, topic], { encoding: 'utf8', timeout: 100000 })
      if (out.status !== 0) throw new Error('moving leaders: ' + ((out.stderr || '').trim() || out.error))
      console.log('INFO leaders moved: ' + out.stdout.trim())
      await produce(gen(N_MAIN + N_RESUME, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS))
      const every = gen(0, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS)
      const c = kafka.consumer(consumerCfg(prefix + '-after-move')); toClose.push(c)
      const got = []
      await c.connect()
      await c.subscribe({ topics: [topic], fromBeginning: true })
      await c.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { got.push(parseGot(message.value, partition, message.offset)) } })
      while (got.length < every.length) await sleep(50)
      await c.disconnect()
      verify(every, [got])
    })
  }

  const commit = gen(100000, 100000 + N_TXN, TXN_PARTITIONS)
  const abort = gen(200000, 200000 + N_TXN, TXN_PARTITIONS)
  const sentinel = gen(900000, 900000 + TXN_PARTITIONS, TXN_PARTITIONS)
  const txnOK = created && await step('transactions', 60000, async () => {
    const p = kafka.producer({ transactionalId: 'inorder-compat-kafkajs-' + txnTopic, idempotent: true, maxInFlightRequests: 1 })
    toClose.push(p)
    await p.connect()
    for (const [recs, ok] of [[commit, true], [abort, false], [sentinel, true]]) {
      const tx = await p.transaction()
      await tx.send({ topic: txnTopic, acks: -1, messages: recs.map(msg) })
      await (ok ? tx.commit() : tx.abort())
    }
    await p.disconnect()
  })
  if (txnOK) {
    await step('read-committed', 60000, async () => {
      // kafkajs consumers are read_committed unless readUncommitted is set.
      const c = kafka.consumer({ ...consumerCfg(prefix + '-rc'), readUncommitted: false }); toClose.push(c)
      const got = []; const want = new Set(sentinel.map(r => r.seq))
      await c.connect()
      await c.subscribe({ topics: [txnTopic], fromBeginning: true })
      await c.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { got.push(parseGot(message.value, partition, message.offset)) } })
      while (![...want].every(s => got.some(g => g.seq === s))) await sleep(50)
      await c.disconnect()
      verify(commit.concat(sentinel), [got])
    })
  }

  if (expect) {
    await step('addresses', 30000, async () => {
      const d = await admin.describeCluster()
      const addrs = new Set(dialed)
      for (const b of d.brokers) addrs.add(`${b.host}:${b.port}`)
      console.log(`INFO addresses learned: ${[...addrs].sort()}`)
      checkAddrs(expect, [...addrs])
    })
  } else {
    console.log('INFO addresses: not checked (no EXPECT given)')
  }
  for (const c of toClose.reverse()) { try { await withTimeout(c.disconnect(), 10000, 'disconnect') } catch (e) {} }
  const d = (Date.now() - started) / 1000
  if (failed.length) { console.log(`RESULT fail kafkajs (${d}s): ${failed.join(' | ')}`); process.exit(1) }
  console.log(limits.length ? `RESULT pass kafkajs (${d}s) with limitations: ${limits.join(' | ')}` : `RESULT pass kafkajs (${d}s)`)
  process.exit(0)
}

main().catch(e => { console.log(`RESULT fail kafkajs: ${e.stack || e}`); process.exit(1) })
