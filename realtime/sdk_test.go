package realtime_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/config"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/realtimesdk"
)

// update rewrites the SDK's golden traces (go test ./realtime -run SDK
// -update) after an intended change of the events.
var update = flag.Bool("update", false, "rewrite golden traces under testdata/")

// sdkToken is the token the SDK's tests give koe and send as the API key.
const sdkToken = "realtime-sdk-token-0123456789"

// sdkKoe starts a koe serving TLS (the SDK connects over wss only),
// speaking through the fake server's speech endpoint, whose model answers
// with respond; it returns the target for the SDK's driver.
func sdkKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, mutate ...func(*config.Config)) (realtimesdk.Target, *fakellm.Server) {
	t.Helper()
	testkit.External(t, "node + openai sdk")
	llm := koetest.StartLLM(t, respond)
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.AuthToken = sdkToken
	for _, m := range mutate {
		m(&cfg)
	}
	ca := realtimesdk.UseTLS(t, &cfg)
	m := koetest.StartKoe(t, cfg)
	return realtimesdk.For(m.Addr(), sdkToken, ca), llm
}

// traceKeys are the fields of an event a golden trace keeps: what the
// event says, not the ids koe makes at random or the audio's bytes.
var traceKeys = []string{
	"response.status", "response.status_details.type", "response.status_details.reason",
	"item.type", "item.role", "item.status", "item.server_label", "item.name", "item.call_id", "item.arguments", "item.output",
	"part.type", "output_index", "content_index", "call_id", "name", "arguments", "delta", "text", "transcript",
	"error.type", "error.code", "error.param", "error.event_id",
}

// traceLine is one event of a trace: its type and traceKeys' fields.
func traceLine(t *testing.T, e realtimesdk.Event) string {
	t.Helper()
	var m map[string]any
	e.Decode(t, &m)
	out := map[string]any{"type": e.Type}
	for _, k := range traceKeys {
		if v, ok := at(m, k); ok && v != nil {
			if k == "delta" && strings.HasSuffix(e.Type, "audio.delta") {
				continue // base64 of a tone
			}
			out[k] = v
		}
	}
	if outs, ok := at(m, "response.output"); ok {
		var kinds []string
		for _, o := range outs.([]any) {
			kinds = append(kinds, o.(map[string]any)["type"].(string))
		}
		out["response.output"] = strings.Join(kinds, ",")
	}
	line, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(line)
}

// at is the value at a dotted path of an event.
func at(m map[string]any, path string) (any, bool) {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// golden compares the events with testdata/sdk/NAME.jsonl (or writes it
// with -update).
func golden(t *testing.T, name string, events []realtimesdk.Event) {
	t.Helper()
	var b bytes.Buffer
	for _, e := range events {
		b.WriteString(traceLine(t, e))
		b.WriteByte('\n')
	}
	path := filepath.Join("testdata", "sdk", name+".jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./realtime -run SDK -update writes it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the SDK's events differ from %s (-update rewrites it after an intended change):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows where two traces part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\n want " + wl + "\n  got " + gl
		}
	}
	return ""
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// userText is a user's text item.
func userText(text string) map[string]any {
	return map[string]any{"type": "conversation.item.create",
		"item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}}
}

// weatherTool is a client's function, as the SDK's types define it.
var weatherTool = map[string]any{
	"type": "function", "name": "get_weather", "description": "The weather in a city now.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
}

// A spoken turn as the SDK hears it: the user's text item, a response
// whose transcript and audio stream sentence by sentence, and its end.
func TestSDKTextTurn(t *testing.T) {
	target, _ := sdkKoe(t, fakellm.Script(fakellm.Reply{Tokens: []string{"Hello ", "there. ", "How are ", "you?"}}))
	events := realtimesdk.Run(t, target, "text-turn", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("conversation.created"),
		realtimesdk.Send(userText("hi")),
		realtimesdk.Wait("conversation.item.done"),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	golden(t, "text-turn", events)
}

// The client's function, called by the model: the response holds a
// function_call item with the model's arguments and ends; the client's
// function_call_output and a new response.create go on from it, and the
// model is asked again with the result after its call (no new user
// message). In both dialects.
func TestSDKFunctionCall(t *testing.T) {
	for _, api := range []string{"ga", "beta"} {
		t.Run(api, func(t *testing.T) {
			target, llm := sdkKoe(t, fakellm.Script(
				fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_w1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
				fakellm.Reply{Tokens: []string{"It is ", "sunny in Paris."}},
			))
			mods := map[string]any{"output_modalities": []any{"text"}}
			if api == "beta" {
				mods = map[string]any{"modalities": []any{"text"}}
			}
			session := map[string]any{"tools": []any{weatherTool}, "tool_choice": "auto"}
			for k, v := range mods {
				session[k] = v
			}
			if api == "ga" {
				session["type"] = "realtime"
			}
			events := realtimesdk.Run(t, target, "function-call-"+api, realtimesdk.Script{API: api, Steps: []realtimesdk.Step{
				realtimesdk.Wait("session.created"),
				realtimesdk.Send(map[string]any{"type": "session.update", "session": session}),
				realtimesdk.Wait("session.updated"),
				realtimesdk.Send(userText("what is the weather in Paris?")),
				realtimesdk.Send(map[string]any{"type": "response.create"}),
				realtimesdk.Wait("response.done"),
				realtimesdk.Send(map[string]any{"type": "conversation.item.create", "item": map[string]any{
					"type": "function_call_output", "call_id": "${response.function_call_arguments.done.call_id}", "output": `{"sky":"sunny","celsius":21}`}}),
				realtimesdk.Send(map[string]any{"type": "response.create"}),
				realtimesdk.Wait("response.done"),
			}})
			golden(t, "function-call-"+api, events)

			reqs := llm.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests to the model, want 2", len(reqs))
			}
			if !contains(reqs[0].Tools, "get_weather") || reqs[0].ToolChoice != "auto" {
				t.Errorf("first request: tools %q, tool_choice %q", reqs[0].Tools, reqs[0].ToolChoice)
			}
			m := reqs[1].Messages
			call, result := m[len(m)-2], m[len(m)-1]
			if len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_w1" || result.Role != "tool" ||
				result.ToolCallID != "call_w1" || result.Content != `{"sky":"sunny","celsius":21}` {
				t.Errorf("the second request ends %+v, %+v", call, result)
			}
			if users(reqs[1]) != users(reqs[0]) {
				t.Errorf("the continuation has %d user messages, the first request %d: one was added", users(reqs[1]), users(reqs[0]))
			}
		})
	}
}

// koe's own tool and the client's, called in one cycle: the calculator
// runs inside the response and shows as an mcp_call item with its output;
// the client's function is handed out after it; the next request holds
// both results after the calls.
func TestSDKServerAndClientTools(t *testing.T) {
	target, llm := sdkKoe(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{
			{ID: "call_k1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
			{ID: "call_w1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		}},
		fakellm.Reply{Tokens: []string{"It is 42, and sunny in Paris."}},
	), func(cfg *config.Config) { cfg.Character.Tools.Enabled = []string{"calculator"} })
	events := realtimesdk.Run(t, target, "server-and-client-tools", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(map[string]any{"type": "session.update", "session": map[string]any{
			"type": "realtime", "output_modalities": []any{"text"}, "tools": []any{weatherTool}}}),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(userText("what is six times seven, and the weather in Paris?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
		realtimesdk.Send(map[string]any{"type": "conversation.item.create", "item": map[string]any{
			"type": "function_call_output", "call_id": "${response.function_call_arguments.done.call_id}", "output": "sunny"}}),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	golden(t, "server-and-client-tools", events)
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(reqs))
	}
	if got := strings.Join(reqs[0].Tools, ","); got != "get_weather,calculator" {
		t.Errorf("tools offered %q: the client's first, then koe's", got)
	}
	m := reqs[1].Messages
	if n := len(m); n < 3 || m[n-2].ToolCallID != "call_k1" || m[n-2].Content != "42" || m[n-1].ToolCallID != "call_w1" || m[n-1].Content != "sunny" {
		t.Errorf("the second request ends %+v", m[max(0, len(m)-3):])
	}
}

func users(r fakellm.Request) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "user" {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// response.cancel stops a response whose model has not answered yet: it
// ends "cancelled", and the next response runs as any other.
func TestSDKCancel(t *testing.T) {
	target, _ := sdkKoe(t, fakellm.Script(
		fakellm.Reply{Hang: true},
		fakellm.Reply{Tokens: []string{"I am back."}},
	))
	text := map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "output_modalities": []any{"text"}}}
	events := realtimesdk.Run(t, target, "cancel", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(text),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(userText("tell me a long story")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.content_part.added"),
		realtimesdk.Send(map[string]any{"type": "response.cancel"}),
		realtimesdk.Wait("response.done"),
		realtimesdk.Send(userText("are you there?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	golden(t, "cancel", events)
}

// Events koe cannot serve are answered with an error event naming the
// client's event_id, and the session goes on: an unknown type, tools koe
// does not take, a result for a call nobody made, a cancel with nothing
// to cancel.
func TestSDKBadEvents(t *testing.T) {
	target, _ := sdkKoe(t, fakellm.Script(fakellm.Reply{Tokens: []string{"Still here."}}))
	events := realtimesdk.Run(t, target, "bad-events", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("conversation.created"),
		realtimesdk.Send(map[string]any{"type": "nonsense.event", "event_id": "evt_bad_type"}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "session.update", "event_id": "evt_bad_tool", "session": map[string]any{
			"tools": []any{map[string]any{"type": "function", "name": "two words"}}}}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "session.update", "event_id": "evt_bad_choice", "session": map[string]any{
			"tools": []any{weatherTool}, "tool_choice": map[string]any{"type": "function", "name": "get_time"}}}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "conversation.item.create", "event_id": "evt_bad_call", "item": map[string]any{
			"type": "function_call_output", "call_id": "call_nobody_made", "output": "42"}}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "response.cancel", "event_id": "evt_bad_cancel"}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "output_modalities": []any{"text"}}}),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(userText("hello?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	golden(t, "bad-events", events)
	var ids []string
	for _, e := range events {
		if e.Type == "error" {
			var body struct {
				Error struct {
					EventID string `json:"event_id"`
				} `json:"error"`
			}
			e.Decode(t, &body)
			ids = append(ids, body.Error.EventID)
		}
	}
	if want := "evt_bad_type evt_bad_tool evt_bad_choice evt_bad_call evt_bad_cancel"; strings.Join(ids, " ") != want {
		t.Errorf("error events answer %q, want %q", ids, want)
	}
}
