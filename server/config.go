package server

import (
	"fmt"
	"time"
)

// Config holds the HTTP/WebSocket settings.
type Config struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// AllowedOrigins are browser origins allowed to open /client-ws besides
	// localhost and the server's own host, e.g. "https://vtuber.example.org".
	// "*" allows any origin; "null" allows pages opened from file://.
	AllowedOrigins []string `yaml:"allowed_origins"`
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
	// SendQueueSize bounds the messages waiting for one client. While it is
	// full, that client's own turn waits; a client whose queue stays full
	// for WriteTimeout is disconnected. Other clients never wait.
	SendQueueSize   int           `yaml:"send_queue_size"`
	WriteTimeout    time.Duration `yaml:"write_timeout"`
	PingInterval    time.Duration `yaml:"ping_interval"`
	PongTimeout     time.Duration `yaml:"pong_timeout"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Host:            "127.0.0.1",
		Port:            12393,
		Live2DModelsDir: "live2d-models",
		BackgroundsDir:  "backgrounds",
		AvatarsDir:      "avatars",
		MaxMessageBytes: 8 << 20,
		SendQueueSize:   256,
		WriteTimeout:    10 * time.Second,
		PingInterval:    30 * time.Second,
		PongTimeout:     75 * time.Second,
		ShutdownTimeout: 5 * time.Second,
	}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	switch {
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("server.port %d is out of range", c.Port)
	case c.MaxMessageBytes < 1024:
		return fmt.Errorf("server.max_message_bytes %d is too small (at least 1024)", c.MaxMessageBytes)
	case c.SendQueueSize < 8:
		return fmt.Errorf("server.send_queue_size %d is too small (at least 8)", c.SendQueueSize)
	case c.WriteTimeout <= 0 || c.PingInterval <= 0 || c.ShutdownTimeout <= 0:
		return fmt.Errorf("server timeouts must be positive")
	case c.PongTimeout <= c.PingInterval:
		return fmt.Errorf("server.pong_timeout (%s) must be longer than server.ping_interval (%s)", c.PongTimeout, c.PingInterval)
	}
	return nil
}
