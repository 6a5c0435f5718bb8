// Package ircdtest runs a real IRC server (Debian's ngircd) on loopback
// for tests, with chatters speaking in its channels.
package ircdtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/proctest"
)

// safety bounds every wait: ngircd starting, a chatter's line. Only a
// hang reaches it.
const safety = 60 * time.Second

// Server is a real IRC server (Debian's ngircd) on loopback: a
// plain-text port for chatters and a TLS port with a self-signed
// certificate (CertFile) for the client under test.
type Server struct {
	t         testing.TB
	bin, conf string
	Plain     int    // plain-text port
	TLS       int    // TLS port
	CertFile  string // the TLS port's certificate (PEM)
	d         *proctest.Daemon
}

// freePorts returns n distinct ports free on loopback just now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths.
func selfSigned(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "koe live chat test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Start writes a configuration (with a TLS port using a fresh
// self-signed certificate, and password when not "") and starts the
// server; the test's cleanup stops it.
func Start(t testing.TB, password string) *Server {
	t.Helper()
	testkit.External(t, "ngircd")
	bin, err := exec.LookPath("ngircd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/ngircd"); serr == nil {
			bin = "/usr/sbin/ngircd"
		} else {
			bin = proctest.LookPath(t, "ngircd", "ngircd")
		}
	}
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	ports := freePorts(t, 2)
	n := &Server{t: t, bin: bin, conf: filepath.Join(dir, "ngircd.conf"), Plain: ports[0], TLS: ports[1], CertFile: certFile}
	pass := ""
	if password != "" {
		pass = "Password = " + password + "\n"
	}
	conf := fmt.Sprintf(`[Global]
Name = irc.koe.test
Info = koe live chat test
%sListen = 127.0.0.1
Ports = %d
MotdPhrase = koe test
PidFile = %s
[Limits]
MaxNickLength = 30
MaxConnectionsIP = 0
[Options]
PAM = no
Ident = no
DNS = no
[SSL]
CertFile = %s
KeyFile = %s
Ports = %d
`, pass, n.Plain, filepath.Join(dir, "ngircd.pid"), certFile, keyFile, n.TLS)
	if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()
	return n
}

// Start runs ngircd (again, after Stop) and waits for its "ready" line.
func (n *Server) Start() {
	n.t.Helper()
	n.d = proctest.StartDaemon(n.t, "ngircd", exec.Command(n.bin, "-n", "-f", n.conf), "ready.", safety)
}

// Output is what ngircd has logged.
func (n *Server) Output() string { return n.d.Output() }

// Stop kills ngircd and waits for it.
func (n *Server) Stop() { n.d.Stop() }

// Chatter is a plain IRC client speaking for a viewer.
type Chatter struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	nick string
}

// NewChatter connects nick to the plain port and joins #channel.
func NewChatter(t testing.TB, port int, nick, channel string) *Chatter {
	t.Helper()
	return NewChatterPass(t, port, nick, channel, "")
}

// NewChatterPass is NewChatter on a server started with a password.
func NewChatterPass(t testing.TB, port int, nick, channel, password string) *Chatter {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(safety))
	c := &Chatter{t: t, conn: conn, r: bufio.NewReader(conn), nick: nick}
	if password != "" {
		c.Send("PASS " + password)
	}
	c.Send("NICK " + nick)
	c.Send("USER " + nick + " 0 * :" + nick)
	c.WaitFor(" 001 ")
	c.Send("JOIN #" + channel)
	c.WaitFor(" JOIN ")
	return c
}

// Send writes one IRC line.
func (c *Chatter) Send(line string) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.conn, "%s\r\n", line); err != nil {
		c.t.Fatalf("chatter %s: %v", c.nick, err)
	}
}

// WaitFor reads lines (answering PINGs) until one contains part.
func (c *Chatter) WaitFor(part string) {
	c.t.Helper()
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("chatter %s waiting for %q: %v", c.nick, part, err)
		}
		if strings.HasPrefix(line, "PING ") {
			c.Send("PONG " + strings.TrimSpace(line[5:]))
		}
		if strings.Contains(line, part) {
			return
		}
	}
}

// Names lists the nicks in #channel, as the server answers NAMES.
func (c *Chatter) Names(channel string) []string {
	c.t.Helper()
	c.Send("NAMES #" + channel)
	var names []string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("chatter %s waiting for the names in #%s: %v", c.nick, channel, err)
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "PING ") {
			c.Send("PONG " + line[5:])
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) < 2:
		case fields[1] == "353": // :server 353 me = #channel :nick @nick
			if _, list, ok := strings.Cut(line[1:], " :"); ok {
				for _, n := range strings.Fields(list) {
					names = append(names, strings.TrimLeft(n, "@+"))
				}
			}
		case fields[1] == "366": // end of the list
			return names
		}
	}
}
