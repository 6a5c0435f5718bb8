package realtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"koe/asr"
)

// TurnDetection is a session's turn_detection as the API writes it: nil
// (JSON null) when the client commits the input buffer itself.
//
// koe detects speech with its own detector (asr's energy detector and
// segmenter, the one /client-ws uses for raw audio), not a model, so the
// fields map onto it:
//   - threshold (0..1, default 0.5) sets how far above the tracked noise
//     floor a 20 ms frame must be to count as speech: 2 + 16 × threshold
//     dB, so 0.5 is the detector's default of 10 dB; higher needs louder
//     speech, as in the API.
//   - prefix_padding_ms is the audio kept from before speech was
//     detected (the segmenter's pre-roll).
//   - silence_duration_ms is the silence that ends the speech.
//
// Omitted fields take the API's defaults (0.5, 300 ms, 500 ms); how long
// speech must last before it counts is conversation.vad.start_ms, which
// the API does not expose, and an utterance is cut at
// conversation.max_utterance.
//
// semantic_vad is accepted and run as server_vad (koe has no model of
// whether a sentence is finished): its eagerness picks the silence that
// ends a turn, low 1200 ms, high 300 ms, medium and auto the API's 500 ms.
type TurnDetection struct {
	Type              string   `json:"type"`
	Threshold         *float64 `json:"threshold,omitempty"`
	PrefixPaddingMs   *int     `json:"prefix_padding_ms,omitempty"`
	SilenceDurationMs *int     `json:"silence_duration_ms,omitempty"`
	Eagerness         string   `json:"eagerness,omitempty"`
	CreateResponse    *bool    `json:"create_response,omitempty"`
	InterruptResponse *bool    `json:"interrupt_response,omitempty"`
}

// Turn detection types.
const (
	ServerVAD   = "server_vad"
	SemanticVAD = "semantic_vad"
)

// The API's defaults for server_vad.
const (
	apiPrefixPaddingMs   = 300
	apiSilenceDurationMs = 500
)

// vadDefaults are the defaults of a connection on a hub with startMillis
// (conversation.vad.start_ms) and maxUtterance.
func vadDefaults(startMillis int, maxUtterance time.Duration) VADDefaults {
	return VADDefaults{StartMillis: startMillis, HangMillis: apiSilenceDurationMs, PreRollMillis: apiPrefixPaddingMs,
		MaxMillis: int(maxUtterance.Milliseconds())}
}

// Bounds on the client's values: the segmenter keeps the padding in
// memory, and a silence past ten seconds never ends a turn in practice.
const (
	maxPrefixPaddingMs   = 5000
	minSilenceDurationMs = 100 // conversation.vad.hang_ms's own minimum
	maxSilenceDurationMs = 10000
)

// The silence semantic_vad's eagerness stands for.
const (
	eagerLowSilenceMs  = 1200
	eagerHighSilenceMs = 300
)

// VADDefaults are the settings the omitted fields take.
type VADDefaults struct {
	StartMillis   int // speech must last this long to count
	HangMillis    int // silence_duration_ms
	PreRollMillis int // prefix_padding_ms
	// MaxMillis cuts an utterance this long (conversation.max_utterance).
	MaxMillis int
}

// ParseTurnDetection reads a turn_detection value: JSON null gives nil
// (manual commits). The result has every field of its type filled in
// from defaults, as the session reports it back; the error names the
// field, for an error event.
func ParseTurnDetection(raw json.RawMessage, defaults VADDefaults) (*TurnDetection, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var td TurnDetection
	if err := json.Unmarshal(raw, &td); err != nil {
		return nil, fmt.Errorf("turn_detection: %w", err)
	}
	if err := td.resolve(defaults); err != nil {
		return nil, err
	}
	return &td, nil
}

func (td *TurnDetection) resolve(d VADDefaults) error {
	yes := func(p **bool) {
		if *p == nil {
			t := true
			*p = &t
		}
	}
	yes(&td.CreateResponse)
	yes(&td.InterruptResponse)
	switch td.Type {
	case ServerVAD:
		if td.Eagerness != "" {
			return fmt.Errorf("turn_detection.eagerness is for semantic_vad, not server_vad")
		}
		if td.Threshold == nil {
			v := 0.5
			td.Threshold = &v
		}
		if v := *td.Threshold; !(v >= 0 && v <= 1) {
			return fmt.Errorf("turn_detection.threshold must be between 0 and 1, got %v", v)
		}
		if td.PrefixPaddingMs == nil {
			td.PrefixPaddingMs = &d.PreRollMillis
		}
		if v := *td.PrefixPaddingMs; v < 0 || v > maxPrefixPaddingMs {
			return fmt.Errorf("turn_detection.prefix_padding_ms must be between 0 and %d, got %d", maxPrefixPaddingMs, v)
		}
		if td.SilenceDurationMs == nil {
			td.SilenceDurationMs = &d.HangMillis
		}
		if v := *td.SilenceDurationMs; v < minSilenceDurationMs || v > maxSilenceDurationMs {
			return fmt.Errorf("turn_detection.silence_duration_ms must be between %d and %d, got %d", minSilenceDurationMs, maxSilenceDurationMs, v)
		}
	case SemanticVAD:
		if td.Threshold != nil || td.PrefixPaddingMs != nil || td.SilenceDurationMs != nil {
			return fmt.Errorf("turn_detection: threshold, prefix_padding_ms and silence_duration_ms are for server_vad; semantic_vad takes eagerness")
		}
		switch td.Eagerness {
		case "":
			td.Eagerness = "auto"
		case "low", "medium", "high", "auto":
		default:
			return fmt.Errorf("turn_detection.eagerness must be low, medium, high or auto, got %q", short(td.Eagerness))
		}
	default:
		return fmt.Errorf("turn_detection.type must be server_vad or semantic_vad (or turn_detection null for manual commits), got %q", short(td.Type))
	}
	return nil
}

// Creates says whether a turn ended by the detector gets a response.
func (td *TurnDetection) Creates() bool { return td != nil && *td.CreateResponse }

// Interrupts says whether speech starting during a response cancels it.
func (td *TurnDetection) Interrupts() bool { return td != nil && *td.InterruptResponse }

// segmenter builds the detector and segmenter td describes.
func (td *TurnDetection) segmenter(d VADDefaults) *asr.Segmenter {
	threshold, preRoll, hang := 0.5, d.PreRollMillis, d.HangMillis
	if td.Type == ServerVAD {
		threshold, preRoll, hang = *td.Threshold, *td.PrefixPaddingMs, *td.SilenceDurationMs
	} else {
		switch td.Eagerness {
		case "low":
			hang = eagerLowSilenceMs
		case "high":
			hang = eagerHighSilenceMs
		}
	}
	det := asr.NewEnergyDetector(asr.EnergyConfig{FrameMillis: vadFrameMillis, MarginDB: marginDB(threshold)})
	return asr.NewSegmenter(det, asr.SegmenterConfig{
		FrameMillis: vadFrameMillis,
		StartMillis: d.StartMillis,
		HangMillis:  hang,
		// The segmenter reads 0 as "its default"; 1 ms is as good as none.
		PreRollMillis: max(preRoll, 1),
		MaxMillis:     d.MaxMillis,
	})
}

// vadFrameMillis is the analysis frame, as /client-ws uses.
const vadFrameMillis = 20

// marginDB is the detector's margin over the noise floor for a threshold.
func marginDB(threshold float64) float64 { return 2 + 16*threshold }
