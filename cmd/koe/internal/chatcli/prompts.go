package chatcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"koe/protocol"
)

// promptList is a /prompts listing.
type promptList = []protocol.MCPPrompt

// listPrompts shows the prompts of the character's MCP servers, numbered
// for /prompt, with their arguments (* marks a required one).
func (c *chat) listPrompts(ctx context.Context) error {
	if c.conf == "" {
		return errNoCharacter
	}
	list, err := c.api.MCPPrompts(ctx, c.conf)
	if err != nil {
		return errors.New(c.describe(err))
	}
	c.prompts = list.Prompts
	for _, u := range list.Unavailable {
		c.say("(%s)", u)
	}
	if len(list.Prompts) == 0 {
		c.say("No MCP prompts for %s.", c.conf)
		return nil
	}
	for i, p := range list.Prompts {
		var args []string
		for _, a := range p.Arguments {
			if a.Required {
				args = append(args, a.Name+"*")
			} else {
				args = append(args, a.Name)
			}
		}
		line := fmt.Sprintf("%3d  %s/%s", i+1, p.Server, p.Name)
		if len(args) > 0 {
			line += " " + strings.Join(args, " ")
		}
		if about := cmp.Or(p.Title, p.Description); about != "" {
			line += "  — " + shorten(about, 60)
		}
		c.say("%s", line)
	}
	c.say(`/prompt <n> name=value … sends one (quote a value with spaces: city="New York").`)
	return nil
}

// usePrompt sends prompt n of the last listing (or server/name), filled
// with name=value arguments, as the next message.
func (c *chat) usePrompt(ctx context.Context, arg string) error {
	which, rest, _ := strings.Cut(arg, " ")
	if which == "" {
		return errors.New("which prompt? /prompts lists them; /prompt <n> name=value …")
	}
	args, err := promptArguments(rest)
	if err != nil {
		return err
	}
	ref := protocol.MCPPromptRef{Arguments: args}
	var known *protocol.MCPPrompt
	if n, err := strconv.Atoi(which); err == nil {
		if len(c.prompts) == 0 {
			if err := c.listPrompts(ctx); err != nil {
				return err
			}
		}
		if n < 1 || n > len(c.prompts) {
			return fmt.Errorf("there is no prompt %d: /prompts lists %d", n, len(c.prompts))
		}
		known = &c.prompts[n-1]
		ref.Server, ref.Prompt = known.Server, known.Name
	} else if server, name, ok := strings.Cut(which, "/"); ok && server != "" && name != "" {
		ref.Server, ref.Prompt = server, name
	} else {
		return fmt.Errorf("%q is neither a number of /prompts nor server/prompt", which)
	}
	if known != nil {
		for _, a := range known.Arguments {
			if _, ok := args[a.Name]; a.Required && !ok {
				return fmt.Errorf("prompt %s needs %s=…%s", known.Name, a.Name, described(a.Description))
			}
		}
	}
	c.send(ctx, protocol.ChatRequest{MCPPrompt: &ref})
	return nil
}

func described(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

// promptArguments reads name=value pairs separated by spaces; a value in
// double quotes may hold spaces and Go escapes.
func promptArguments(s string) (map[string]string, error) {
	args := map[string]string{}
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return args, nil
		}
		name, rest, ok := strings.Cut(s, "=")
		if !ok || name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
			return nil, fmt.Errorf("arguments are name=value, not %q", shorten(s, 40))
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("the value of %s has no closing quote", name)
			}
			value, _ = strconv.Unquote(quoted)
			rest = rest[len(quoted):]
		} else {
			end := strings.IndexFunc(rest, unicode.IsSpace)
			if end < 0 {
				end = len(rest)
			}
			value, rest = rest[:end], rest[end:]
		}
		args[name] = value
		s = rest
	}
}
