// Package chatcli is `koe chat`: a terminal chat with a running koe over
// its HTTP chat API. Answers stream in as they are written; tool calls
// show with their input and output; Ctrl-C stops a reply without leaving,
// and Ctrl-C at the prompt or Ctrl-D leaves.
package chatcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"koe/client"
)

// Environment variables that give the flags their defaults.
const (
	EnvURL   = "KOE_URL"
	EnvToken = "KOE_AUTH_TOKEN"
)

// DefaultURL is where koe listens out of the box.
const DefaultURL = "http://127.0.0.1:12393"

// Settings are what the command line chose.
type Settings struct {
	URL   string
	Token string
	// Character is the conf_uid to talk to ("": koe's default one).
	Character string
	// History continues that history ("": a new one).
	History string
}

// Terminal is what the chat reads and writes.
type Terminal struct {
	In  io.Reader
	Out io.Writer
	// Interrupts are the user's Ctrl-C.
	Interrupts <-chan os.Signal
	// Animate: Out is a terminal, so a running task's line can be a
	// spinner redrawn in place.
	Animate bool
	// Echo writes each line read after the prompt, for input that is
	// not typed on a terminal (which echoes it itself): the output then
	// reads as a transcript.
	Echo bool
}

// Main runs `koe chat` with the arguments after "chat" and returns the
// process's exit code.
func Main(args []string, stdin, stdout *os.File, stderr io.Writer, getenv func(string) string) int {
	s, err := parseFlags(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the flag package has said why
	}
	c, err := client.New(s.URL, client.WithToken(s.Token))
	if err != nil {
		fmt.Fprintf(stderr, "koe chat: %v (set -url or %s)\n", err, EnvURL)
		return 2
	}

	// Ctrl-C belongs to the chat (it stops a reply); the signals that
	// mean "go away" end it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)

	term := Terminal{
		In: stdin, Out: stdout, Interrupts: interrupts,
		Animate: isTerminal(stdout), Echo: !isTerminal(stdin),
	}
	if err := Run(ctx, c, s, term); err != nil {
		fmt.Fprintf(stderr, "koe chat: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (Settings, error) {
	flags := flag.NewFlagSet("koe chat", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: koe chat [flags]\n\nChat with a running koe from the terminal. Type /help in the chat for its commands.\n\n")
		flags.PrintDefaults()
	}
	url := getenv(EnvURL)
	if url == "" {
		url = DefaultURL
	}
	var s Settings
	flags.StringVar(&s.URL, "url", url, "koe's address (or set "+EnvURL+")")
	// The token's default is not printed: -help would show it.
	flags.StringVar(&s.Token, "token", "", "access token, when koe has server.auth_token (default from "+EnvToken+")")
	flags.StringVar(&s.Character, "character", "", "the character's conf_uid (default: koe's default character)")
	flags.StringVar(&s.History, "history", "", "continue this history (its uid; /history lists them)")
	if err := flags.Parse(args); err != nil {
		return s, err
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "koe chat: unexpected argument %q\n", flags.Arg(0))
		flags.Usage()
		return s, errors.New("unexpected argument")
	}
	if s.Token == "" {
		s.Token = getenv(EnvToken)
	}
	return s, nil
}

// chat is one session of koe chat; Run's goroutine owns it.
type chat struct {
	api   *client.Client
	url   string
	term  Terminal
	view  *view
	input *lineReader
	// conf and history say where the next message goes: conf is learned
	// from the first answer when the user named no character.
	conf    string
	history string
	rate    *float64
	// listed is the last /history listing, for /history <n>.
	listed []string
	// prompts is the last /prompts listing, for /prompt <n>.
	prompts promptList
}

// errQuit ends the chat from a command.
var errQuit = errors.New("quit")

// Run chats until the user leaves or ctx ends.
func Run(ctx context.Context, api *client.Client, s Settings, term Terminal) error {
	c := &chat{
		api: api, url: s.URL, term: term,
		view:  newView(term.Out, term.Animate),
		input: newLineReader(term.In),
		conf:  s.Character, history: s.History,
	}
	defer c.input.close()

	c.say("koe chat with %s. /help lists the commands; Ctrl-C stops a reply, Ctrl-D quits.", s.URL)
	if c.history != "" {
		if err := c.switchHistory(ctx, c.history); err != nil {
			c.say("error: %v", err)
		}
	}
	for {
		c.view.write(userPrompt)
		c.input.next()
		var in lineResult
		select {
		case <-ctx.Done():
			c.view.write("\n")
			return nil
		case <-term.Interrupts:
			c.view.write("\n")
			return nil
		case in = <-c.input.lines:
		}
		if in.err != nil {
			c.view.write("\n")
			if in.err == io.EOF {
				return nil
			}
			return fmt.Errorf("reading the terminal: %w", in.err)
		}
		if term.Echo {
			c.view.write(in.text + "\n")
		} else {
			c.view.atLineStart = true // the terminal echoed the line's end
		}
		text := strings.TrimSpace(in.text)
		var err error
		switch {
		case text == "":
		case strings.HasPrefix(text, "//"):
			c.turn(ctx, text[1:])
		case strings.HasPrefix(text, "/"):
			err = c.command(ctx, text)
		default:
			c.turn(ctx, text)
		}
		if errors.Is(err, errQuit) {
			return nil
		}
		if err != nil {
			c.say("error: %v", err)
		}
	}
}

// say writes a line of the chat's own.
func (c *chat) say(format string, args ...any) {
	c.view.line(fmt.Sprintf(format, args...))
}
