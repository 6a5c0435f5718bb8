package history

import (
	"encoding/json"
	"reflect"
	"testing"
)

var legacyRecordSeeds = []string{
	`{"role":"human","timestamp":"t","content":"x","images":[{"source":"camera","mime_type":"image/png","data":"QUJD"}]}`,
	`{"role":"human","timestamp":"t","content":"x","images":[{"source":"camera","mime_type":"image/png","data" : "QUI="},{"data":"data:image/png;base64,QQ=="}]}`,
	`{"role":"human","content":"she said \"data\":\"QUJD\" to me","images":[{"data":"QUJDRA=="}]}`,
	`{"role":"human","content":"ends in a backslash \\","images":[{"data":"QUJD"}]}`,
	`{"role":"human","content":"\\\"data\\\":","images":[{"data":"QU\/D"}]}`,
	`{"role":"human","images":[{"data":null},{"data":"data:image/gif;base64,R0lGODlh"}]}`,
	`{"role":"human","extra":{"data":{"data":"QUJD"}},"images":[{"data":"QUJD"}]}`,
	`{"role":"human","images":[{"source":"data","mime_type":"data","data":"QUJD"}]}`,
	`{"data":"QUJD"}`,
	`{"role":"ai","content":"new format","images":[{"source":"camera","mime_type":"image/png","size":3}]}`,
	`{"role":"human","images":[{"data":"QUJD}]}`,
	`{"role":"human","images":[{"data":"QU\xJD"}]}`,
	`{"role":"human","images":[{"data":12}]}`,
	"{\"role\":\"human\",\"images\":[{\"data\"\n:\t\"QUJD\"}]}",
}

// Measuring inline images is a shortcut: whatever a plain decode makes of
// a record, the shortcut must make the same.
func FuzzMeasureInlineImages(f *testing.F) {
	for _, s := range legacyRecordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		var plain, fast storedRecord
		plainErr := json.Unmarshal(v, &plain)
		fastErr := json.Unmarshal(measureInlineImages(v), &fast)
		if plainErr != nil {
			// A record that does not decode may decode once its image data
			// is measured (e.g. a control character inside the base64): the
			// text is intact, and Image reports the damaged picture.
			return
		}
		if fastErr != nil {
			t.Fatalf("%q: plain decode works, measured fails: %v", v, fastErr)
		}
		if !reflect.DeepEqual(plain, fast) {
			t.Fatalf("%q:\nplain    %+v\nmeasured %+v", v, plain, fast)
		}
	})
}

// The seeds above, checked against what they should decode to, so the
// fuzz property is not vacuously true.
func TestMeasureInlineImages(t *testing.T) {
	sizes := func(v string) []int {
		var r storedRecord
		if err := json.Unmarshal(measureInlineImages([]byte(v)), &r); err != nil {
			return nil
		}
		var out []int
		for _, img := range r.Images {
			switch {
			case img.Data != nil:
				out = append(out, img.Data.size)
			default:
				out = append(out, -img.Size)
			}
		}
		return out
	}
	want := [][]int{{3}, {2, 1}, {4}, {3}, {3}, {-0, 6}, {3}, {3}, nil, {-3}, nil, nil, {12}, {3}}
	for i, s := range legacyRecordSeeds {
		if got := sizes(s); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("seed %d %s: sizes %v, want %v", i, s, got, want[i])
		}
	}
	// A rewritten record is a copy; records without inline data are not.
	in := []byte(legacyRecordSeeds[0])
	if out := measureInlineImages(in); string(out) == string(in) || &out[0] == &in[0] {
		t.Errorf("record with inline data not rewritten into a copy: %s", out)
	}
	plain := []byte(legacyRecordSeeds[9])
	if out := measureInlineImages(plain); &out[0] != &plain[0] {
		t.Error("record without inline data was copied")
	}
}
