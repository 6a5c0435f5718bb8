package tts

import (
	"context"
	"fmt"
)

// SynthesizeStream asks the server for text and reads its answer as it
// arrives: servers that synthesise incrementally send the first audio
// long before the last, in chunks, as raw PCM or as a WAV whose header
// cannot yet know the length. A server that sends everything at once
// streams too, in one go.
func (o *openAISpeech) SynthesizeStream(ctx context.Context, text string) (*Stream, error) {
	resp, err := o.ask(ctx, text)
	if err != nil {
		return nil, err
	}
	// The request's context also governs the body: a cancel aborts a
	// read under way.
	var s *Stream
	if o.cfg.Format == "pcm" {
		s, err = newPCMStream(resp.Body, openAIPCMRate)
	} else {
		s, err = newWAVStream(resp.Body)
	}
	if err != nil {
		resp.Body.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, o.server.Aborted(ctxErr)
		}
		return nil, fmt.Errorf("tts: the speech server at %s answered with audio koe cannot read (Content-Type %q, tts.openai.format %q): %w",
			o.cfg.BaseURL, resp.ContentType, o.cfg.Format, err)
	}
	s.who = "tts: the speech server at " + o.cfg.BaseURL
	s.closer = resp.Body.Close
	s.fail = func(err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return o.server.Aborted(ctxErr)
		}
		return fmt.Errorf("tts: the speech server at %s broke off its answer: %w", o.cfg.BaseURL, err)
	}
	return s, nil
}
