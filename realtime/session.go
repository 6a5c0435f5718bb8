package realtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The session's settings: what session.update sets and session.updated
// reports, in either dialect. Settings koe reads elsewhere in this package
// (the input audio's turn detection and transcription, the client's tools)
// are kept as the client sent them, checked by their readers, and reported
// back unchanged.

// audioFormat is an audio format of the session: "audio/pcm" (16-bit
// little-endian mono at rate), "audio/pcmu" or "audio/pcma" (G.711 at
// 8 kHz).
type audioFormat struct {
	kind string
	rate int
}

var (
	formatPCM  = audioFormat{kind: "audio/pcm", rate: 24000}
	formatPCMU = audioFormat{kind: "audio/pcmu", rate: 8000}
	formatPCMA = audioFormat{kind: "audio/pcma", rate: 8000}
)

// betaName is the format's name in the beta dialect.
func (f audioFormat) betaName() string {
	switch f {
	case formatPCMU:
		return "g711_ulaw"
	case formatPCMA:
		return "g711_alaw"
	}
	return "pcm16"
}

// gaForm is the format's object in the GA dialect.
func (f audioFormat) gaForm() ev {
	if f.kind == formatPCM.kind {
		return ev{"type": f.kind, "rate": f.rate}
	}
	return ev{"type": f.kind}
}

// parseFormat reads a format in either dialect's form: a GA object
// ({"type": "audio/pcm", "rate": 24000}) or a beta name ("pcm16").
func parseFormat(raw json.RawMessage, param string) (audioFormat, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch name {
		case "pcm16":
			return formatPCM, nil
		case "g711_ulaw":
			return formatPCMU, nil
		case "g711_alaw":
			return formatPCMA, nil
		}
		return audioFormat{}, refuse(codeInvalidValue, param, fmt.Sprintf("audio format %q is not one of pcm16, g711_ulaw, g711_alaw", short(name)))
	}
	var obj struct {
		Type string `json:"type"`
		Rate *int   `json:"rate"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return audioFormat{}, refuse(codeInvalidValue, param, "an audio format is a name (pcm16, g711_ulaw, g711_alaw) or an object {type, rate}")
	}
	switch obj.Type {
	case formatPCM.kind:
		if obj.Rate != nil && *obj.Rate != formatPCM.rate {
			return audioFormat{}, refuse(codeInvalidValue, param+".rate", fmt.Sprintf("audio/pcm is at 24000 Hz; rate %d is not supported", *obj.Rate))
		}
		return formatPCM, nil
	case formatPCMU.kind:
		return formatPCMU, nil
	case formatPCMA.kind:
		return formatPCMA, nil
	}
	return audioFormat{}, refuse(codeInvalidValue, param+".type", fmt.Sprintf("audio format type %q is not one of audio/pcm, audio/pcmu, audio/pcma", short(obj.Type)))
}

// sessionConfig is a connection's settings. It is a value: an update works
// on a copy and replaces the whole only when every field is valid.
type sessionConfig struct {
	model        string
	instructions string
	voice        string
	// modalities are the output modalities: ["audio"] (spoken, with its
	// transcript), ["text"], or the beta default ["text", "audio"], which
	// is spoken too.
	modalities  []string
	outFormat   audioFormat
	inFormat    audioFormat
	temperature *float64
	// maxTokens bounds each reply's LLM calls; 0 is "inf" (the
	// character's own limit).
	maxTokens int
	speed     float64
	// Kept as sent, read by the input audio (turn detection,
	// transcription, noise reduction) and the client's tools.
	turnDetection  json.RawMessage
	transcription  json.RawMessage
	noiseReduction json.RawMessage
	tools          json.RawMessage
	toolChoice     json.RawMessage
	// turns is turnDetection read (nil: manual commits), with the
	// defaults its omitted fields take (input_events.go).
	turns *TurnDetection
	vad   VADDefaults
}

// defaultTurnDetection is server VAD with the API's documented defaults.
var defaultTurnDetection = json.RawMessage(`{"type":"server_vad","threshold":0.5,"prefix_padding_ms":300,"silence_duration_ms":500,"create_response":true,"interrupt_response":true}`)

func defaultConfig(d dialect) sessionConfig {
	c := sessionConfig{
		modalities:    []string{"audio"},
		outFormat:     formatPCM,
		inFormat:      formatPCM,
		voice:         "alloy",
		speed:         1,
		turnDetection: defaultTurnDetection,
		transcription: json.RawMessage("null"),
		tools:         json.RawMessage("[]"),
		toolChoice:    json.RawMessage(`"auto"`),
	}
	if d.beta {
		c.modalities = []string{"text", "audio"}
	}
	return c
}

// speaks reports whether responses are spoken by default.
func (c sessionConfig) speaks() bool { return slices.Contains(c.modalities, "audio") }

// sessionUpdate is session.update's session in either dialect: GA nests
// audio settings under audio.input/output, beta keeps them flat.
type sessionUpdate struct {
	Type             *string         `json:"type"`
	Model            *string         `json:"model"`
	Instructions     *string         `json:"instructions"`
	OutputModalities json.RawMessage `json:"output_modalities"`
	Modalities       json.RawMessage `json:"modalities"`
	Temperature      json.RawMessage `json:"temperature"`
	MaxOutputTokens  json.RawMessage `json:"max_output_tokens"`
	MaxResponseOut   json.RawMessage `json:"max_response_output_tokens"`
	Tools            json.RawMessage `json:"tools"`
	ToolChoice       json.RawMessage `json:"tool_choice"`
	Audio            *struct {
		Input *struct {
			Format         json.RawMessage `json:"format"`
			Transcription  json.RawMessage `json:"transcription"`
			TurnDetection  json.RawMessage `json:"turn_detection"`
			NoiseReduction json.RawMessage `json:"noise_reduction"`
		} `json:"input"`
		Output *struct {
			Format json.RawMessage `json:"format"`
			Voice  json.RawMessage `json:"voice"`
			Speed  *float64        `json:"speed"`
		} `json:"output"`
	} `json:"audio"`
	Voice                    json.RawMessage `json:"voice"`
	Speed                    *float64        `json:"speed"`
	InputAudioFormat         json.RawMessage `json:"input_audio_format"`
	OutputAudioFormat        json.RawMessage `json:"output_audio_format"`
	InputAudioTranscription  json.RawMessage `json:"input_audio_transcription"`
	TurnDetection            json.RawMessage `json:"turn_detection"`
	InputAudioNoiseReduction json.RawMessage `json:"input_audio_noise_reduction"`
}

// apply returns c with u's fields set, or the first invalid field's error
// (c itself is never changed). Unknown fields were ignored by the decoder.
func (c sessionConfig) apply(u sessionUpdate) (sessionConfig, error) {
	n := c
	n.modalities = slices.Clone(c.modalities)
	if u.Type != nil && *u.Type != "realtime" {
		return c, refuse(codeUnsupported, "session.type", fmt.Sprintf("session type %q is not supported: koe serves realtime sessions (transcription sessions are not served)", short(*u.Type)))
	}
	if u.Instructions != nil {
		n.instructions = *u.Instructions
	}
	for _, m := range []struct {
		raw   json.RawMessage
		param string
	}{{u.Modalities, "session.modalities"}, {u.OutputModalities, "session.output_modalities"}} {
		if m.raw == nil {
			continue
		}
		mods, err := parseModalities(m.raw, m.param)
		if err != nil {
			return c, err
		}
		n.modalities = mods
	}
	if u.Temperature != nil {
		t, err := parseTemperature(u.Temperature, "session.temperature")
		if err != nil {
			return c, err
		}
		n.temperature = t
	}
	for _, m := range []struct {
		raw   json.RawMessage
		param string
	}{{u.MaxResponseOut, "session.max_response_output_tokens"}, {u.MaxOutputTokens, "session.max_output_tokens"}} {
		if m.raw == nil {
			continue
		}
		max, err := parseMaxTokens(m.raw, m.param)
		if err != nil {
			return c, err
		}
		n.maxTokens = max
	}
	if u.Tools != nil {
		if !isJSONArray(u.Tools) {
			return c, refuse(codeInvalidValue, "session.tools", "tools is an array of tool definitions")
		}
		n.tools = u.Tools
	}
	if u.ToolChoice != nil {
		n.toolChoice = u.ToolChoice
	}
	if u.Tools != nil || u.ToolChoice != nil {
		if _, err := clientTools(n.tools, n.toolChoice, "session"); err != nil {
			return c, err
		}
	}
	voice, speed := u.Voice, u.Speed
	outFormat, inFormat := u.OutputAudioFormat, u.InputAudioFormat
	transcription, turns, noise := u.InputAudioTranscription, u.TurnDetection, u.InputAudioNoiseReduction
	if a := u.Audio; a != nil {
		if a.Output != nil {
			outFormat = or(a.Output.Format, outFormat)
			voice = or(a.Output.Voice, voice)
			if a.Output.Speed != nil {
				speed = a.Output.Speed
			}
		}
		if a.Input != nil {
			inFormat = or(a.Input.Format, inFormat)
			transcription = or(a.Input.Transcription, transcription)
			turns = or(a.Input.TurnDetection, turns)
			noise = or(a.Input.NoiseReduction, noise)
		}
	}
	if voice != nil {
		v, err := parseVoice(voice)
		if err != nil {
			return c, err
		}
		n.voice = v
	}
	if speed != nil {
		if *speed < 0.25 || *speed > 1.5 {
			return c, refuse(codeInvalidValue, "session.audio.output.speed", fmt.Sprintf("speed %g is outside 0.25 to 1.5", *speed))
		}
		n.speed = *speed
	}
	if outFormat != nil {
		f, err := parseFormat(outFormat, "session.audio.output.format")
		if err != nil {
			return c, err
		}
		n.outFormat = f
	}
	if inFormat != nil {
		f, err := parseFormat(inFormat, "session.audio.input.format")
		if err != nil {
			return c, err
		}
		n.inFormat = f
	}
	if transcription != nil {
		n.transcription = transcription
	}
	if turns != nil {
		if err := n.setTurnDetection(turns); err != nil {
			return c, err
		}
	}
	if noise != nil {
		n.noiseReduction = noise
	}
	return n, nil
}

// givesVoice reports whether the update names a voice, in either form.
func (u sessionUpdate) givesVoice() bool {
	return u.Voice != nil || u.Audio != nil && u.Audio.Output != nil && u.Audio.Output.Voice != nil
}

func or(a, b json.RawMessage) json.RawMessage {
	if a != nil {
		return a
	}
	return b
}

func isJSONArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && a != nil
}

func parseModalities(raw json.RawMessage, param string) ([]string, error) {
	var mods []string
	if err := json.Unmarshal(raw, &mods); err != nil || len(mods) == 0 {
		return nil, refuse(codeInvalidValue, param, `modalities are a non-empty list of "text" and "audio"`)
	}
	for _, m := range mods {
		if m != "text" && m != "audio" {
			return nil, refuse(codeInvalidValue, param, fmt.Sprintf(`modality %q is not "text" or "audio"`, short(m)))
		}
	}
	return mods, nil
}

func parseTemperature(raw json.RawMessage, param string) (*float64, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var t float64
	if err := json.Unmarshal(raw, &t); err != nil || t < 0 || t > 2 {
		return nil, refuse(codeInvalidValue, param, "temperature is a number from 0 to 2")
	}
	return &t, nil
}

// maxTokensLimit is the most max_output_tokens may ask for: the API's own
// bound on a response.
const maxTokensLimit = 4096

func parseMaxTokens(raw json.RawMessage, param string) (int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "inf" {
			return 0, nil
		}
		return 0, refuse(codeInvalidValue, param, fmt.Sprintf(`max output tokens is a whole number from 1 to %d, or "inf"`, maxTokensLimit))
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > maxTokensLimit {
		return 0, refuse(codeInvalidValue, param, fmt.Sprintf(`max output tokens is a whole number from 1 to %d, or "inf"`, maxTokensLimit))
	}
	return n, nil
}

// maxVoiceLen bounds a voice's name: it is echoed back in every session
// event.
const maxVoiceLen = 64

func parseVoice(raw json.RawMessage) (string, error) {
	var v string
	if json.Unmarshal(raw, &v) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", refuse(codeInvalidValue, "session.audio.output.voice", "voice is a name or {id}")
		}
		v = obj.ID
	}
	if v = strings.TrimSpace(v); v == "" || len(v) > maxVoiceLen {
		return "", refuse(codeInvalidValue, "session.audio.output.voice", fmt.Sprintf("voice is a name of 1 to %d bytes", maxVoiceLen))
	}
	return v, nil
}

func maxTokensValue(n int) any {
	if n == 0 {
		return "inf"
	}
	return n
}

// render is the session object of session.created and session.updated.
func (c sessionConfig) render(d dialect, id string, expires int64) ev {
	if d.beta {
		s := ev{
			"id": id, "object": "realtime.session", "model": c.model,
			"modalities": c.modalities, "instructions": c.instructions, "voice": c.voice,
			"input_audio_format": c.inFormat.betaName(), "output_audio_format": c.outFormat.betaName(),
			"input_audio_transcription": c.transcription, "turn_detection": c.turnDetection,
			"tools": c.tools, "tool_choice": c.toolChoice,
			"max_response_output_tokens": maxTokensValue(c.maxTokens), "speed": c.speed,
			"expires_at": expires,
		}
		if c.noiseReduction != nil {
			s["input_audio_noise_reduction"] = c.noiseReduction
		}
		if c.temperature != nil {
			// Unset, the character's own temperature applies.
			s["temperature"] = *c.temperature
		}
		return s
	}
	input := ev{"format": c.inFormat.gaForm(), "transcription": c.transcription, "turn_detection": c.turnDetection, "noise_reduction": nil}
	if c.noiseReduction != nil {
		input["noise_reduction"] = c.noiseReduction
	}
	s := ev{
		"type": "realtime", "object": "realtime.session", "id": id, "model": c.model,
		"output_modalities": c.modalities, "instructions": c.instructions,
		"audio": ev{"input": input, "output": ev{"format": c.outFormat.gaForm(), "voice": c.voice, "speed": c.speed}},
		"tools": c.tools, "tool_choice": c.toolChoice, "max_output_tokens": maxTokensValue(c.maxTokens),
		"tracing": nil, "prompt": nil, "include": nil, "expires_at": expires,
	}
	if c.temperature != nil {
		// Not a GA field; a GA client that set it sees it kept.
		s["temperature"] = *c.temperature
	}
	return s
}

// short cuts a client's string for an error message.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
