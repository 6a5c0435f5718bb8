// Package asr turns speech into text and holds the audio plumbing in front
// of it: validation and conversion of client samples to 16-bit PCM (pcm.go),
// sample-rate conversion with an anti-aliasing filter (resample.go), and
// voice activity detection that cuts a continuous microphone stream into
// utterances (vad.go). Engines sit behind a small interface (asr.go).
package asr
