package postgres

import (
	"reflect"
	"testing"
	"time"

	"koe"
	"koe/history"
	"koe/testkit/pgtest"
)

// A record written before images were kept apart (its pictures inline as
// base64), as the bbolt store exports it (bolt's TestExportLegacyRecord),
// imported, reads the same as it did there, its pictures included; a
// second import leaves it alone.
func TestImportLegacyRecord(t *testing.T) {
	ctx := t.Context()
	uid := koe.NewHistoryUID(time.Now())
	legacy := `{"role":"human","timestamp":"2024-01-01T10:00:00","content":"look","images":[{"source":"camera","mime_type":"image/png","data":"QUJD"},{"source":"upload","mime_type":"","data":"data:image/gif;base64,R0lGODlh"}]}`
	h := &history.HistoryExport{Conf: "c", UID: uid, LastSeq: 3, Records: []history.ExportRecord{
		{Seq: 1, Body: []byte(`{"role":"metadata","timestamp":"2024-01-01T09:59:00","content":""}`)},
		{Seq: 2, Body: []byte(`{"role":"human","timestamp":"2024-01-01T09:59:30","content":"hi"}`)},
		{Seq: 3, Body: []byte(legacy)},
	}}
	// What the bbolt store read from these records.
	var want []koe.Record
	for _, r := range h.Records {
		rec, err := history.DecodeRecord(r.Seq, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}

	pg := openTest(t, pgtest.Schema(t), nil)
	if ok, err := pg.ImportHistory(ctx, h); !ok || err != nil {
		t.Fatalf("import: %v, %v", ok, err)
	}
	if ok, err := pg.ImportHistory(ctx, h); ok || err != nil {
		t.Fatalf("second import: %v, %v; want false, nil", ok, err)
	}
	got, err := pg.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", got, want)
	}
	for i, w := range []struct{ mime, data string }{{"image/png", "ABC"}, {"image/gif", "GIF89a"}} {
		mime, data, err := pg.Image(ctx, "c", uid, got[2].Images[i].Ref)
		if err != nil || mime != w.mime || string(data) != w.data {
			t.Errorf("image %d: %q %q %v, want %q %q", i, mime, data, err, w.mime, w.data)
		}
	}
}
