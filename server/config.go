package server

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// EnvAuthToken overrides server.auth_token, so that the token need not be
// written into a file.
const EnvAuthToken = "KOE_AUTH_TOKEN"

// Config holds the HTTP/WebSocket settings.
type Config struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// AllowedOrigins are browser origins allowed to open /client-ws besides
	// localhost and the server's own host, e.g. "https://vtuber.example.org".
	// "*" allows any origin; "null" allows pages opened from file://.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts are host names koe answers to besides localhost,
	// *.localhost and literal IP addresses: the names of a reverse proxy or
	// of the machine, e.g. "koe.example.org". Other Host headers are
	// refused, which defeats DNS rebinding. "*" allows any.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AuthToken, when set, is required on every request but GET /healthz
	// and /readyz (env KOE_AUTH_TOKEN overrides it).
	AuthToken string `yaml:"auth_token"`
	// InsecureNoAuth lets koe listen beyond loopback without AuthToken,
	// for set-ups where a proxy in front of koe authenticates users.
	InsecureNoAuth bool `yaml:"insecure_no_auth"`
	// WebClientDir, when set, is served at / instead of koe's own pages:
	// point it at a build of the Open-LLM-VTuber web client.
	WebClientDir    string `yaml:"web_client_dir"`
	Live2DModelsDir string `yaml:"live2d_models_dir"`
	BackgroundsDir  string `yaml:"backgrounds_dir"`
	AvatarsDir      string `yaml:"avatars_dir"`
	// MaxMessageBytes is the largest client message koe reads. A larger
	// one is skipped with an error frame and the connection stays open, up
	// to four times this size; beyond that the connection is closed (1009).
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// RealtimeMaxItems bounds the items a /v1/realtime connection
	// remembers: past it answered ones are forgotten oldest first, and an
	// item no response has answered yet is refused.
	RealtimeMaxItems int `yaml:"realtime_max_items"`
	// SendQueueSize bounds the messages waiting for one client. While it is
	// full, that client's own turn waits; a client whose queue stays full
	// for WriteTimeout is disconnected. Other clients never wait.
	SendQueueSize int `yaml:"send_queue_size"`
	// WatcherQueueBytes bounds what waits for one watcher (a
	// /client-ws?watch= connection), and a group member's or chat API
	// stream's copies of the other members' replies. Speakers never wait
	// for watchers: a watcher this far behind is disconnected instead.
	WatcherQueueBytes int           `yaml:"watcher_queue_bytes"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	PingInterval      time.Duration `yaml:"ping_interval"`
	PongTimeout       time.Duration `yaml:"pong_timeout"`
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout"`
	// DrainTimeout bounds the drain that the first SIGTERM or SIGINT
	// begins (drain.go): the turns running are given this long to finish,
	// then stopped and stored as heard, and shutdown (ShutdownTimeout)
	// follows. 0: no drain, every running turn is stopped at once.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// MaxConnections caps open connections, WebSockets included; one more
	// gets a 503. 0 derives it from the open-file limit (see
	// defaultMaxConnections).
	MaxConnections int `yaml:"max_connections"`
	// HealthConnections more connections are let in past MaxConnections
	// for /healthz, /readyz and /metrics only (anything else on them gets
	// a 503), so that probes still get through to a koe kept full.
	HealthConnections int `yaml:"health_connections"`
	// ReadTimeout bounds reading one request, from the connection's start
	// or the request's first byte; IdleTimeout bounds the wait for the next
	// request on a kept-alive connection. WebSockets are not affected once
	// upgraded.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// SSEHeartbeat is how often a chat API event stream with nothing to
	// say gets a comment line, so that proxies keep it open.
	SSEHeartbeat time.Duration `yaml:"sse_heartbeat"`
	// Metrics serves /metrics in the Prometheus text format, behind the
	// same Host check and token as the API.
	Metrics bool `yaml:"metrics"`
	// ReadyTimeout bounds each check /readyz runs (the store, and the
	// coordinator when there is one); a check slower than this fails.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// TLSCert and TLSKey, both or neither, are PEM files: koe then serves
	// HTTPS and WSS on its port, and rereads them on SIGHUP. TLSCert may
	// hold the chain after the certificate.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// TrustedProxies are the reverse proxies (addresses, CIDR ranges) whose
	// X-Forwarded-For koe believes: a request from one is logged with the
	// client's address that header gives (see clientaddr.go). Empty: the
	// header is ignored, since any client can write it.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Host:              "127.0.0.1",
		Port:              12393,
		AllowedHosts:      []string{},
		Live2DModelsDir:   "live2d-models",
		BackgroundsDir:    "backgrounds",
		AvatarsDir:        "avatars",
		MaxMessageBytes:   8 << 20,
		RealtimeMaxItems:  1024,
		SendQueueSize:     256,
		WatcherQueueBytes: 8 << 20,
		WriteTimeout:      10 * time.Second,
		PingInterval:      30 * time.Second,
		PongTimeout:       75 * time.Second,
		ShutdownTimeout:   5 * time.Second,
		DrainTimeout:      30 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       60 * time.Second,
		SSEHeartbeat:      15 * time.Second,
		Metrics:           true,
		ReadyTimeout:      2 * time.Second,
		HealthConnections: 16,
		TrustedProxies:    []string{},
	}
}

// maxDrainTimeout bounds server.drain_timeout: a turn longer than this is
// stuck, and a restart must not wait for it.
const maxDrainTimeout = time.Hour

// ApplyEnv applies the environment overrides; getenv may be nil.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		return
	}
	if v := getenv(EnvAuthToken); v != "" {
		c.AuthToken = v
	}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	switch {
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("server.port %d is out of range", c.Port)
	case c.MaxMessageBytes < 1024:
		return fmt.Errorf("server.max_message_bytes %d is too small (at least 1024)", c.MaxMessageBytes)
	case c.RealtimeMaxItems < 16 || c.RealtimeMaxItems > 1<<16:
		return fmt.Errorf("server.realtime_max_items %d is out of range: 16 to 65536 (default 1024)", c.RealtimeMaxItems)
	case c.SendQueueSize < 8:
		return fmt.Errorf("server.send_queue_size %d is too small (at least 8)", c.SendQueueSize)
	case c.WatcherQueueBytes < 64<<10:
		return fmt.Errorf("server.watcher_queue_bytes %d is too small (at least 65536: a spoken sentence is often more)", c.WatcherQueueBytes)
	case c.WriteTimeout <= 0 || c.PingInterval <= 0 || c.ShutdownTimeout <= 0 || c.ReadTimeout <= 0 || c.IdleTimeout <= 0 || c.SSEHeartbeat <= 0 || c.ReadyTimeout <= 0:
		return fmt.Errorf("server timeouts must be positive")
	case c.DrainTimeout < 0 || c.DrainTimeout > maxDrainTimeout:
		return fmt.Errorf("server.drain_timeout %s is out of range: 0 (no drain: running turns are stopped at once) to %s (default 30s)", c.DrainTimeout, maxDrainTimeout)
	case c.PongTimeout <= c.PingInterval:
		return fmt.Errorf("server.pong_timeout (%s) must be longer than server.ping_interval (%s)", c.PongTimeout, c.PingInterval)
	case c.MaxConnections < 0:
		return fmt.Errorf("server.max_connections %d is negative (0 derives it from the open-file limit)", c.MaxConnections)
	case c.HealthConnections < 0 || c.HealthConnections > 1024:
		return fmt.Errorf("server.health_connections %d is out of range: 0 to 1024 (default 16)", c.HealthConnections)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("server.tls_cert and server.tls_key go together: set both (PEM files: the certificate and its private key) or neither")
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
			return fmt.Errorf("server.allowed_hosts entry %q: give a bare host name, without scheme or port, e.g. koe.example.org", h)
		}
	}
	if err := validToken(c.AuthToken); err != nil {
		return err
	}
	if _, err := parseTrustedProxies(c.TrustedProxies); err != nil {
		return err
	}
	if c.AuthToken == "" && !c.InsecureNoAuth && !isLoopbackHost(c.Host) {
		return fmt.Errorf("server.host %q lets other machines connect, and server.auth_token is not set: "+
			"set server.auth_token (or the %s environment variable) to a long random string, "+
			"or set server.insecure_no_auth: true if a proxy in front of koe checks who connects", c.Host, EnvAuthToken)
	}
	return nil
}

// minTokenLen keeps tokens out of guessing range.
const minTokenLen = 16

// validToken accepts tokens that travel unchanged in a header, a URL query,
// and a WebSocket subprotocol name.
func validToken(tok string) error {
	if tok == "" {
		return nil
	}
	if len(tok) < minTokenLen {
		return fmt.Errorf("server.auth_token is too short (%d characters, at least %d): use e.g. the output of `openssl rand -hex 32`", len(tok), minTokenLen)
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '~') {
			return fmt.Errorf("server.auth_token may hold only letters, digits and - _ . ~ (it travels in URLs and WebSocket subprotocol names)")
		}
	}
	return nil
}

// isLoopbackHost reports whether listening on host keeps koe to this
// machine. "" and 0.0.0.0 mean every interface; a name other than
// localhost may resolve to anything.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
