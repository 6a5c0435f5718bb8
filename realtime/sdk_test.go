package realtime_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"koe/config"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/proctest"
	"koe/testkit/realtimesdk"
)

// sdkToken is the token the SDK's tests give koe and send as the API key.
const sdkToken = "realtime-sdk-token-0123456789"

// sdkKoe starts a koe serving TLS (the SDK connects over wss only),
// speaking through the fake server's speech endpoint, whose model answers
// with respond; it returns the target for the SDK's driver.
func sdkKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, edit ...func(*config.Config)) (realtimesdk.Target, *fakellm.Server) {
	t.Helper()
	testkit.External(t, "node + openai sdk")
	ca := ""
	addr, llm := rtKoe(t, respond, append(edit, func(cfg *config.Config) {
		cfg.Server.AuthToken = sdkToken
		ca = realtimesdk.UseTLS(t, cfg)
	})...)
	return realtimesdk.For(addr, sdkToken, ca), llm
}

// sdkGolden compares the SDK's events with testdata/sdk/NAME.jsonl,
// normalised as rtaTrace does (or rewrites it with -update), and checks
// that each is an event the SDK's own types define for the dialect api.
func sdkGolden(t *testing.T, api, name string, events []realtimesdk.Event) {
	t.Helper()
	fields := realtimesdk.ServerEventFields(t, api)
	for _, e := range events {
		if _, known := fields[e.Type]; !known {
			t.Errorf("koe sent %s, which the SDK's %s types do not define", e.Type, api)
			continue
		}
		if missing, err := realtimesdk.MissingFields(fields, e.Raw); err != nil || len(missing) > 0 {
			t.Errorf("koe sent %s without the fields the SDK's %s types require: %q (%v): %s", e.Type, api, missing, err, e.Raw)
		}
	}
	checkGolden(t, filepath.Join("sdk", name+".jsonl"), rtaTrace(t, sdkEvents(t, events)))
}

// sdkEvents are the SDK's events as the package's tests read theirs.
func sdkEvents(t *testing.T, events []realtimesdk.Event) []rtEvent {
	t.Helper()
	got := make([]rtEvent, len(events))
	for i, e := range events {
		got[i].raw = e.Raw
		e.Decode(t, &got[i].m)
	}
	return got
}

// sdkUserText is a user's text item.
func sdkUserText(text string) map[string]any {
	return map[string]any{"type": "conversation.item.create",
		"item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}}
}

// sdkWeatherTool is a client's function, as the SDK's types define it.
var sdkWeatherTool = map[string]any{
	"type": "function", "name": "get_weather", "description": "The weather in a city now.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
}

// A spoken turn as the SDK hears it: the user's text item, a response
// whose transcript and audio stream sentence by sentence, and its end.
func TestSDKTextTurn(t *testing.T) {
	target, _ := sdkKoe(t, fakellm.Script(fakellm.Reply{Tokens: []string{"Hello ", "there. ", "How are ", "you?"}}))
	events := realtimesdk.Run(t, target, "text-turn", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("conversation.created"),
		realtimesdk.Send(sdkUserText("hi")),
		realtimesdk.Wait("conversation.item.done"),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	sdkGolden(t, "ga", "text-turn", events)
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
			session := map[string]any{"tools": []any{sdkWeatherTool}, "tool_choice": "auto"}
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
				realtimesdk.Send(sdkUserText("what is the weather in Paris?")),
				realtimesdk.Send(map[string]any{"type": "response.create"}),
				realtimesdk.Wait("response.done"),
				realtimesdk.Send(map[string]any{"type": "conversation.item.create", "item": map[string]any{
					"type": "function_call_output", "call_id": "${response.function_call_arguments.done.call_id}", "output": `{"sky":"sunny","celsius":21}`}}),
				realtimesdk.Send(map[string]any{"type": "response.create"}),
				realtimesdk.Wait("response.done"),
			}})
			sdkGolden(t, api, "function-call-"+api, events)

			reqs := llm.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests to the model, want 2", len(reqs))
			}
			if !slices.Contains(reqs[0].Tools, "get_weather") || reqs[0].ToolChoice != "auto" {
				t.Errorf("first request: tools %q, tool_choice %q", reqs[0].Tools, reqs[0].ToolChoice)
			}
			m := reqs[1].Messages
			call, result := m[len(m)-2], m[len(m)-1]
			if len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_w1" || result.Role != "tool" ||
				result.ToolCallID != "call_w1" || result.Content != `{"sky":"sunny","celsius":21}` {
				t.Errorf("the second request ends %+v, %+v", call, result)
			}
			if sdkUsers(reqs[1]) != sdkUsers(reqs[0]) {
				t.Errorf("the continuation has %d user messages, the first request %d: one was added", sdkUsers(reqs[1]), sdkUsers(reqs[0]))
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
			"type": "realtime", "output_modalities": []any{"text"}, "tools": []any{sdkWeatherTool}}}),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(sdkUserText("what is six times seven, and the weather in Paris?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
		realtimesdk.Send(map[string]any{"type": "conversation.item.create", "item": map[string]any{
			"type": "function_call_output", "call_id": "${response.function_call_arguments.done.call_id}", "output": "sunny"}}),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	sdkGolden(t, "ga", "server-and-client-tools", events)
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

func sdkUsers(r fakellm.Request) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "user" {
			n++
		}
	}
	return n
}

// response.cancel stops a response while its model is still writing: it
// ends "cancelled" with what was sent, and the next response runs as any
// other.
func TestSDKCancel(t *testing.T) {
	// The model writes its first words, then waits (until the test ends)
	// before the next: the cancel comes after the first delta, whatever
	// the machine's speed.
	held := make(chan struct{})
	story := fakellm.Reply{Tokens: []string{"Once upon a time, ", "there was a fox."}, BeforeChunk: func(i int) {
		if i == 1 {
			<-held
		}
	}}
	target, _ := sdkKoe(t, fakellm.Script(story, fakellm.Reply{Tokens: []string{"I am back."}}))
	t.Cleanup(func() { close(held) })
	text := map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "output_modalities": []any{"text"}}}
	events := realtimesdk.Run(t, target, "cancel", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(text),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(sdkUserText("tell me a long story")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.output_text.delta"),
		realtimesdk.Send(map[string]any{"type": "response.cancel"}),
		realtimesdk.Wait("response.done"),
		realtimesdk.Send(sdkUserText("are you there?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	sdkGolden(t, "ga", "cancel", events)
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
			"tools": []any{sdkWeatherTool}, "tool_choice": map[string]any{"type": "function", "name": "get_time"}}}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "conversation.item.create", "event_id": "evt_bad_call", "item": map[string]any{
			"type": "function_call_output", "call_id": "call_nobody_made", "output": "42"}}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "response.cancel", "event_id": "evt_bad_cancel"}),
		realtimesdk.Wait("error"),
		realtimesdk.Send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "output_modalities": []any{"text"}}}),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Send(sdkUserText("hello?")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.done"),
	}})
	sdkGolden(t, "ga", "bad-events", events)
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

// An audio turn from the SDK: espeak-ng's speech at 24 kHz pcm16, sent in
// 100 ms input_audio_buffer.append events under the default server VAD,
// heard by koe's voice detection and speech recognition, and answered
// with audio; the transcript is what the model was asked.
func TestSDKAudioTurn(t *testing.T) {
	testkit.External(t, "espeak-ng and pocketsphinx")
	proctest.LookPath(t, "pocketsphinx_continuous", "pocketsphinx")
	target, llm := sdkKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("A cup of coffee it is.")}))
	speech := filepath.Join(t.TempDir(), "speech.pcm")
	if err := os.WriteFile(speech, rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 500, 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	events := realtimesdk.Run(t, target, "audio-turn", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime",
			"audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": "whisper-1"}}}}}),
		realtimesdk.Wait("session.updated"),
		realtimesdk.Audio(speech, 100),
		realtimesdk.Wait("response.done"),
	}})
	c := &rtClient{t: t, got: sdkEvents(t, events)}
	if done := rtaEvent(t, c, "response.done"); done.str("response.status") != "completed" {
		t.Fatalf("response: %s", done.raw)
	}
	heard := rtaEvent(t, c, "conversation.item.input_audio_transcription.completed").str("transcript")
	if rtaHeard(heard) < 2 {
		t.Errorf("transcript %q holds fewer than two of %v", heard, rtaKeyWords)
	}
	if m := llm.Requests()[0].Messages; !strings.Contains(m[len(m)-1].Content, heard) {
		t.Errorf("the model was asked %q, not what was heard (%q)", m[len(m)-1].Content, heard)
	}
	if rtaCount(c, "response.output_audio.delta") == 0 {
		t.Errorf("no audio in the answer: %s", c.types())
	}
	sdkGolden(t, "ga", "audio-turn", events)
}
