package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"koe/testkit/fakellm"
)

// With -speech, the koe that -koe starts speaks through the fake LLM's
// speech endpoint, which streams its answers as a real engine does (its
// first audio after -speech-ttfb, then -speech-pace times real time):
// first audio then includes the speech engine's time, with sentences
// streamed in parts (stream) or sent whole (whole, as before streaming).
const (
	speechOff    = "off"
	speechWhole  = "whole"
	speechStream = "stream"
)

type speechOptions struct {
	mode string
	ttfb time.Duration
	pace float64
}

func speechFlags() *speechOptions {
	s := &speechOptions{}
	flag.StringVar(&s.mode, "speech", speechOff, "with -koe and no -koe-config: "+speechOff+" (text only), "+
		speechWhole+" (speech from the fake LLM, each sentence sent once synthesised) or "+
		speechStream+" (speech from the fake LLM, sentences sent in parts as they are synthesised: tts.stream_first_ms 250)")
	flag.DurationVar(&s.ttfb, "speech-ttfb", fakellm.DefaultSpeechTTFB, "with -speech: the fake speech engine's time to its first audio")
	flag.Float64Var(&s.pace, "speech-pace", fakellm.DefaultSpeechPace, "with -speech: the fake speech engine's speed, in times real time")
	return s
}

func (s *speechOptions) on() bool { return s != nil && s.mode != speechOff }

func (s *speechOptions) validate(o options) error {
	switch s.mode {
	case speechOff:
		return nil
	case speechWhole, speechStream:
	default:
		return fmt.Errorf("-speech %q is unknown: use %s, %s or %s", s.mode, speechOff, speechWhole, speechStream)
	}
	switch {
	case o.koeBin == "" || o.koeConf != "":
		return errors.New("-speech needs -koe and no -koe-config: it writes koe's configuration")
	case o.baseline:
		return errors.New("-speech cannot be used with -baseline: the floor does not speak")
	case !(s.pace > 0) || s.ttfb < 0:
		return fmt.Errorf("-speech-pace %g must be above 0 and -speech-ttfb %s not negative", s.pace, s.ttfb)
	}
	return nil
}

// config is koe's configuration for n sessions speaking through the fake
// LLM at llmURL. The remote engine is not what speech_slots protects (local
// CPU), so every session's sentence may be synthesised at once.
func (s *speechOptions) config(n int) func(string) string {
	first := 0
	if s.mode == speechStream {
		first = 250
	}
	return func(llmURL string) string {
		return fmt.Sprintf("log_level: warn\nserver:\n  max_connections: %d\nconversation:\n  speech_slots: %d\n"+
			"character:\n  tts:\n    engine: openai\n    stream_first_ms: %d\n    stream_piece_ms: 1000\n    openai:\n      base_url: %s\nasr:\n  engine: none\n",
			max(n+64, 10000), 3*n, first, llmURL)
	}
}

func (s *speechOptions) respond() func(fakellm.SpeechRequest) fakellm.SpeechReply {
	st := fakellm.SpeechStream{TTFB: s.ttfb, Pace: s.pace}
	return func(fakellm.SpeechRequest) fakellm.SpeechReply { return fakellm.SpeechReply{Stream: &st} }
}

// describe is the mode for the summary.
func (s *speechOptions) describe() string {
	return fmt.Sprintf("speech %s (fake engine: first audio after %s, %g× real time)", s.mode, s.ttfb, s.pace)
}
