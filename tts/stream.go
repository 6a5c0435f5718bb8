package tts

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"koe/internal/timeout"
	"koe/internal/wavio"
)

// StreamSynthesizer is an Engine that can also hand out a sentence's
// speech while the engine is still producing it, so that playback starts
// after the first few hundred milliseconds of audio rather than after the
// whole sentence. Both built-in engines implement it.
type StreamSynthesizer interface {
	Engine
	// SynthesizeStream starts speaking text. The stream ends when ctx
	// does; the caller closes it in every case.
	SynthesizeStream(ctx context.Context, text string) (*Stream, error)
}

// Stream is one sentence's speech as the engine produces it: 16-bit mono
// samples at Rate, whatever encoding the engine chose. It reads at most
// maxAudioBytes of the engine's output, as Synthesize does. A Stream is
// used by one goroutine.
type Stream struct {
	Rate int

	who string // the engine, for errors: "tts: espeak-ng"

	src    io.Reader
	closer func() error
	// fail turns an error of src into the engine's own words (and the
	// end of ctx into an abort); done, when set, runs at the end of the
	// data and may report the engine's failure instead of io.EOF.
	fail func(error) error
	done func() error

	format wavio.Format
	frame  int   // bytes per frame of the source
	left   int64 // data bytes the header announced and not yet read; <0 unknown
	total  int64 // bytes read from the engine, header included
	raw    []byte
	carry  int // bytes of a partial frame at the start of raw
	err    error
	closed bool
}

// pcm16Mono is the format of raw PCM answers and of what koe sends.
func pcm16Mono(rate int) wavio.Format {
	return wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: rate, Bits: 16}
}

// newPCMStream reads raw signed 16-bit little-endian mono samples.
func newPCMStream(src io.Reader, rate int) (*Stream, error) {
	if rate < 1 || rate > maxSampleRate {
		return nil, fmt.Errorf("sample rate %d Hz is not supported (1..%d)", rate, maxSampleRate)
	}
	return &Stream{Rate: rate, src: src, format: pcm16Mono(rate), frame: 2, left: -1}, nil
}

// newWAVStream reads the WAV header at the start of src, then its samples
// as they come. Streaming writers cannot know the data's length when they
// write the header: a data size of 0 or of 0x7fff0000 and more is read as
// "up to the end"; any other size is honoured.
func newWAVStream(src io.Reader) (*Stream, error) {
	s := &Stream{src: src}
	f, size, n, err := readWAVHeader(src)
	s.total = n
	if err != nil {
		return nil, err
	}
	if f, err = supported(f); err != nil {
		return nil, err
	}
	s.format, s.Rate, s.left = f, f.Rate, size
	s.frame = f.Channels * f.Bits / 8
	return s, nil
}

// maxHeaderBytes bounds what koe reads before a streamed WAV's data: chunks
// such as LIST or fact are small, and a server that sends megabytes of
// them before any audio is broken or hostile.
const maxHeaderBytes = 64 << 10

// readWAVHeader reads a WAV file's chunks up to the start of its data and
// returns the format, the data size (-1: unknown) and the bytes read.
func readWAVHeader(r io.Reader) (wavio.Format, int64, int64, error) {
	var (
		read    int64
		fmtBody []byte
		head    [12]byte
	)
	short := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: the audio ended within its header (%d bytes)", ErrNotWAV, read)
		}
		return err
	}
	n, err := io.ReadFull(r, head[:])
	read += int64(n)
	if err != nil {
		return wavio.Format{}, -1, read, short(err)
	}
	if id := string(head[:4]); (id != "RIFF" && id != "RF64") || string(head[8:12]) != "WAVE" {
		return wavio.Format{}, -1, read, fmt.Errorf("%w: no RIFF/WAVE header", ErrNotWAV)
	}
	pad := false
	for {
		var ch [8]byte
		n, err := io.ReadFull(r, ch[:])
		read += int64(n)
		if err != nil {
			return wavio.Format{}, -1, read, short(err)
		}
		if pad && !isChunkID(ch[:4]) && isChunkID(ch[1:5]) {
			// The writer left out the pad byte after an odd-sized chunk
			// after all, or put it in where the reader did not expect
			// it: realign by one, as wavio.Parse does.
			copy(ch[:], ch[1:])
			var b [1]byte
			n, err := io.ReadFull(r, b[:])
			read += int64(n)
			if err != nil {
				return wavio.Format{}, -1, read, short(err)
			}
			ch[7] = b[0]
		}
		id, size := string(ch[:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		switch id {
		case "data":
			if fmtBody == nil {
				return wavio.Format{}, -1, read, fmt.Errorf("%w: the data chunk comes before any fmt chunk", ErrNotWAV)
			}
			f, err := parseFmt(fmtBody)
			if err != nil {
				return wavio.Format{}, -1, read, err
			}
			if size == 0 || size >= 0x7fff0000 {
				size = -1
			}
			return f, size, read, nil
		case "fmt ":
			if size < 16 || size > 256 {
				return wavio.Format{}, -1, read, fmt.Errorf("%w: a fmt chunk of %d bytes", ErrNotWAV, size)
			}
			fmtBody = make([]byte, size)
			n, err := io.ReadFull(r, fmtBody)
			read += int64(n)
			if err != nil {
				return wavio.Format{}, -1, read, short(err)
			}
		default:
			if read+size > maxHeaderBytes {
				return wavio.Format{}, -1, read, fmt.Errorf("%w: more than %d KiB of chunks before the audio", ErrNotWAV, maxHeaderBytes>>10)
			}
			n, err := io.CopyN(io.Discard, r, size)
			read += n
			if err != nil {
				return wavio.Format{}, -1, read, short(err)
			}
		}
		// Chunks are padded to even sizes; the check above copes with
		// writers that forget it.
		if pad = size%2 == 1; pad {
			var b [1]byte
			n, err := io.ReadFull(r, b[:])
			read += int64(n)
			if err != nil {
				return wavio.Format{}, -1, read, short(err)
			}
			if b[0] != 0 {
				return wavio.Format{}, -1, read, fmt.Errorf("%w: an odd-sized chunk is not followed by its pad byte", ErrNotWAV)
			}
		}
	}
}

// isChunkID reports whether b reads as a chunk id: four printable ASCII
// characters.
func isChunkID(b []byte) bool {
	for _, c := range b[:4] {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// parseFmt reads a fmt chunk's body with wavio's rules (extensible
// formats included) by handing it a file with that chunk and no samples.
func parseFmt(body []byte) (wavio.Format, error) {
	file := make([]byte, 0, 28+len(body))
	file = append(file, "RIFF\x00\x00\x00\x00WAVEfmt "...)
	file = binary.LittleEndian.AppendUint32(file, uint32(len(body)))
	file = append(file, body...)
	file = append(file, "data\x00\x00\x00\x00"...)
	f, _, err := wavio.Parse(file)
	if err != nil {
		return wavio.Format{}, fmt.Errorf("%w: %w", ErrNotWAV, err)
	}
	return f, nil
}

// Read fills dst with the next samples, blocking until the engine has
// produced at least one: it returns n > 0 and no error, or 0 and an error,
// io.EOF at the end of the speech. A partial last frame is dropped.
func (s *Stream) Read(dst []int16) (int, error) {
	for len(dst) > 0 && s.err == nil {
		want := int64(len(dst)*s.frame - s.carry)
		if want < 1 {
			want = 1
		}
		if s.left >= 0 {
			want = min(want, s.left)
		}
		if want == 0 {
			s.end(io.EOF)
			break
		}
		if need := s.carry + int(want); cap(s.raw) < need {
			s.raw = append(s.raw[:s.carry], make([]byte, need-s.carry)...)
		}
		n, err := s.src.Read(s.raw[s.carry : s.carry+int(want)])
		s.total += int64(n)
		if s.left >= 0 {
			s.left -= int64(n)
		}
		if s.total > maxAudioBytes {
			s.err = fmt.Errorf("%s: more than %d MB of audio for one sentence; koe refuses the rest", s.who, maxAudioBytes>>20)
			return 0, s.err
		}
		have := s.carry + n
		whole := have / s.frame * s.frame
		got := 0
		if whole > 0 {
			got = s.decode(s.raw[:whole], dst)
		}
		s.carry = copy(s.raw, s.raw[whole:have])
		if err != nil {
			s.end(err)
		}
		if got > 0 {
			return got, nil
		}
	}
	if len(dst) == 0 && s.err == nil {
		return 0, nil
	}
	return 0, s.err
}

// end records how the data ended: io.EOF unless the engine failed.
func (s *Stream) end(err error) {
	if errors.Is(err, io.EOF) {
		s.err = io.EOF
		if s.done != nil {
			if derr := s.done(); derr != nil {
				s.err = derr
			}
		}
		return
	}
	if s.fail != nil {
		err = s.fail(err)
	}
	s.err = err
}

// decode turns whole frames of the source into dst, which has room.
func (s *Stream) decode(frames []byte, dst []int16) int {
	f := s.format
	if f.Tag == wavio.FormatPCM && f.Bits == 16 && f.Channels == 1 {
		n := len(frames) / 2
		for i := range n {
			dst[i] = int16(binary.LittleEndian.Uint16(frames[2*i:]))
		}
		return n
	}
	var samples []int16
	if f.Tag == wavio.FormatFloat {
		samples = decodeFloat(f, frames)
	} else {
		var err error
		if samples, err = decodeIntPCM(f, frames); err != nil {
			// Whole frames of a supported format always decode;
			// should one not, it is dropped rather than sent as noise.
			return 0
		}
	}
	return copy(dst, samples)
}

// Close stops the engine (the request is aborted, the process killed)
// unless it has finished, and releases what it holds. It is safe to call
// more than once.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.closer != nil {
		return s.closer()
	}
	return nil
}

// ReadAll reads the whole stream into one Audio: Synthesize's result from a
// stream.
func (s *Stream) ReadAll() (Audio, error) {
	var all []int16
	buf := make([]int16, 8192)
	for {
		n, err := s.Read(buf)
		all = append(all, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return newAudio(all, s.Rate)
		}
		if err != nil {
			return Audio{}, err
		}
	}
}

// SynthesizeStream bounds the whole stream, reading included, by the
// engine's timeout: a server that trickles audio forever is cut off like
// one that never answers.
func (t timeoutEngine) SynthesizeStream(ctx context.Context, text string) (*Stream, error) {
	next, ok := t.next.(StreamSynthesizer)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	reached := errors.New("tts.timeout reached")
	ctx, cancel := context.WithTimeoutCause(ctx, t.limit, reached)
	describe := func(err error) error {
		if err != nil && context.Cause(ctx) == reached {
			return timeout.Reached(err, "tts.timeout", "speech synthesis", t.limit)
		}
		return err
	}
	s, err := next.SynthesizeStream(ctx, text)
	if err != nil {
		cancel()
		return nil, describe(err)
	}
	fail, done, closer := s.fail, s.done, s.closer
	s.fail = func(err error) error {
		if fail != nil {
			err = fail(err)
		}
		return describe(err)
	}
	if done != nil {
		s.done = func() error { return describe(done()) }
	}
	s.closer = func() error {
		defer cancel()
		if closer != nil {
			return closer()
		}
		return nil
	}
	return s, nil
}
