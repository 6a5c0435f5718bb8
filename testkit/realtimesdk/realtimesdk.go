// Package realtimesdk runs the official openai npm package's Realtime
// WebSocket client against a koe, for the tests of /v1/realtime: a scenario
// (client events to send, server events to wait for) goes to
// scripts/realtime/driver.mjs, which plays it with the SDK's
// OpenAIRealtimeWS and prints every server event it receives; Run returns
// them. The SDK always connects over wss, so koe serves TLS (UseTLS) with
// a certificate made for the test.
package realtimesdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit"
	"koe/testkit/proctest"
	"koe/testkit/tlstest"
)

// Versions of the npm packages the driver uses, as scripts/realtime's
// package.json pins them (scripts/test.sh installs them).
const (
	SDKVersion = "7.59.0"
	WSVersion  = "8.23.0"
)

// Script is what the driver plays.
type Script struct {
	// API is "ga" (the SDK's openai/realtime/ws, the default) or "beta"
	// (openai/beta/realtime/ws, which sends OpenAI-Beta: realtime=v1).
	API string `json:"api,omitempty"`
	// Model is the model the SDK names in ?model= (default "koe").
	Model string `json:"model,omitempty"`
	Steps []Step `json:"steps"`
}

// Step is one step of a script; see Send, Wait, Audio.
type Step struct {
	Send    any    `json:"send,omitempty"`
	Wait    string `json:"wait,omitempty"`
	Audio   string `json:"audio,omitempty"`
	ChunkMS int    `json:"chunk_ms,omitempty"`
}

// Send sends a client event. A string "${TYPE.FIELD}" in it becomes FIELD
// of the latest server event of TYPE (e.g.
// "${response.function_call_arguments.done.call_id}").
func Send(event any) Step { return Step{Send: event} }

// Wait waits for the next server event of type typ after the one the
// previous Wait found.
func Wait(typ string) Step { return Step{Wait: typ} }

// Audio sends a raw pcm16 24 kHz mono file as input_audio_buffer.append
// events of chunkMS milliseconds each.
func Audio(file string, chunkMS int) Step { return Step{Audio: file, ChunkMS: chunkMS} }

// Target is the koe the driver talks to.
type Target struct {
	// BaseURL is the SDK's baseURL: https://127.0.0.1:PORT/v1.
	BaseURL string
	// Token is koe's server.auth_token, sent as the SDK's API key.
	Token string
	// CAFile is the PEM certificate koe serves, which the driver trusts.
	CAFile string
}

// UseTLS makes cfg serve TLS with a certificate made for the test and
// returns the certificate's file, which For gives the driver to trust.
func UseTLS(t testing.TB, cfg *config.Config) (caFile string) {
	t.Helper()
	cert, err := tlstest.Make(1, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := cert.Write(t.TempDir(), "koe")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.TLSCert, cfg.Server.TLSKey = certFile, keyFile
	return certFile
}

// For is the target of a koe listening at addr (host:port) with TLS.
func For(addr, token, caFile string) Target {
	return Target{BaseURL: "https://" + addr + "/v1", Token: token, CAFile: caFile}
}

// Event is one server event as the SDK received it.
type Event struct {
	Type string
	Raw  json.RawMessage
}

// Decode decodes the event into v, failing the test on an error.
func (e Event) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(e.Raw, v); err != nil {
		t.Fatalf("event %s: %v", e.Raw, err)
	}
}

// Types lists the events' types, in order.
func Types(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// Run plays script against target as the scenario named and returns every
// server event the SDK received, in order. The test is skipped in the
// short lane and where node or the packages are missing (failed on CI);
// a driver that fails (a wait that saw no such event, a refused
// connection) fails the test with its words and the events so far.
func Run(t testing.TB, target Target, scenario string, script Script) []Event {
	t.Helper()
	testkit.External(t, "node + openai sdk")
	node, _ := proctest.NPMEntry(t, "openai", "package.json")
	proctest.NPMEntry(t, "ws", "package.json")
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no path to scripts/realtime/driver.mjs")
	}
	driver := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "realtime", "driver.mjs")
	in, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testkit.HangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, driver, scenario)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(),
		"KOE_REALTIME_BASE_URL="+target.BaseURL,
		"KOE_REALTIME_TOKEN="+target.Token,
		"KOE_REALTIME_CA="+target.CAFile,
		fmt.Sprintf("KOE_REALTIME_WAIT_MS=%d", testkit.HangGuard/time.Millisecond),
	)
	if dir := npmDir(); dir != "" {
		cmd.Env = append(cmd.Env, "KOE_TEST_NPM_DIR="+dir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	events := parse(t, stdout.Bytes())
	if runErr != nil {
		t.Fatalf("the SDK's scenario %s failed: %v\n%s\nevents: %s", scenario, runErr, strings.TrimSpace(stderr.String()), strings.Join(Types(events), ", "))
	}
	return events
}

// npmDir is where the packages are, as proctest.NPMEntry finds it.
func npmDir() string {
	if dir := os.Getenv("KOE_TEST_NPM_DIR"); dir != "" {
		return dir
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "koe-test-npm")
}

func parse(t testing.TB, out []byte) []Event {
	t.Helper()
	var events []Event
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("the driver printed %q: %v", line, err)
		}
		events = append(events, Event{Type: head.Type, Raw: append(json.RawMessage(nil), line...)})
	}
	return events
}

// ServerEventTypes are the server event types the installed SDK's own
// types define for api ("ga" or "beta"): the members of its
// RealtimeServerEvent union, read from its declaration file. A client
// written against the SDK's types knows these and no others.
func ServerEventTypes(t testing.TB, api string) map[string]bool {
	t.Helper()
	types := map[string]bool{}
	for typ := range ServerEventFields(t, api) {
		types[typ] = true
	}
	return types
}

// Field is a field an event's interface requires (declared without "?").
type Field struct {
	Name string
	// Nullable: its declared type admits null.
	Nullable bool
}

// ServerEventFields are the fields each server event type of api
// requires, as the SDK's interfaces declare them: a client written
// against its types reads them without checking they are there.
func ServerEventFields(t testing.TB, api string) map[string][]Field {
	t.Helper()
	rel := "resources/realtime/realtime.d.ts"
	if api == "beta" {
		rel = "resources/beta/realtime/realtime.d.ts"
	}
	_, file := proctest.NPMEntry(t, "openai", rel)
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	types, err := unionTypes(string(src), "RealtimeServerEvent")
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return types
}

// MissingFields names the fields of raw (one server event) that its
// type's interface in fields requires and it lacks, or holds null where
// the type admits none.
func MissingFields(fields map[string][]Field, raw json.RawMessage) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("event is not a JSON object: %w", err)
	}
	var typ string
	_ = json.Unmarshal(m["type"], &typ)
	var missing []string
	for _, f := range fields[typ] {
		v, ok := m[f.Name]
		switch {
		case !ok:
			missing = append(missing, f.Name)
		case !f.Nullable && string(bytes.TrimSpace(v)) == "null":
			missing = append(missing, f.Name+" (null)")
		}
	}
	return missing, nil
}

// unionTypes reads the event type literal of each member of the union
// named union in a declaration file: "export type U = A | U.B | …;", each
// member an interface (top-level, or in U's namespace) whose own
// "type: '…';" field names its event; and the fields each requires: its
// own fields, at the interface's indentation, not marked optional.
func unionTypes(src, union string) (map[string][]Field, error) {
	head := "export type " + union + " = "
	i := strings.Index(src, head)
	if i < 0 {
		return nil, fmt.Errorf("no %s union", union)
	}
	decl := src[i+len(head):]
	decl = decl[:strings.IndexByte(decl, ';')]
	types := map[string][]Field{}
	for _, member := range strings.Split(decl, "|") {
		member = strings.TrimSpace(member)
		start, indent := "\nexport interface "+member+" {", "\n    "
		if inner, ok := strings.CutPrefix(member, union+"."); ok {
			start, indent = "\n    interface "+inner+" {", "\n        "
		}
		j := strings.Index(src, start)
		if j < 0 {
			return nil, fmt.Errorf("no interface %s", member)
		}
		body := src[j+len(start):]
		body = body[:strings.Index(body, indent[:len(indent)-4]+"}")]
		k := strings.Index(body, indent+"type: '")
		if k < 0 {
			return nil, fmt.Errorf("interface %s has no type field", member)
		}
		lit := body[k+len(indent+"type: '"):]
		typ := lit[:strings.IndexByte(lit, '\'')]
		types[typ] = requiredFields(body, indent[1:])
	}
	return types, nil
}

// requiredFields are the fields of an interface's body declared at
// indent without "?": "name: type;".
func requiredFields(body, indent string) []Field {
	var fields []Field
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, indent)
		if !ok || rest == "" || !isIdentStart(rest[0]) {
			continue
		}
		name, decl, ok := strings.Cut(rest, ": ")
		if !ok || strings.HasSuffix(name, "?") || strings.ContainsAny(name, " ()<") {
			continue
		}
		fields = append(fields, Field{Name: name, Nullable: strings.Contains(decl, "null")})
	}
	return fields
}

func isIdentStart(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
