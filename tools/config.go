package tools

import (
	"fmt"
	"time"

	"koe/agent"
)

// Config is a character's tools section.
type Config struct {
	// Enabled names the built-in tools the character's model may call, in
	// the order it is told of them (empty: none, one LLM call per turn).
	Enabled []string `yaml:"enabled"`
	// Timeout bounds one call (0: DefaultTimeout); a call that runs out
	// is told to the model as an error and the turn goes on.
	Timeout time.Duration `yaml:"timeout"`
	// MaxResultChars bounds what one call returns to the model (0:
	// DefaultMaxResultChars).
	MaxResultChars int `yaml:"max_result_chars"`
	// MaxDocumentChars bounds each document a search tool returns (0:
	// DefaultMaxDocumentChars).
	MaxDocumentChars int                `yaml:"max_document_chars"`
	Calculator       CalculatorSettings `yaml:"calculator"`
	HTTP             HTTPSettings       `yaml:"http"`
	Weather          WeatherSettings    `yaml:"weather"`
	Wikipedia        WikipediaSettings  `yaml:"wikipedia"`
	WebSearch        WebSearchSettings  `yaml:"web_search"`
	Files            FilesSettings      `yaml:"files"`
	// Python configures the python tool (off unless enabled).
	Python PythonSettings `yaml:"python"`
	// MCPServers names the MCP servers (top-level mcp_servers) whose
	// tools the character may call.
	MCPServers []string `yaml:"mcp_servers"`
	// MCPKnowledge attaches MCP resources to the knowledge base.
	MCPKnowledge []MCPKnowledge `yaml:"mcp_knowledge"`
	// SpokenFiller, if set, is spoken when the model calls tools without
	// saying anything first ("Let me check."), so that a voice user is
	// not left in silence while they run. It is not part of the reply.
	SpokenFiller string `yaml:"spoken_filler"`
	// Allow, Deny and Confirm name tools (as the model sees them, `*`
	// matching any run of characters): Deny is never offered; Confirm,
	// and MCP tools annotated as changing things, run only after the
	// user's yes; Allow runs without asking.
	Allow   []string `yaml:"allow"`
	Deny    []string `yaml:"deny"`
	Confirm []string `yaml:"confirm"`
	// AskTimeout bounds the wait for the user's answer to a question put
	// while tools run (a confirmation, an MCP server's question); then
	// it is declined (0: DefaultAskTimeout).
	AskTimeout time.Duration `yaml:"ask_timeout"`
	// MaxQuestions bounds the questions one tool call may put to the user
	// (0: DefaultMaxQuestions); more are declined, so a server asking
	// again and again cannot hold a turn open.
	MaxQuestions int `yaml:"max_questions"`
}

// DefaultMaxQuestions is tools.max_questions' default.
const DefaultMaxQuestions = agent.DefaultMaxQuestions

// DefaultAskTimeout is tools.ask_timeout's default.
const DefaultAskTimeout = agent.DefaultAskTimeout

// Policy is what the character says of its tools by name.
func (c Config) Policy() agent.ToolPolicy {
	return agent.ToolPolicy{Allow: c.Allow, Deny: c.Deny, Confirm: c.Confirm}
}

// CalculatorSettings bound the calculator's expressions.
type CalculatorSettings struct {
	MaxChars int `yaml:"max_chars"`
	MaxNodes int `yaml:"max_nodes"`
}

// maxFillerRunes bounds tools.spoken_filler.
const maxFillerRunes = 200

// DefaultTimeout bounds one tool call unless tools.timeout says otherwise.
const DefaultTimeout = agent.DefaultToolTimeout

// Validate reports settings that can never work, by their keys. The
// settings of a tool are checked when it is enabled; read_file's folder
// must exist then, and Tavily's key must be in the environment.
func (c Config) Validate() error {
	if n := len([]rune(c.SpokenFiller)); n > maxFillerRunes {
		return fmt.Errorf("tools.spoken_filler is %d characters long; at most %d: it is said while tools run", n, maxFillerRunes)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("tools.timeout %s is negative (default %s)", c.Timeout, DefaultTimeout)
	}
	if c.AskTimeout < 0 || c.AskTimeout > time.Hour {
		return fmt.Errorf("tools.ask_timeout %s is out of range: 0 (%s) to 1h", c.AskTimeout, DefaultAskTimeout)
	}
	if c.MaxQuestions < 0 || c.MaxQuestions > 20 {
		return fmt.Errorf("tools.max_questions %d is out of range: 0 (%d) to 20", c.MaxQuestions, DefaultMaxQuestions)
	}
	for key, list := range map[string][]string{"tools.allow": c.Allow, "tools.deny": c.Deny, "tools.confirm": c.Confirm} {
		if err := agent.CheckPatterns(key, list); err != nil {
			return err
		}
	}
	if _, err := c.Box(Options{}); err != nil {
		return err
	}
	return nil
}

// Box builds the box of the enabled tools with the configured limits
// (nil when none is enabled). base gives what the configuration does
// not, such as the clock, the HTTP client and the environment.
func (c Config) Box(base Options) (*Box, error) {
	if len(c.Enabled) == 0 {
		return nil, nil
	}
	if err := checkNames(c.Enabled); err != nil {
		return nil, fmt.Errorf("tools.enabled: %w", err)
	}
	opts := base
	opts.MaxResultChars = c.MaxResultChars
	opts.MaxDocumentChars = c.MaxDocumentChars
	opts.CalculatorMaxChars = c.Calculator.MaxChars
	opts.CalculatorMaxNodes = c.Calculator.MaxNodes
	opts.Python = c.Python
	opts.HTTP = c.HTTP
	opts.Weather = c.Weather
	opts.Wikipedia = c.Wikipedia
	opts.WebSearch = c.WebSearch
	opts.Files = c.Files
	switch {
	case c.MaxResultChars < 0 || c.MaxResultChars > 0 && c.MaxResultChars < minResultChars:
		return nil, fmt.Errorf("tools.max_result_chars %d is out of range: 0 (%d) or at least %d", c.MaxResultChars, DefaultMaxResultChars, minResultChars)
	case c.Calculator.MaxChars < 0:
		return nil, fmt.Errorf("tools.calculator.max_chars %d is negative (default %d)", c.Calculator.MaxChars, DefaultCalculatorMaxChars)
	case c.Calculator.MaxNodes < 0:
		return nil, fmt.Errorf("tools.calculator.max_nodes %d is negative (default %d)", c.Calculator.MaxNodes, DefaultCalculatorMaxNodes)
	case c.MaxDocumentChars < 0 || c.MaxDocumentChars > 0 && c.MaxDocumentChars < minDocumentChars:
		return nil, fmt.Errorf("tools.max_document_chars %d is out of range: 0 (%d) or at least %d", c.MaxDocumentChars, DefaultMaxDocumentChars, minDocumentChars)
	}
	// What is left to check names its own keys.
	return New(c.Enabled, opts)
}
