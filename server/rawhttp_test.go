package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// rawResp is one response read off a raw connection.
type rawResp struct {
	status int
	header http.Header
	body   string
}

// rawExchange sends exactly req over a new TCP connection and reads every
// response koe sends until it closes the connection. closed is false when
// the connection was still open after the hang guard.
func rawExchange(t *testing.T, addr, req string) (resps []rawResp, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second)) // hang guard
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return resps, isClosed(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resps = append(resps, rawResp{status: resp.StatusCode, header: resp.Header, body: string(body)})
		if err != nil {
			return resps, isClosed(err)
		}
	}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		(!errors.Is(err, os.ErrDeadlineExceeded) && strings.Contains(err.Error(), "connection reset"))
}

// rawGet sends one GET with the given extra header lines ("Name: value")
// and Connection: close, and returns koe's answer.
func rawGet(t *testing.T, addr, path, host string, headers ...string) rawResp {
	t.Helper()
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\n")
	if host != "" {
		b.WriteString("Host: " + host + "\r\n")
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	resps, _ := rawExchange(t, addr, b.String())
	if len(resps) != 1 {
		t.Fatalf("GET %s (Host %q): %d responses, want 1", path, host, len(resps))
	}
	return resps[0]
}

// dialRaw opens a TCP connection that the test closes at cleanup.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitClosed reads from c until koe closes it, failing after the guard.
func waitClosed(t testing.TB, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: koe did not close the connection", what)
	}
}
