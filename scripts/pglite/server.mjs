// PostgreSQL with pgvector for koe's tests, where Debian has no pgvector:
// PGlite (Postgres compiled to WebAssembly) in memory, with its pgvector
// extension, served over the Postgres wire protocol on 127.0.0.1.
//
//   node server.mjs [port] [--exit-with-stdin]
//
// Port 0 or none: any free port. With --exit-with-stdin it also stops when
// its stdin closes, so that a test process that dies does not leave it
// behind (a shell script's background job has /dev/null as stdin: it stops
// it with a signal instead).
//
// The packages are resolved from NODE_PATH-independent locations: the
// directory in KOE_TEST_NPM_DIR (scripts/test.sh installs the pinned
// versions of package.json there), else next to this file.
//
// When it listens it prints one line on stdout, "listening 127.0.0.1:PORT",
// which is what scripts/test.sh and the Go tests wait for. It stops on
// SIGTERM or SIGINT.
//
// PGlite is one Postgres backend: every connection pglite-socket accepts
// shares that one session. pglite-socket queues the wire messages of all
// connections and, while a transaction is open, runs only the messages of
// the connection that opened it. A query sent with the extended protocol
// is several messages (Parse, Bind, Execute, Sync) that another connection's
// messages may come between, and prepared statements of one connection are
// seen by all; so clients with several connections must use the simple
// protocol (pgx: default_query_exec_mode=simple_protocol), where one query
// is one message. See knowledge/postgres_test.go.
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { loader } from '../npm.mjs'

const load = loader(path.dirname(fileURLToPath(import.meta.url)))

const { PGlite } = await load('@electric-sql/pglite')
const { vector } = await load('@electric-sql/pglite-pgvector')
const { PGLiteSocketServer } = await load('@electric-sql/pglite-socket')

const args = process.argv.slice(2)
const exitWithStdin = args.includes('--exit-with-stdin')
const port = Number(args.find((a) => !a.startsWith('--')) ?? 0)
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`server.mjs: bad port in ${args.join(' ')}`)
  process.exit(2)
}
// Enough for a pool or two per test process; see the note above on what
// several connections mean here.
const maxConnections = Number(process.env.KOE_PGLITE_MAX_CONNECTIONS ?? 16)

const db = await PGlite.create({ extensions: { vector } })
const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port, maxConnections })
server.addEventListener('error', (e) => console.error('pglite-socket:', e.detail?.message ?? e.detail))
await server.start()
console.log(`listening ${server.getServerConn()}`)

let stopping = false
async function stop() {
  if (stopping) return
  stopping = true
  await server.stop()
  await db.close()
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
if (exitWithStdin) {
  process.stdin.on('end', stop)
  process.stdin.on('error', stop)
  process.stdin.resume()
}
