package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"regexp"
	"strings"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// uploadHead is a multipart body's start, the part header of a file named
// name ready for its bytes, and next, which makes the header of a
// further part (ending the one before).
func uploadHead(boundary, name string) (head []byte, next func(name string) []byte) {
	part := func(name string) []byte {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
		h.Set("Content-Type", "application/octet-stream")
		var b bytes.Buffer
		fmt.Fprintf(&b, "--%s\r\n", boundary)
		for k, v := range h {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v[0])
		}
		b.WriteString("\r\n")
		return b.Bytes()
	}
	return part(name), func(name string) []byte { return append([]byte("\r\n"), part(name)...) }
}

// decodeUpload reads a refused upload's answer as a client would.
func decodeUpload(t *testing.T, r rawResp) kbAnswer {
	t.Helper()
	var a kbAnswer
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatalf("%d answer is not JSON: %v: %q", r.status, err, r.body)
	}
	return a
}

// sendChunked sends an upload with Transfer-Encoding: chunked over a raw
// connection, as a client that does not know its size does: the parts
// first (each a name and a size), written while koe reads, until koe
// answers; then reads koe's answer. The writer stops when koe closes the
// connection or the answer is read.
func sendChunked(t *testing.T, addr, path string, parts []struct {
	name string
	size int
}) rawResp {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // hang guard
	const boundary = "koe-test-boundary"
	head := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=" + boundary +
		"\r\nTransfer-Encoding: chunked\r\n\r\n"
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		chunk := func(p []byte) error {
			if _, err := fmt.Fprintf(w, "%x\r\n", len(p)); err != nil {
				return err
			}
			if _, err := w.Write(p); err != nil {
				return err
			}
			_, err := w.WriteString("\r\n")
			return err
		}
		err := func() error {
			if _, err := w.WriteString(head); err != nil {
				return err
			}
			first, next := uploadHead(boundary, parts[0].name)
			block := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KB
			for i, p := range parts {
				h := first
				if i > 0 {
					h = next(p.name)
				}
				if err := chunk(h); err != nil {
					return err
				}
				for left := p.size; left > 0; left -= len(block) {
					if err := chunk(block[:min(left, len(block))]); err != nil {
						return err
					}
				}
			}
			if err := chunk([]byte("\r\n--" + boundary + "--\r\n")); err != nil {
				return err
			}
			if _, err := w.WriteString("0\r\n\r\n"); err != nil {
				return err
			}
			return w.Flush()
		}()
		written <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to the chunked upload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_ = c.Close() // stops the writer, if koe has not
	<-written
	return rawResp{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// An upload over knowledge.max_file_bytes is refused over HTTP in the
// shape the documents promise, {conf_uid, added, refused: [{filename,
// reason, kind}], error}: from its Content-Length before a byte of the
// body is read (naming its size; the name is in the body, which is never
// read), and while it is read when no size was declared (naming the file
// it was cut in, and the files before it, none of which is kept).
func TestUploadTooLargeRefusal(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	m := startKoe(t, cfg) // knowledge.max_file_bytes at its default, 10 MB
	conf := cfg.Character.ConfUID
	docsPath := "/api/characters/" + conf + "/documents"

	// An 11 MB file, as curl sends it: Content-Length and Expect:
	// 100-continue. koe answers from the header block alone.
	const boundary = "koe-test-boundary"
	first, _ := uploadHead(boundary, "sky-atlas.pdf")
	size := len(first) + 11<<20 + len("\r\n--"+boundary+"--\r\n")
	for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
		resps, _ := rawExchange(t, m.Addr(), "POST "+docsPath+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
			"Content-Type: multipart/form-data; boundary="+boundary+"\r\n"+expect+
			fmt.Sprintf("Content-Length: %d\r\n\r\n", size)+string(first))
		if len(resps) != 1 || resps[0].status != 413 {
			t.Fatalf("an 11 MB upload (%q): %+v, want one 413", expect, resps)
		}
		a := decodeUpload(t, resps[0])
		want := "the upload is 11.0 MB; knowledge.max_file_bytes allows 10 MB"
		if a.ConfUID != conf || a.Added == nil || len(a.Added) != 0 || len(a.Refused) != 1 ||
			a.Refused[0].Kind != "too_large" || !strings.Contains(a.Refused[0].Reason, want) || !strings.Contains(a.Error, want) {
			t.Fatalf("an 11 MB upload (%q): %s, want conf_uid, added [], and one too_large refusal saying %q", expect, resps[0].body, want)
		}
	}

	// The same to a conversation's files: {history_uid, refused, error}.
	uid := say(t, m.Addr(), "", "hello there")
	resps, _ := rawExchange(t, m.Addr(), "POST /api/histories/"+conf+"/"+uid+"/files HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: multipart/form-data; boundary="+boundary+"\r\n"+fmt.Sprintf("Content-Length: %d\r\n\r\n", size))
	if len(resps) != 1 || resps[0].status != 413 {
		t.Fatalf("an 11 MB attachment: %+v, want one 413", resps)
	}
	if a := decodeUpload(t, resps[0]); a.HistoryUID != uid || len(a.Refused) != 1 || a.Refused[0].Kind != "too_large" ||
		!strings.Contains(a.Refused[0].Reason, "11.0 MB") {
		t.Fatalf("an 11 MB attachment: %s", resps[0].body)
	}

	// Without a declared size, the body is read until it passes the
	// limit: the refusal names the file it was cut in.
	type part = struct {
		name string
		size int
	}
	r := sendChunked(t, m.Addr(), docsPath, []part{{"sky-atlas.pdf", 11 << 20}})
	a := decodeUpload(t, r)
	if r.status != 413 || a.ConfUID != conf || len(a.Refused) != 1 || a.Refused[0].Filename != "sky-atlas.pdf" ||
		a.Refused[0].Kind != "too_large" || !regexp.MustCompile(`^the file is more than 10\.\d MB; knowledge\.max_file_bytes allows 10 MB$`).MatchString(a.Refused[0].Reason) ||
		!strings.HasPrefix(a.Error, "sky-atlas.pdf: ") {
		t.Fatalf("an 11 MB chunked upload: %d %s", r.status, r.body)
	}
	// A small file, then one that takes the upload past the limit: both
	// are refused, the one it was cut in first.
	r = sendChunked(t, m.Addr(), docsPath, []part{{"notes.md", 2 << 10}, {"sky-atlas.pdf", 11 << 20}})
	a = decodeUpload(t, r)
	if r.status != 413 || len(a.Refused) != 2 || a.Refused[0].Filename != "sky-atlas.pdf" || a.Refused[1].Filename != "notes.md" ||
		a.Refused[1].Kind != "too_large" || !strings.Contains(a.Refused[1].Reason, "not taken") ||
		!strings.HasPrefix(a.Error, "none of the 2 files was taken; the first: sky-atlas.pdf: ") {
		t.Fatalf("a small file, then an 11 MB one, chunked: %d %s", r.status, r.body)
	}
	if docs := kbList(t, m.Addr(), conf); len(docs) != 0 {
		t.Fatalf("refused uploads left documents: %+v", docs)
	}
	// koe still takes an upload within the limit.
	if status, a := kbUpload(t, kbDocsURL(m.Addr(), conf), []kbPart{{field: "file", filename: "notes.md", mime: "text/markdown",
		data: []byte("# Notes\n\nThe dome opens at dusk.\n")}}); status != 201 || len(a.Added) != 1 {
		t.Fatalf("a small upload after the refusals: %d %+v", status, a)
	}
}
