package bolt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
	"koe/history/historytest"
)

// The shape of the history that was measured at 246 MB per history-data
// frame: 30 turns, each with 4 photos of 1.5 MB.
const (
	benchTurns      = 30
	benchImages     = 4
	benchImageBytes = 1500 << 10
)

func benchPictures(perTurn, size int) []koe.Image {
	rng := rand.New(rand.NewPCG(1, 2))
	imgs := make([]koe.Image, perTurn)
	for i := range imgs {
		raw := make([]byte, size)
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		imgs[i] = koe.Image{Source: "camera", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(raw)}
	}
	return imgs
}

var (
	benchQuestion = koe.Record{Role: koe.RoleHuman, Content: "what is in these pictures?", Name: "Human"}
	benchReply    = koe.Record{Role: koe.RoleAI, Content: "A cat on a sofa, then the same cat asleep.", Name: "Mao"}
)

// imageHistory stores a history of turns user messages with perTurn
// images of size bytes each, plus an AI reply per turn.
func imageHistory(b *testing.B, turns, perTurn, size int) (*Store, string) {
	b.Helper()
	s, _ := openTest(b, Options{})
	uid := historytest.MustCreate(b, s, "c")
	q := benchQuestion
	q.Images = benchPictures(perTurn, size)
	for t := 0; t < turns; t++ {
		historytest.MustAppend(b, s, "c", uid, q)
		historytest.MustAppend(b, s, "c", uid, benchReply)
	}
	return s, uid
}

// legacyImageHistory is imageHistory as versions before images were kept
// apart stored it: base64 inside each record.
func legacyImageHistory(b *testing.B, turns, perTurn, size int) (*Store, string) {
	b.Helper()
	s, _ := openTest(b, Options{})
	uid := historytest.MustCreate(b, s, "c")
	type legacyImage struct {
		Source   string `json:"source"`
		MimeType string `json:"mime_type"`
		Data     string `json:"data"`
	}
	type legacyRecord struct {
		Role      string        `json:"role"`
		Timestamp string        `json:"timestamp"`
		Content   string        `json:"content"`
		Name      string        `json:"name,omitempty"`
		Images    []legacyImage `json:"images,omitempty"`
	}
	q := legacyRecord{Role: benchQuestion.Role, Timestamp: "2024-01-01T00:00:00", Content: benchQuestion.Content, Name: benchQuestion.Name}
	for _, img := range benchPictures(perTurn, size) {
		q.Images = append(q.Images, legacyImage{img.Source, img.MimeType, img.Data})
	}
	question, err := json.Marshal(q)
	if err != nil {
		b.Fatal(err)
	}
	reply, err := json.Marshal(legacyRecord{Role: benchReply.Role, Timestamp: "2024-01-01T00:00:01", Content: benchReply.Content, Name: benchReply.Name})
	if err != nil {
		b.Fatal(err)
	}
	for t := 0; t < turns; t++ {
		err := s.db.Update(func(tx *bbolt.Tx) error {
			msgs := messagesBucket(tx, "c", uid)
			if err := putRawRecord(msgs, question); err != nil {
				return err
			}
			return putRawRecord(msgs, reply)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return s, uid
}

func BenchmarkMessagesWithImages(b *testing.B) {
	ctx := b.Context()
	s, uid := imageHistory(b, benchTurns, benchImages, benchImageBytes)
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := s.Messages(ctx, "c", uid)
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) != 2*benchTurns+1 {
			b.Fatalf("%d records", len(msgs))
		}
	}
}

func BenchmarkMessagesWithLegacyImages(b *testing.B) {
	ctx := b.Context()
	s, uid := legacyImageHistory(b, benchTurns, benchImages, benchImageBytes)
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := s.Messages(ctx, "c", uid)
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) != 2*benchTurns+1 || msgs[1].Images[0].Size != benchImageBytes {
			b.Fatalf("%d records", len(msgs))
		}
	}
}

func BenchmarkPageWithImages(b *testing.B) {
	ctx := b.Context()
	s, uid := imageHistory(b, benchTurns, benchImages, benchImageBytes)
	b.ReportAllocs()
	for b.Loop() {
		page, _, err := s.Page(ctx, "c", uid, 0, 100)
		if err != nil {
			b.Fatal(err)
		}
		if len(page) != 2*benchTurns {
			b.Fatalf("%d records", len(page))
		}
	}
}

// BenchmarkPageLongHistory shows that a page costs the same wherever it
// is: its numbers should not grow with the history's length.
func BenchmarkPageLongHistory(b *testing.B) {
	ctx := b.Context()
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, _ := openTest(b, Options{})
			uid := historytest.MustCreate(b, s, "c")
			err := s.db.Update(func(tx *bbolt.Tx) error {
				h := historyBucket(tx, "c", uid)
				for i := 0; i < n; i++ {
					p, err := history.EncodeRecord(koe.Record{Role: koe.RoleAI, Timestamp: "2024-01-01T00:00:00", Content: benchReply.Content})
					if err != nil {
						return err
					}
					if err := putRecord(h, p); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Page(ctx, "c", uid, 0, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkImage(b *testing.B) {
	ctx := b.Context()
	s, uid := imageHistory(b, benchTurns, benchImages, benchImageBytes)
	b.ReportAllocs()
	for b.Loop() {
		_, data, err := s.Image(ctx, "c", uid, "30-3")
		if err != nil {
			b.Fatal(err)
		}
		if len(data) != benchImageBytes {
			b.Fatalf("%d bytes", len(data))
		}
	}
}
