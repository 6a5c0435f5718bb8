package llm

import (
	"math"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// NaN and infinities cannot come as JSON numbers, the format koe asks for,
// but a server's other encodings or a future client could bring them: they
// would poison every cosine they touch.
func TestVectorsInOrderRefusesNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		data := []openai.Embedding{{Index: 0, Embedding: []float32{1, 2}}, {Index: 1, Embedding: []float32{0.5, bad}}}
		if _, problem := vectorsInOrder(data, 2); !strings.HasPrefix(problem, "vector 1 holds ") {
			t.Errorf("%v: problem %q", bad, problem)
		}
	}
}

// Values whose squares overflow float32 still normalise.
func TestNormalisedLargeValues(t *testing.T) {
	v, problem := normalised([]float32{3e30, 4e30})
	if problem != "" || math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[1])-0.8) > 1e-6 {
		t.Errorf("normalised = %v, %q; want [0.6 0.8]", v, problem)
	}
}
