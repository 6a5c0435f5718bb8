// Drives koe's /v1/realtime with the official openai npm package's own
// Realtime WebSocket client (OpenAIRealtimeWS), so that koe's tests hear
// the API as the SDK speaks it, not as koe's authors read the reference.
//
//   node driver.mjs SCENARIO [script.json]    (no file: the script on stdin)
//
// Environment: KOE_REALTIME_BASE_URL (https://127.0.0.1:PORT/v1: the SDK
// always connects over wss), KOE_REALTIME_TOKEN (koe's token, sent as the
// API key), KOE_REALTIME_CA (the PEM file of the certificate koe serves),
// KOE_TEST_NPM_DIR (where scripts/test.sh installs the pinned packages of
// package.json; else next to this file).
//
// The script is JSON: {"api": "ga" | "beta", "model": "...", "steps": [...]}
// and each step one of
//   {"send": {client event}}        sent as is, after its strings' ${…} are
//                                   filled in (below)
//   {"wait": "event.type"}          waits for the next server event of that
//                                   type after the one the last wait found
//   {"audio": "file.pcm", "chunk_ms": 100}
//                                   sends a raw pcm16 24 kHz mono file as
//                                   input_audio_buffer.append events
//   {"close": true}                 closes the socket (the last step does
//                                   it anyway)
// In a sent event, a string "${TYPE.FIELD}" is FIELD (a dotted path) of the
// latest server event of type TYPE: a function call's call_id, say.
//
// Every server event is printed on stdout as one JSON line, as received.
// What went wrong goes to stderr, with exit status 1; a wait that sees no
// such event within KOE_REALTIME_WAIT_MS (60 s: a hang guard, not a timing)
// is an error.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { loader } from '../npm.mjs'

const load = loader(path.dirname(fileURLToPath(import.meta.url)))

function fail(msg) {
  process.stderr.write(`driver: ${msg}\n`)
  process.exit(1)
}

const [scenario, file] = process.argv.slice(2)
if (!scenario) fail('usage: node driver.mjs SCENARIO [script.json]')
const script = JSON.parse(readFileSync(file ?? 0, 'utf8'))
const baseURL = process.env.KOE_REALTIME_BASE_URL
if (!baseURL) fail('KOE_REALTIME_BASE_URL is not set')
const waitMs = Number(process.env.KOE_REALTIME_WAIT_MS ?? 60000)

const { OpenAI } = await load('openai')
const { OpenAIRealtimeWS } = await load(script.api === 'beta' ? 'openai/beta/realtime/ws' : 'openai/realtime/ws')

const client = new OpenAI({ apiKey: process.env.KOE_REALTIME_TOKEN || 'none', baseURL })
const options = process.env.KOE_REALTIME_CA ? { ca: readFileSync(process.env.KOE_REALTIME_CA) } : {}
const rt = new OpenAIRealtimeWS({ model: script.model ?? 'koe', options }, client)

// Every event, in order of arrival; waiters are woken on each.
const events = []
const latest = new Map()
let wake = () => {}
let closed = null
rt.on('event', (ev) => {
  process.stdout.write(JSON.stringify(ev) + '\n')
  events.push(ev)
  latest.set(ev.type, ev)
  wake()
})
// The SDK reports server error events here too (they are printed above);
// only a failure of the connection itself ends the scenario.
rt.on('error', (err) => {
  if (!err.event_id && !err.error) fail(`${scenario}: ${err.message}`)
})
rt.socket.on('close', (code, reason) => {
  closed = `closed ${code} ${reason}`
  wake()
})

await new Promise((resolve, reject) => {
  rt.socket.once('open', resolve)
  rt.socket.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode} on upgrade`)))
  rt.socket.once('error', reject)
}).catch((err) => fail(`${scenario}: could not connect: ${err.message}`))

let cursor = 0
async function waitFor(type) {
  const deadline = Date.now() + waitMs
  for (;;) {
    const i = events.findIndex((ev, j) => j >= cursor && ev.type === type)
    if (i >= 0) {
      cursor = i + 1
      return
    }
    if (closed) fail(`${scenario}: ${closed} before ${type}`)
    const left = deadline - Date.now()
    if (left <= 0) fail(`${scenario}: no ${type} within ${waitMs} ms; got ${events.slice(cursor).map((e) => e.type).join(', ')}`)
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, left)
      wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
}

function fill(v) {
  if (typeof v === 'string') {
    return v.replace(/\$\{([a-z_.]+)\}/g, (whole, ref) => {
      // The type has dots too: the longest prefix that names an event seen.
      const parts = ref.split('.')
      for (let i = parts.length - 1; i > 0; i--) {
        const ev = latest.get(parts.slice(0, i).join('.'))
        if (ev) {
          const got = parts.slice(i).reduce((o, k) => (o == null ? o : o[k]), ev)
          if (got === undefined) fail(`${scenario}: ${whole}: no such field`)
          return String(got)
        }
      }
      fail(`${scenario}: ${whole}: no such event yet`)
    })
  }
  if (Array.isArray(v)) return v.map(fill)
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]))
  return v
}

for (const step of script.steps ?? []) {
  if (step.send) {
    rt.send(fill(step.send))
  } else if (step.wait) {
    await waitFor(step.wait)
  } else if (step.audio) {
    const pcm = readFileSync(step.audio)
    // 24 kHz, 16-bit mono: 48 bytes a millisecond.
    const chunk = 48 * (step.chunk_ms ?? 100)
    for (let i = 0; i < pcm.length; i += chunk) {
      rt.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(i, i + chunk).toString('base64') })
    }
  } else if (step.close) {
    break
  } else {
    fail(`${scenario}: unknown step ${JSON.stringify(step)}`)
  }
}
rt.close()
