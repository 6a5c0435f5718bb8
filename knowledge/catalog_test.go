package knowledge

import (
	"math"
	"testing"
)

func TestDot(t *testing.T) {
	for n := range 11 {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = float32(i+1), float32(2*i-3)
			want += float64(a[i]) * float64(b[i])
		}
		if got := dot(a, b); math.Abs(float64(got)-want) > 1e-3 {
			t.Errorf("dot of length %d = %v, want %v", n, got, want)
		}
	}
}

func TestUnit(t *testing.T) {
	v, err := unit([]float32{3, 4})
	if err != nil || math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[1])-0.8) > 1e-6 {
		t.Fatalf("unit(3, 4) = %v, %v", v, err)
	}
	if v, err := unit([]float32{0, 0}); err != nil || v[0] != 0 || v[1] != 0 {
		t.Fatalf("unit of a zero vector = %v, %v; want zeros", v, err)
	}
	for _, bad := range [][]float32{{}, {1, float32(math.Inf(1))}, {float32(math.NaN())}} {
		if _, err := unit(bad); err == nil {
			t.Errorf("unit(%v) gave no error", bad)
		}
	}
}
