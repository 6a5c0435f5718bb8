package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// The MCP scenarios run koe with a stdio MCP server written in Python (the
// same wire protocol as any SDK's, a process of its own): a careless one
// that prints to stdout besides the protocol, and one that offers 500
// tools.

// mcpServerPy is the server. Its arguments: "junk" or "clean", how many
// extra tools to offer, and how long their descriptions are.
const mcpServerPy = `import json, sys
junk, many, desc = sys.argv[1] == "junk", int(sys.argv[2]), int(sys.argv[3])
def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
def send(msg):
    if junk:
        say("debug: answering " + str(msg.get("id")))
    say(json.dumps(msg))
schema = {"type": "object", "properties": {"text": {"type": "string", "description": "any text"}}}
tools = [{"name": "echo", "description": "Returns its text.", "inputSchema": schema}]
for i in range(many):
    d = "Returns the number %d, one of many tools." % i
    tools.append({"name": "many_%03d" % i, "description": d + " More words." * max(0, (desc - len(d)) // 11), "inputSchema": schema})
if junk:
    say("Probe MCP server 1.0 starting...")
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "probe", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
    elif method == "tools/call":
        if junk:
            say("debug: tools/call " + msg["params"]["name"])
        text = msg["params"].get("arguments", {}).get("text", "")
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
`

const (
	// mcpConnectWait bounds the wait for koe to have the server's tools.
	mcpConnectWait = 20 * time.Second
	mcpTurnTimeout = 60 * time.Second
	mcpJunkCalls   = 20
	mcpManyTurns   = 10
	mcpManyTools   = 500
)

// mcpScriptPath is where the server is written for koe to run, once per
// scenario run; the run removes it.
func mcpScriptPath() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("koe-hostile-mcp-%d.py", os.Getpid()))
}

// mcpConfig configures koe with the server under name, enabled for the
// default character.
func mcpConfig(name string, args ...string) func(*options) []setting {
	return func(*options) []setting {
		path := mcpScriptPath()
		// Unwritten, koe reports the server failing to start, and the
		// row shows it.
		_ = os.WriteFile(path, []byte(mcpServerPy), 0o600)
		quoted := []string{fmt.Sprintf("%q", path)}
		for _, a := range args {
			quoted = append(quoted, fmt.Sprintf("%q", a))
		}
		return []setting{
			{"mcp_servers." + name + ".command", "python3"},
			{"mcp_servers." + name + ".args", "[" + strings.Join(quoted, ", ") + "]"},
			{"character.tools.mcp_servers", "[" + name + "]"},
		}
	}
}

// mcpSeen is what the fake LLM saw of an MCP scenario's requests.
type mcpSeen struct {
	mu   sync.Mutex
	seen mcpRequests
}

type mcpRequests struct {
	offered   int      // requests that offered the server's tools
	results   []string // tool results, in order
	toolCount []int    // tools per request, in order
	bytes     []int    // request body sizes, in order
}

// record adds a request under the lock.
func (s *mcpSeen) record(add func(*mcpRequests)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	add(&s.seen)
}

func (s *mcpSeen) snapshot() mcpRequests {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.seen
	r.results, r.toolCount, r.bytes = slices.Clone(r.results), slices.Clone(r.toolCount), slices.Clone(r.bytes)
	return r
}

func (s *mcpSeen) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = mcpRequests{}
}

// The scenarios' fake LLMs record here; a run starts by resetting its own.
var junkSeen, manySeen mcpSeen

func mcpJunkScenario() scenario {
	return scenario{
		name: "mcp-junk",
		about: fmt.Sprintf("a stdio MCP server prints a banner and a debug line before every message on stdout; "+
			"%d turns each call its echo tool", mcpJunkCalls),
		configFor: mcpConfig("junk", "junk", "0", "0"),
		// Every first call of a turn calls the tool, offered or not.
		respond: func(r fakellm.Request) fakellm.Reply {
			if !r.Stream {
				// A summary of earlier turns, which offers no tools.
				return fakellm.Reply{Tokens: fakellm.Words("A summary.")}
			}
			last := r.Messages[len(r.Messages)-1]
			junkSeen.record(func(seen *mcpRequests) {
				if slices.Contains(r.Tools, "junk__echo") {
					seen.offered++
				}
				if last.Role == "tool" {
					seen.results = append(seen.results, last.Content)
				}
			})
			if last.Role == "tool" {
				return fakellm.Reply{Tokens: fakellm.Words("Done.")}
			}
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "junk__echo", Arguments: `{"text":"ping"}`}}}
		},
		figure: fmt.Sprintf("calls answered of %d", mcpJunkCalls),
		format: "%.0f",
		run:    runMCPJunk,
	}
}

// mcpSession starts an MCP scenario's run: what its fake LLM saw so far
// forgotten, one session open. done closes it and removes the server's
// script, which koe has read by then.
func mcpSession(ctx context.Context, e *env, seen *mcpSeen) (ws *websocket.Conn, done func(), err error) {
	seen.reset()
	ws, err = dialSession(ctx, e.koe.URL)
	if err != nil {
		_ = os.Remove(mcpScriptPath())
		return nil, nil, err
	}
	return ws, func() {
		_ = ws.Close()
		_ = os.Remove(mcpScriptPath())
	}, nil
}

func runMCPJunk(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	ws, done, err := mcpSession(ctx, e, &junkSeen)
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer done()
	turn := []byte(`{"type":"text-input","text":"Call the echo tool."}`)
	// Turns until koe offers the server's tools, or gives up.
	start := time.Now()
	for junkSeen.snapshot().offered == 0 && time.Since(start) < mcpConnectWait && ctx.Err() == nil {
		_ = mcpTurn(ws, turn)
	}
	connected := junkSeen.snapshot().offered > 0
	before := len(junkSeen.snapshot().results)
	var turnErrs []string
	for range mcpJunkCalls {
		if err := mcpTurn(ws, turn); err != nil {
			turnErrs = append(turnErrs, err.Error())
		}
	}
	results := junkSeen.snapshot().results[before:]
	ok := 0
	for _, r := range results {
		if r == "ping" {
			ok++
		}
	}
	out.value = float64(ok)
	out.text = fmt.Sprintf("%d of %d tool calls answered", ok, mcpJunkCalls)
	if !connected {
		out.text += fmt.Sprintf("; the tools were never offered in %s", mcpConnectWait)
	}
	if i := slices.IndexFunc(results, func(r string) bool { return r != "ping" }); i >= 0 {
		out.text += "; a result: " + clip(results[i], 100)
	}
	if len(turnErrs) > 0 {
		out.text += fmt.Sprintf("; %d turns failed: %s", len(turnErrs), clip(turnErrs[0], 100))
	}
	return out
}

func mcpManyScenario() scenario {
	return scenario{
		name: "mcp-many-tools",
		about: fmt.Sprintf("a stdio MCP server offers %d tools to a character with the default 8,192-token window; "+
			"%d turns", mcpManyTools, mcpManyTurns),
		configFor: mcpConfig("many", "clean", fmt.Sprint(mcpManyTools), "0"),
		respond: func(r fakellm.Request) fakellm.Reply {
			if !r.Stream {
				// A summary of earlier turns, which offers no tools.
				return fakellm.Reply{Tokens: fakellm.Words("A summary.")}
			}
			manySeen.record(func(seen *mcpRequests) {
				seen.toolCount = append(seen.toolCount, len(r.Tools))
				seen.bytes = append(seen.bytes, len(r.Raw))
				if slices.Contains(r.Tools, "many__echo") {
					seen.offered++
				}
			})
			return fakellm.Reply{Tokens: fakellm.Words("Fine, thank you.")}
		},
		figure: fmt.Sprintf("turns answered of %d", mcpManyTurns),
		format: "%.0f",
		run:    runMCPMany,
	}
}

func runMCPMany(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	ws, done, err := mcpSession(ctx, e, &manySeen)
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer done()
	turn := []byte(`{"type":"text-input","text":"How are you?"}`)
	// Turns until the server's tools are in the requests or a turn fails
	// (they are, and do not fit), or koe gives up.
	start := time.Now()
	for time.Since(start) < mcpConnectWait && ctx.Err() == nil {
		if err := mcpTurn(ws, turn); err != nil || manySeen.snapshot().offered > 0 {
			break
		}
	}
	connected := time.Since(start) < mcpConnectWait
	before := len(manySeen.snapshot().toolCount)
	ok := 0
	var firstErr string
	for range mcpManyTurns {
		if err := mcpTurn(ws, turn); err != nil {
			if firstErr == "" {
				firstErr = err.Error()
			}
			continue
		}
		ok++
	}
	seen := manySeen.snapshot()
	out.value = float64(ok)
	out.text = fmt.Sprintf("%d of %d turns answered", ok, mcpManyTurns)
	if !connected {
		out.text += fmt.Sprintf("; the tools were never offered in %s", mcpConnectWait)
	}
	if n := len(seen.toolCount); n > before {
		out.text += fmt.Sprintf("; %d tools in the last request (%s)", seen.toolCount[n-1], size(int64(seen.bytes[n-1])))
	}
	if firstErr != "" {
		out.text += "; error: " + clip(firstErr, 160)
	}
	return out
}

// mcpTurn plays one turn to its end and returns its first error frame
// (nil: none): unlike runTurn, it reads past an error to the chain's end,
// so that the next turn does not take this one's end for its own.
func mcpTurn(ws *websocket.Conn, msg []byte) error {
	_ = ws.SetWriteDeadline(time.Now().Add(mcpTurnTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return err
	}
	deadline := time.Now().Add(mcpTurnTimeout)
	var refused error
	for {
		m, _, err := readFrame(ws, deadline)
		if err != nil {
			return err
		}
		switch {
		case m.Type == "error" && refused == nil:
			refused = errors.New(m.Message)
		case m.Type == "backend-synth-complete":
			if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`)); err != nil {
				return err
			}
		case m.Type == "control" && m.Text == "conversation-chain-end":
			return refused
		}
	}
}
