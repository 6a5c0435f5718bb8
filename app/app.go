// Package app wires koe together: configuration in, a running server out.
// main uses it, and so do the end-to-end tests and the load tool, so that
// they exercise exactly the wiring users run.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"koe/agent"
	"koe/asr"
	"koe/bolt"
	"koe/config"
	"koe/conversation"
	"koe/coord"
	"koe/histories"
	"koe/knowledge"
	"koe/live"
	"koe/llm"
	"koe/mcp"
	"koe/metrics"
	"koe/postgres"
	"koe/recall"
	"koe/scene"
	"koe/server"
	"koe/static"
	"koe/tts"
)

// DatabaseFile is the bbolt file's name inside the data directory.
const DatabaseFile = "koe.db"

// Main is a running koe.
type Main struct {
	Config config.Config
	Logger *slog.Logger
	// Getenv supplies environment overrides for character files; nil
	// means os.Getenv.
	Getenv func(string) string

	store     appStore
	recall    *recall.Service
	knowledge *knowledge.Service
	index     knowledge.Index
	mcp       *mcp.Manager
	hub       *conversation.Hub
	histories *histories.Service
	coord     *coord.RedisCoordinator // nil: turns are coordinated in process
	relay     *coord.WatchRelay       // with coord: watchers across instances
	bus       *coord.Bus              // with coord: news of changes between instances
	liveChat  *live.Service           // nil unless live_chat.enabled
	scenes    *scene.Service          // the streamer's scenes (scenes.go)
	metrics   *metrics.Metrics        // nil unless server.metrics
	server    *server.Server
	ln        net.Listener
	served    chan error
	llm       *http.Client

	// The start-up probe of the LLM runs in the background; Close stops it.
	stopProbe func()
	// stopMCPKnowledge stops reading MCP resources into knowledge bases.
	stopMCPKnowledge func()
	// kickRoots has the MCP servers' roots worked out again (mcproots.go).
	kickRoots func()

	// mcpCallback is where MCP logins come back to (mcplogin.go).
	mcpCallback callbackHolder

	// Close shuts down once; callers after the first (a signal and a
	// deferred Close, say) get its result.
	closeOnce sync.Once
	closeErr  error
}

// appStore is where koe keeps histories, summaries, prompts, recall and
// knowledge documents: the bbolt file in data_dir, or PostgreSQL.
type appStore interface {
	conversation.HistoryStore
	histories.Store
	recall.Store
	knowledge.DocStore
	knowledge.ChunkStore
	mcp.LoginStore
	// Ping checks that the database answers (/readyz).
	Ping(ctx context.Context) error
	Close() error
}

var (
	_ appStore = (*bolt.Store)(nil)
	_ appStore = (*postgres.Store)(nil)
)

// openStore opens the configured store: store_timeout bounds connecting
// to PostgreSQL and migrating its schema.
func openStore(cfg config.Config, log *slog.Logger) (appStore, error) {
	if cfg.Store != config.StorePostgres {
		return bolt.Open(filepath.Join(cfg.DataDir, DatabaseFile), bolt.Options{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StoreTimeout)
	defer cancel()
	pg, err := postgres.Open(ctx, cfg.StoreDSN, postgres.Options{Timeout: cfg.StoreTimeout})
	if err != nil {
		return nil, err
	}
	logSchema(log, pg)
	return pg, nil
}

// probeTimeout bounds the start-up check of the LLM server.
const probeTimeout = 10 * time.Second

// Open opens the database and starts listening; it returns once koe
// accepts connections. Addr reports where.
func (m *Main) Open() error {
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	cfg := m.Config
	store, err := openStore(cfg, m.Logger)
	if err != nil {
		return err
	}
	m.store = store
	// With coord: redis, instances tell each other of changes to what
	// they keep in memory: subscribed before anything is read.
	if err := m.openBus(cfg.Coord); err != nil {
		_ = store.Close()
		return err
	}
	// The tokenizer's vocabulary is not built here: the first count of
	// each encoding builds it (o200k_base: about 50 ms and 8 MiB of
	// resident memory), so an idle koe does not hold it.
	tok := agent.NewTokenizer(cfg.Character.LLM.Model)

	// One pool for every session's LLM and speech calls. No overall
	// timeout: replies stream for as long as they need; the LLM's
	// idle_timeout and the TTS timeout catch a server that goes quiet.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	m.llm = &http.Client{Transport: transport}

	// Speech input is shared by all sessions; without it, typing still works.
	recognizer, asrErr := asr.New(cfg.ASR, m.llm)
	if asrErr != nil {
		m.Logger.Error("speech input is off", "err", asrErr)
	}
	var transcriber conversation.Transcriber
	if recognizer != nil {
		transcriber = recognizer
	}
	// MCP servers connect in the background; their tools appear as
	// they come up. Without any configured, the manager holds nothing.
	tools, err := mcp.Start(context.Background(), cfg.MCP, m.Logger, m.mcpOptions(store)...)
	if err != nil {
		m.stopRecall()
		m.closeBus()
		_ = store.Close()
		return err
	}
	m.mcp = tools
	var toolServers conversation.ToolServers
	if len(cfg.MCP.Servers) > 0 {
		toolServers = tools
	}
	m.recall = recall.New(recallOptions(cfg, store, tok, m.llm, m.Logger))
	if m.bus != nil {
		// Before anything is loaded: what other instances store and
		// forget from now on reaches this instance's memories.
		m.recall.Share(m.bus)
	}
	m.recall.StartPreload()
	if err := m.openKnowledge(cfg, tok); err != nil {
		m.mcp.Close()
		m.stopRecall()
		m.closeBus()
		_ = store.Close()
		return err
	}
	var coordinator conversation.Coordinator
	if cfg.Coord.Backend == coord.Redis {
		ctx, cancel := context.WithTimeout(context.Background(), coordOpenTimeout)
		cc := cfg.Coord
		cc.Name = cfg.InstanceName()
		rc, err := coord.NewRedis(ctx, cc, m.Logger)
		cancel()
		if err != nil {
			m.abandon(store)
			return err
		}
		m.coord, coordinator = rc, rc
		m.Logger.Info("turns are coordinated through redis", "coord.lease", cfg.Coord.Lease)
		if err := m.openRelay(cfg.Coord); err != nil {
			m.abandon(store)
			return err
		}
	}
	characters := config.NewCharacters(cfg, m.Getenv)
	m.followMCPRoots(characters)
	conversation.WarnMissingAvatars(characters, cfg.Server.AvatarsDir, m.Logger)
	// The store as conversations and the histories call it is timed when
	// metrics are on; nothing is measured (or paid for) when they are off.
	var timed metrics.HistoryStore = store
	var observer conversation.Observer
	var serverMetrics server.Metrics
	var metricsHandler http.Handler
	if cfg.Server.Metrics {
		m.metrics = metrics.NewInstance(cfg.InstanceName())
		m.watchPools()
		timed = m.metrics.TimeStore(store)
		observer, serverMetrics, metricsHandler = m.metrics, m.metrics, m.metrics.Handler()
		if m.coord != nil {
			m.coord.Observe(m.metrics)
		}
	}
	m.histories = histories.New(histories.Options{Store: timed, Characters: characters, PageLimit: cfg.Conversation.HistoryMessages,
		Saved: func(conf string) { m.hub.PromptsChanged(conf) }, News: m.news(), Logger: m.Logger})
	m.hub = conversation.NewHub(conversation.Deps{
		Config:     cfg.Conversation,
		Store:      timed,
		Histories:  m.histories,
		Observer:   observer,
		Characters: characters,
		NewLLM:     func(c agent.Config) agent.LLM { return llm.New(c, m.llm) },
		NewTTS: func(c tts.Config) (conversation.Synthesizer, error) {
			return tts.New(c, m.llm)
		},
		ASR:             transcriber,
		ASRErr:          asrErr,
		Backgrounds:     func() []string { return server.BackgroundFiles(cfg.Server.BackgroundsDir) },
		ToolServers:     toolServers,
		Recall:          m.recall,
		Knowledge:       m.knowledge,
		KnowledgeRouter: cfg.Knowledge.Router,
		Coordinator:     coordinator,
		WatchRelay:      m.watchRelay(),
		Logger:          m.Logger,
	})
	m.startRelay()
	m.scenes = m.openScenes(cfg, characters)
	var liveChatAPI server.LiveChat
	if cfg.LiveChat.Enabled {
		if m.liveChat, err = live.Open(m.liveOptions(cfg)); err != nil {
			m.abandon(store)
			return err
		}
		liveChatAPI = m.liveChat
	}
	// What /readyz checks: the store, and the shared coordinator if any.
	ready := []server.ReadyCheck{{Name: "store", Check: store.Ping}}
	if m.coord != nil {
		ready = append(ready, server.ReadyCheck{Name: "coord", Check: m.coord.Ping})
	}
	documents := knowledge.NewDocuments(m.knowledge, knowledge.DocumentsOptions{
		Count: func(conf string) (func(string) int, bool) {
			ch, ok := characters.Find(conf)
			return agent.NewTokenizer(ch.LLM.Model).Count, ok
		},
		Notify: m.hub.IngestNotice,
	})
	// MCP resources attached to characters' knowledge come in as
	// uploads do, as their servers connect.
	m.stopMCPKnowledge = followMCPKnowledge(m.mcp, knowledgeCharacters(characters, m.Logger), documents, m.Logger)
	m.server = server.New(HubOptions(m.hub, server.Options{
		Config:    cfg.Server,
		Histories: m.histories,
		Prompts:   m.histories,
		Overlays:  conversation.Overlays{Characters: characters},
		Documents: documents,
		Memories: recall.NewMemories(m.recall, recall.MemoriesOptions{
			Budget: func(conf string) (int, bool) {
				ch, ok := characters.Find(conf)
				return ch.Memory.RecallBudget, ok
			},
			MinBudget: agent.MinRecallBudget, MaxBudget: agent.MaxRecallBudget, DefaultBudget: agent.DefaultRecallBudget,
		}),
		Pages:          static.Pages(),
		MaxUploadBytes: cfg.Knowledge.MaxFileBytes,
		LiveChat:       liveChatAPI,
		Scenes:         m.scenes,
		MCP:            m.mcp,
		Logger:         m.Logger,
		Metrics:        serverMetrics,
		MetricsHandler: metricsHandler,
		Ready:          ready,
		Backup:         backupOf(store),
	}))
	if m.metrics != nil && m.server.TLS() {
		m.metrics.WatchCertificate(m.server.CertificateNotAfter)
	}
	m.reportMCP()

	addr := net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		m.abandon(store)
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	m.ln = ln
	m.mcpCallback.Store(callbackURL(cfg, ln, m.server.TLS()))
	m.served = make(chan error, 1)
	srv := m.server
	go func() { m.served <- srv.Serve(ln) }()
	m.stopProbe = llm.StartProbe(cfg.Character.LLM, m.llm, probeTimeout, m.Logger)
	ws := "ws://"
	if m.server.TLS() {
		ws = "wss://"
	}
	m.Logger.Info("koe is listening",
		"ws", ws+ln.Addr().String()+"/client-ws",
		"llm", cfg.Character.LLM.BaseURL, "model", cfg.Character.LLM.Model,
		"data", cfg.DataDir)
	return nil
}

// liveOptions are the live chat's parts: with coord: redis, the instances
// elect the one that runs it.
func (m *Main) liveOptions(cfg config.Config) live.Options {
	opts := live.Options{Config: cfg.LiveChat, DefaultCharacter: cfg.Character.ConfUID, Stages: m.hub, Recall: m.recall,
		Lease: cfg.Coord.Lease, Logger: m.Logger, StateDir: cfg.DataDir, Scenes: m.scenes}
	if m.coord != nil {
		opts.Elect = func(name string) live.Leadership { return m.coord.NewLeader(name) }
	}
	if m.metrics != nil {
		opts.Running = m.metrics.LiveChatLeader
	}
	return opts
}

// recallOptions builds the recall service's options: keywords always,
// vectors too when an embeddings endpoint is configured.
func recallOptions(cfg config.Config, store recall.Store, tok *agent.Tokenizer, client *http.Client, log *slog.Logger) recall.Options {
	opts := recall.Options{Store: store, Count: tok.Count, Logger: log}
	if cfg.Store != config.StorePostgres {
		opts.IndexAtOnce = recall.IndexAtOnce
	}
	if !cfg.Embeddings.Enabled() {
		log.Info("recall ranks memories by keywords (set embeddings.base_url to add vectors)")
		return opts
	}
	opts.Embedder = llm.NewEmbedder(cfg.Embeddings, client)
	opts.QueryTimeout = cfg.Embeddings.QueryTimeout
	log.Info("recall ranks memories by keywords and vectors", "embeddings", cfg.Embeddings.BaseURL, "model", cfg.Embeddings.Model)
	return opts
}

// openKnowledge opens the configured store of document chunks and starts
// catching it up with the stored documents in the background.
func (m *Main) openKnowledge(cfg config.Config, tok *agent.Tokenizer) error {
	kc := cfg.Knowledge
	var peers knowledge.Peers
	if m.bus != nil {
		peers = coord.KnowledgeNewsOn(m.bus, cfg.Coord, m.Logger)
	}
	var idx knowledge.Index
	switch kc.Store {
	case knowledge.StoreLocal:
		local, err := knowledge.OpenLocalIndex(context.Background(), m.store, m.Logger)
		if err != nil {
			return fmt.Errorf("knowledge: open the local store: %w", err)
		}
		idx = local
	case knowledge.StorePostgres:
		ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
		pg, err := postgres.OpenKnowledgeIndex(ctx, kc.DSN, m.Logger)
		cancel()
		if err != nil {
			return fmt.Errorf("knowledge: open the postgres store: %w", err)
		}
		idx = pg
	default:
		idx = knowledge.NewMemoryIndex()
	}
	m.index = idx
	opts := knowledge.Options{Config: kc, Docs: m.store, Index: idx, Count: tok.Count, Peers: peers, Logger: m.Logger}
	switch {
	case !idx.Vectors():
		m.Logger.Info("knowledge: documents are found by keywords", "store", kc.Store, "router", kc.Router)
	case cfg.Embeddings.Enabled():
		opts.Embedder = llm.NewEmbedder(cfg.Embeddings, m.llm)
		m.Logger.Info("knowledge: documents are found by keywords and vectors", "store", kc.Store, "router", kc.Router, "model", cfg.Embeddings.Model)
	default:
		m.Logger.Info("knowledge: documents are found by keywords only: set embeddings.base_url to add vectors", "store", kc.Store, "router", kc.Router)
	}
	m.knowledge = knowledge.New(opts)
	m.knowledge.Start()
	return nil
}

// abandon closes, in reverse order, what a start that fails after the
// knowledge store opened had opened (each part closes only if it was).
func (m *Main) abandon(store appStore) {
	if m.stopMCPKnowledge != nil {
		m.stopMCPKnowledge()
	}
	m.liveChat.Close()
	m.scenes.Close()
	m.closeCoord()
	m.mcp.Close()
	m.stopRecall()
	m.stopKnowledge()
	m.closeBus()
	_ = store.Close()
}

// coordOpenTimeout bounds connecting to Redis (coord: redis) at start.
const coordOpenTimeout = 30 * time.Second

// closeCoord closes the connection to Redis, if koe has one.
func (m *Main) closeCoord() {
	m.closeRelay()
	if m.coord == nil {
		return
	}
	if err := m.coord.Close(); err != nil {
		m.Logger.Warn("coord: closing the connection to redis failed", "err", err)
	}
}

// postgresOpenTimeout bounds connecting to PostgreSQL and migrating its
// schema at start.
const postgresOpenTimeout = 30 * time.Second

// stopKnowledge stops catching up and closes the store of chunks.
func (m *Main) stopKnowledge() {
	m.knowledge.Close()
	if err := m.index.Close(); err != nil {
		m.Logger.Warn("knowledge: closing the store failed", "err", err)
	}
}

// stopRecall stops loading and indexing; what is left to index is caught
// up at the next start.
func (m *Main) stopRecall() {
	m.recall.Close()
}

// SettleMemories waits until every message stored so far is in its
// character's recall index (or ctx ends). Live turns never wait for
// indexing; tests and tools that need what was just said use this.
func (m *Main) SettleMemories(ctx context.Context) error { return m.recall.Settle(ctx) }

// Knowledge is the characters' knowledge bases, for tests and tools that
// fill one without going through the REST routes.
func (m *Main) Knowledge() *knowledge.Service { return m.knowledge }

// Addr is the address koe listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Done delivers Serve's error if the server stops on its own (it never
// does before Close is called unless listening fails).
func (m *Main) Done() <-chan error { return m.served }

// Close shuts down gracefully within the configured timeout: no new
// connections, running turns cancelled and persisted, sockets closed, the
// database closed last.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown() })
	return m.closeErr
}

func (m *Main) shutdown() error {
	if m.server == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.Config.Server.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	m.stopProbe()
	// The live chat first: its running turn ends (kept as far as it was
	// heard) while its watchers are still connected.
	m.liveChat.Close()
	// Then the scenes: each line being said stops, kept as heard, while
	// the overlays still watch.
	m.scenes.Close()
	err := m.server.Shutdown(ctx)
	// Before the hub: reading a resource in tells its sessions.
	if m.stopMCPKnowledge != nil {
		m.stopMCPKnowledge()
	}
	// Closed sessions may still be storing a summary; the database stays
	// open until they have.
	m.hub.Close()
	m.closeCoord()
	m.stopRecall()
	m.stopKnowledge()
	m.closeBus()
	m.mcp.Close()
	m.llm.CloseIdleConnections()
	if cerr := m.store.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
	}
	m.Logger.Info("koe stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}
