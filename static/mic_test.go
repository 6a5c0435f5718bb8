package static_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/config"
	"koe/testkit"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// spoken is what the person says into the fake microphone, and what the
// fake transcriber hears.
const spoken = "i would like to go home"

// micJS records, before the page's script runs, the microphone streams
// the page opened, the constraints it asked for and the AudioContexts it
// made (koeMedia), so that a test can check they were closed.
const micJS = `(() => {
	const media = window.koeMedia = {streams: [], constraints: [], contexts: []};
	const md = navigator.mediaDevices;
	if (md && md.getUserMedia) {
		const gum = md.getUserMedia.bind(md);
		md.getUserMedia = async (c) => {
			media.constraints.push(c);
			const s = await gum(c);
			media.streams.push(s);
			media.opened = performance.now();
			return s;
		};
	}
	const Native = window.AudioContext;
	window.AudioContext = class extends Native {
		constructor(...args) { super(...args); media.contexts.push(this); }
	};
})()`

// micState is what the page and the browser say about the microphone.
type micState struct {
	State, Error  string
	Rate          float64 // the AudioContext's sample rate
	Heard         int     // chunks the worklet delivered, sent or not
	Chunks, Bytes int
	Peak          float64
	Pressed       string // the button's aria-pressed
	Constraints   []struct {
		Audio struct {
			EchoCancellation, NoiseSuppression bool
			ChannelCount                       int
		}
	}
	Tracks   []string // readyState of every track opened
	Contexts []string // state of every AudioContext made
	Binary   wireBinary
}

const micStateJS = `({State: koeDebug.mic.state, Error: koeDebug.mic.error, Rate: koeDebug.mic.rate,
	Heard: koeDebug.mic.heard, Chunks: koeDebug.mic.chunks, Bytes: koeDebug.mic.bytes, Peak: koeDebug.mic.peak,
	Pressed: document.getElementById("mic").getAttribute("aria-pressed"),
	Constraints: koeMedia.constraints.map((c) => ({Audio: {EchoCancellation: c.audio.echoCancellation,
		NoiseSuppression: c.audio.noiseSuppression, ChannelCount: c.audio.channelCount}})),
	Tracks: koeMedia.streams.flatMap((s) => s.getTracks().map((t) => t.readyState)),
	Contexts: koeMedia.contexts.map((c) => c.state),
	Binary: koeWire.binary})`

func (p *pageT) mic() micState {
	p.t.Helper()
	var s micState
	p.eval(micStateJS, &s)
	return s
}

// TestChatPageMic: a person turns on the page's microphone and talks to
// koe. The page streams the microphone as binary PCM; koe's voice
// detection finds the utterance, the (fake) transcriber hears it, and koe
// answers it aloud.
func TestChatPageMic(t *testing.T) {
	recording, speech := micRecording(t, 1, 2)
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true, FakeMicrophone: recording})
	llm := koetest.StartLLM(t, fakellm.Echo(10*time.Millisecond))
	// The transcriber answers once the test has seen the page wait for it.
	release := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		<-release
		return fakellm.TranscriptionReply{Text: spoken}
	})
	koe := koetest.StartKoe(t, micConfig(t, llm))
	p := openMicPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	// koe says start-mic on connect; the page does not open the mic for
	// it: the user has not asked for it.
	p.waitFor(`koeWire.in.some((f) => f.Type === "control" && f.Text === "start-mic")`)
	if s := p.mic(); s.State != "off" || s.Pressed != "false" || len(s.Tracks) != 0 || len(s.Contexts) != 0 {
		t.Fatalf("before the click: %+v", s)
	}

	// A click turns it on: the page asks for an echo-cancelled mono
	// microphone and streams it.
	m := p.mark()
	p.click("#mic")
	p.waitFor(`koeDebug.mic.state === "on"`)
	s := p.mic()
	if s.Pressed != "true" || len(s.Constraints) != 1 || !s.Constraints[0].Audio.EchoCancellation ||
		!s.Constraints[0].Audio.NoiseSuppression || s.Constraints[0].Audio.ChannelCount != 1 {
		t.Fatalf("mic on: %+v", s)
	}
	// The level meter follows the voice; the screenshot is taken while
	// the person speaks.
	p.waitFor(`koeDebug.mic.peak > 0.5`)
	p.screenshot("mic.png")

	// koe hears the end of the utterance; while it transcribes, the page
	// shows that it heard something. Then koe answers.
	p.waitFor(`koeWire.in.some((f) => f.Type === "control" && f.Text === "mic-audio-end")`)
	p.waitFor(`document.querySelectorAll("#log .msg").length === 1`)
	p.expectBubbles(bubble{"human pending", "…", false})
	p.screenshot("mic-heard.png")
	done()
	want := "You said: " + spoken + "."
	turn := p.waitTurn(m)
	var events []string
	for _, f := range turn.In {
		switch {
		case f.Type == "control" && f.Text == "mic-audio-end",
			f.Type == "user-input-transcription",
			f.Type == "control" && f.Text == "conversation-chain-start":
			events = append(events, f.Type+" "+f.Text)
		}
	}
	if fmt.Sprint(events) != fmt.Sprint([]string{"control mic-audio-end", "control conversation-chain-start", "user-input-transcription " + spoken}) {
		t.Fatalf("koe sent %q, want the utterance's end, a new turn and the transcript", events)
	}
	p.expectBubbles(bubble{"human", spoken, false}, bubble{"ai", want, false})
	p.expectSpoken(turn)

	// What the page sent: the rate of its AudioContext, once, before any
	// audio, then the audio in whole 16-bit samples, 20 to 40 ms a frame.
	s = p.mic()
	cfgs := turn.sent("raw-audio-config")
	if len(cfgs) != 1 || cfgs[0].Binary != 0 || float64(cfgs[0].SampleRate) != s.Rate || s.Rate < 8000 {
		t.Fatalf("raw-audio-config sent %+v; the AudioContext runs at %v Hz", cfgs, s.Rate)
	}
	b := s.Binary
	frameMin, frameMax := float64(b.Min)/2/s.Rate, float64(b.Max)/2/s.Rate
	if b.Frames == 0 || b.Odd != 0 || b.First < cfgs[0].T || frameMin < 0.020 || frameMax > 0.040 ||
		b.Frames != s.Chunks || b.Bytes != s.Bytes {
		t.Fatalf("binary frames %+v (%.1f to %.1f ms each); the page counted %d chunks, %d bytes", b, 1000*frameMin, 1000*frameMax, s.Chunks, s.Bytes)
	}

	// What koe transcribed: a 16 kHz WAV as long as the speech, give or
	// take the detector's pre-roll and hang-over, with a voice in it.
	reqs := llm.TranscriptionRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d transcription requests, want 1", len(reqs))
	}
	w, err := parseWAV(reqs[0].Audio)
	if err != nil {
		t.Fatalf("koe sent the transcriber %d bytes that are no WAV: %v", reqs[0].AudioBytes, err)
	}
	got := w.duration()
	var gap float64
	p.eval(`koeWire.binary.First - koeMedia.opened`, &gap)
	t.Logf("speech %v; koe transcribed %v of audio, peak %.2f, from %d frames at %v Hz, the first %.0f ms after getUserMedia",
		speech, got, w.peak(), b.Frames, s.Rate, gap)
	if w.Rate != 16000 || w.Channels != 1 || w.Bits != 16 ||
		got < speech*8/10 || got > speech*2 || w.peak() < 0.05 {
		t.Fatalf("koe transcribed %+v: %v at peak %.2f, want 16 kHz mono 16-bit, 0.8 to 2 times the %v of speech",
			w.format(), got, w.peak(), speech)
	}

	// koe's stop-mic pauses the stream and start-mic resumes it; the mic
	// stays open meanwhile.
	p.eval(`koeWire.deliver(JSON.stringify({type: "control", text: "stop-mic"}))`, nil)
	s = p.mic()
	if s.State != "paused" || s.Pressed != "true" || strings.Contains(strings.Join(s.Tracks, " "), "ended") {
		t.Fatalf("after stop-mic: %+v", s)
	}
	// Five chunks the microphone delivered while paused, none of them sent.
	p.waitFor(`koeDebug.mic.heard >= ` + fmt.Sprint(s.Heard+5))
	if after := p.mic(); after.Binary.Frames != s.Binary.Frames {
		t.Fatalf("%d frames sent while paused", after.Binary.Frames-s.Binary.Frames)
	}
	p.eval(`koeWire.deliver(JSON.stringify({type: "control", text: "start-mic"}))`, nil)
	p.waitFor(`koeDebug.mic.state === "on" && koeWire.binary.Frames > ` + fmt.Sprint(s.Binary.Frames))

	// Off: the microphone and the AudioContext are closed and nothing
	// more is sent.
	p.click("#mic")
	p.waitFor(`koeDebug.mic.state === "off" && koeMedia.contexts.every((c) => c.state === "closed")`)
	s = p.mic()
	if s.Pressed != "false" || len(s.Tracks) == 0 || strings.Count(strings.Join(s.Tracks, " "), "ended") != len(s.Tracks) {
		t.Fatalf("mic off: %+v", s)
	}
	// Every context is closed and every track ended, so nothing can be
	// heard any more; what the worklet had posted before is not sent.
	p.eval(`new Promise((r) => setTimeout(r, 0))`, nil)
	if after := p.mic(); after.Binary.Frames != s.Binary.Frames || after.Heard != s.Heard {
		t.Fatalf("after the mic was turned off: %d frames sent, %d chunks heard", after.Binary.Frames-s.Binary.Frames, after.Heard-s.Heard)
	}
	if n := len(llm.TranscriptionRequests()); n != 1 {
		t.Fatalf("%d transcription requests after the one utterance", n)
	}
}

// TestChatPageMicBargeIn: the person talks while koe's reply is playing.
// koe hears it and stops the reply (control: interrupt); the page stops
// playback at once, without telling koe what was heard (koe has already
// ended the turn), and the utterance is answered.
func TestChatPageMicBargeIn(t *testing.T) {
	recording, _ := micRecording(t, 3, 2)
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true, FakeMicrophone: recording})
	echo := fakellm.Echo(10 * time.Millisecond)
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if lastUser(r) == slowPrompt {
			// Far longer than the test: still playing when the person
			// speaks, three seconds after the mic is turned on.
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat(slowSentence, 5000)), Interval: 5 * time.Millisecond}
		}
		return echo(r)
	})
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Text: spoken}
	})
	koe := koetest.StartKoe(t, micConfig(t, llm))
	p := openMicPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	// The reply is playing when the mic goes on.
	m := p.mark()
	p.say(slowPrompt)
	p.waitFor(`koeDebug.played.length >= 2 && koeDebug.played.at(-1).result === ""`)
	drain(llm.Disconnects())
	p.click("#mic")
	p.waitFor(`koeDebug.mic.state === "on"`)

	// The person speaks: koe stops the reply and the LLM stream, and the
	// page stops playing at once: the piece playing when the interrupt
	// came was stopped while the page handled it.
	p.waitFor(`koeWire.in.some((f) => f.Type === "control" && f.Text === "mic-audio-end")`)
	select {
	case <-llm.Disconnects():
	case <-time.After(guard):
		t.Fatal("the barge-in did not close the LLM stream")
	}
	s := p.since(m)
	at, next := -1, -1
	for i, f := range s.In {
		if f.Type == "control" && f.Text == "interrupt" {
			if at >= 0 {
				t.Fatalf("two interrupts: %+v", s.In)
			}
			at, next = i, i+1
		}
	}
	if at < 0 || next >= len(s.In) {
		t.Fatalf("no interrupt before mic-audio-end: %+v", s.In)
	}
	iT, nT := s.In[at].T, s.In[next].T
	var played, stopped []playEntry
	for _, e := range s.Played {
		if e.Start >= iT {
			p.fail(fmt.Errorf("%q was played after the interrupt", e.Text))
		}
		played = append(played, e)
		if e.End >= iT {
			stopped = append(stopped, e)
		}
	}
	if len(stopped) != 1 || stopped[0].Result != "stopped" || stopped[0].End > nT {
		p.fail(fmt.Errorf("at the interrupt (%.0f, next frame at %.0f) the page was playing %+v, want one piece stopped then", iT, nT, stopped))
	}
	// koe, not the page, ended the turn: the page told it nothing.
	for _, f := range s.Out {
		if f.Type == "interrupt-signal" || f.Type == "frontend-playback-complete" {
			p.fail(fmt.Errorf("the page sent %s for the reply koe stopped: %+v", f.Type, s.Out))
		}
	}
	// As with Stop, the stopped reply keeps what was heard: the pieces up
	// to the one playing, with any text-only pieces between them.
	var heard strings.Builder
	k := 0
	for _, f := range s.pieces() {
		if k == len(played) {
			break
		}
		heard.WriteString(f.Text)
		if f.Audio {
			if f.Text != played[k].Text {
				p.fail(fmt.Errorf("piece %q was played where %q came", played[k].Text, f.Text))
			}
			k++
		}
	}
	var stoppedText string
	p.eval(`document.querySelectorAll("#log .msg.ai")[0].lastChild.textContent`, &stoppedText)
	if stoppedText != heard.String() || !strings.HasPrefix(strings.Repeat(slowSentence, 5000), stoppedText) {
		p.fail(fmt.Errorf("the stopped reply shows %.80q, want what was heard, %.80q", stoppedText, heard.String()))
	}
	if n := len(played); played[n-1].Result != "stopped" || slices.ContainsFunc(played[:n-1], func(e playEntry) bool { return e.Result != "ended" }) {
		p.fail(fmt.Errorf("played %+v, want all ended but the last, stopped", played))
	}

	// The utterance is transcribed and answered, and spoken in full.
	want := "You said: " + spoken + "."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 4 && b[3].Text === ` + jsString(want) + ` })()`)
	p.expectBubbles(bubble{"human", slowPrompt, false}, bubble{"ai", stoppedText, true},
		bubble{"human", spoken, false}, bubble{"ai", want, false})
	turn := p.waitTurn(m)
	if len(turn.received("user-input-transcription", spoken)) != 1 {
		t.Fatalf("transcript: %+v", turn.received("user-input-transcription", ""))
	}
	p.expectSpoken(after(turn, "conversation-chain-start", iT))
	p.screenshot("barge-in.png")

	// History keeps the stopped reply as far as koe had sent it as
	// speech: what was heard, and usually more (koe sends speech ahead of
	// playback, and at a barge-in it does not know what was heard).
	p.waitFor(`histories.options.length === 2`)
	m = p.mark()
	p.eval(`histories.value = histories.options[1].value; histories.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`koeWire.in.slice(` + fmt.Sprint(m.in) + `).some((f) => f.Type === "history-data")`)
	var stored []record
	for _, f := range p.since(m).In {
		if f.Type == "history-data" {
			stored = f.Messages
		}
	}
	if len(stored) != 4 || !stored[1].Interrupted || !strings.HasPrefix(stored[1].Content, stoppedText) || stored[2].Content != spoken {
		t.Fatalf("history %+v; the page showed %.80q", stored, stoppedText)
	}
	if stored[1].Content != stoppedText {
		t.Logf("history keeps %d characters more of the stopped reply than were heard", len(stored[1].Content)-len(stoppedText))
	}
}

// TestChatPageMicDenied: when the browser refuses the microphone, the mic
// turns itself off and the page says why.
func TestChatPageMicDenied(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true,
		Args: []string{"--use-fake-ui-for-media-stream=deny", "--use-fake-device-for-media-stream"}})
	llm := koetest.StartLLM(t, fakellm.Echo(10*time.Millisecond))
	koe := koetest.StartKoe(t, micConfig(t, llm))
	p := openMicPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.click("#mic")
	p.waitFor(`koeDebug.mic.state === "off" && koeDebug.mic.error !== ""`)
	var notice struct {
		Hidden bool
		Text   string
	}
	p.eval(`({Hidden: notice.hidden, Text: notice.textContent})`, &notice)
	s := p.mic()
	if s.Error != "NotAllowedError" || notice.Hidden || !strings.Contains(notice.Text, "microphone is blocked") ||
		s.Pressed != "false" || len(s.Tracks) != 0 || s.Binary.Frames != 0 {
		t.Fatalf("mic denied: %+v, notice %+v", s, notice)
	}
	p.waitFor(`koeMedia.contexts.every((c) => c.state === "closed")`)
	p.screenshot("mic-denied.png")

	// The page still works by typing.
	m := p.mark()
	p.say("hi")
	p.waitTurn(m)
	p.expectBubbles(bubble{"human", "hi", false}, bubble{"ai", "You said: hi.", false})
}

// after is the part of s from the first control frame with the given
// text that was received after time t (performance.now()).
func after(s since, control string, t float64) since {
	var out since
	for i, f := range s.In {
		if f.Type == "control" && f.Text == control && f.T > t {
			out.In, t = s.In[i:], f.T
			break
		}
	}
	if out.In == nil {
		return out
	}
	for _, f := range s.Out {
		if f.T >= t {
			out.Out = append(out.Out, f)
		}
	}
	for _, e := range s.Played {
		if e.Start >= t {
			out.Played = append(out.Played, e)
		}
	}
	return out
}

// openMicPage is openPage with the microphone recorder (micJS).
func openMicPage(t *testing.T, browser *cdp.Browser) *pageT {
	p := openPage(t, browser)
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.AddInitScript(ctx, micJS); err != nil {
		t.Fatal(err)
	}
	return p
}

// micConfig is testConfig with speech input through the fake's
// transcription endpoint.
func micConfig(t *testing.T, llm *fakellm.Server) config.Config {
	cfg := testConfig(t, t.TempDir(), llm)
	cfg.ASR.Engine = "openai"
	cfg.ASR.OpenAI.BaseURL = llm.URL()
	return cfg
}

// micRecording makes the fake microphone's recording: espeak-ng saying
// spoken, with lead seconds of silence before and tail seconds after, as
// a 48 kHz 16-bit mono WAV. It returns the file and how long espeak-ng's
// speech lasts.
func micRecording(t *testing.T, lead, tail float64) (string, time.Duration) {
	t.Helper()
	testkit.External(t, "espeak-ng and sox")
	for _, tool := range []string{"espeak-ng", "sox"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ci := os.Getenv("CI"); ci != "" && !strings.EqualFold(ci, "false") {
				t.Fatalf("CI=%s and the microphone tests need %s: %v", ci, tool, err)
			}
			t.Skipf("skipping: %v (Debian packages espeak-ng and sox)", err)
		}
	}
	dir := t.TempDir()
	raw, out := filepath.Join(dir, "speech.wav"), filepath.Join(dir, "mic.wav")
	for _, cmd := range [][]string{
		{"espeak-ng", "-v", "en-us", "-w", raw, spoken},
		{"sox", raw, "-r", "48000", "-b", "16", "-c", "1", out, "pad", fmt.Sprint(lead), fmt.Sprint(tail)},
	} {
		if b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, b)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	w, err := parseWAV(data)
	if err != nil || w.Rate != 48000 || w.Channels != 1 || w.Bits != 16 {
		t.Fatalf("sox made %s: %v", w.format(), err)
	}
	speech := w.duration() - time.Duration((lead+tail)*float64(time.Second))
	if speech <= 0 {
		t.Fatalf("espeak-ng said nothing: %s is %v long", out, w.duration())
	}
	return out, speech
}

// wavFile is a decoded PCM WAV file.
type wavFile struct {
	Rate, Channels, Bits int
	Data                 []byte
}

func (w wavFile) format() string {
	return fmt.Sprintf("%d Hz, %d channels, %d bits", w.Rate, w.Channels, w.Bits)
}

func (w wavFile) duration() time.Duration {
	if w.Rate == 0 || w.Channels == 0 || w.Bits == 0 {
		return 0
	}
	frames := len(w.Data) / (w.Channels * w.Bits / 8)
	return time.Duration(frames) * time.Second / time.Duration(w.Rate)
}

// peak is the loudest sample of a 16-bit file, 0..1.
func (w wavFile) peak() float64 {
	peak := 0.0
	for i := 0; i+1 < len(w.Data); i += 2 {
		peak = max(peak, math.Abs(float64(int16(binary.LittleEndian.Uint16(w.Data[i:])))/32768))
	}
	return peak
}

// parseWAV reads a RIFF WAVE file of PCM samples.
func parseWAV(b []byte) (wavFile, error) {
	var w wavFile
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return w, errors.New("no RIFF WAVE header")
	}
	fmtSeen := false
	for rest := b[12:]; len(rest) >= 8; {
		id, size := string(rest[:4]), int(binary.LittleEndian.Uint32(rest[4:8]))
		rest = rest[8:]
		if size > len(rest) {
			if id != "data" {
				return w, fmt.Errorf("chunk %q of %d bytes is cut off", id, size)
			}
			size = len(rest) // a streamed file's unknown length
		}
		switch id {
		case "fmt ":
			if size < 16 || binary.LittleEndian.Uint16(rest) != 1 {
				return w, errors.New("not PCM")
			}
			w.Channels = int(binary.LittleEndian.Uint16(rest[2:]))
			w.Rate = int(binary.LittleEndian.Uint32(rest[4:]))
			w.Bits = int(binary.LittleEndian.Uint16(rest[14:]))
			fmtSeen = true
		case "data":
			if !fmtSeen {
				return w, errors.New("data before fmt")
			}
			w.Data = bytes.Clone(rest[:size])
			return w, nil
		}
		rest = rest[min(len(rest), size+size%2):]
	}
	return w, errors.New("no data chunk")
}
